/**
 * A user's own hostnames on their page: add one (or vouch for it as the
 * admin), see the TXT record that proves it and whether it is proved yet,
 * verify it now, delete it with confirmation.
 */
import { useRef, useState } from "preact/hooks";
import { api, messageOf, type Hostname } from "../api.ts";
import { utcDateTime } from "../../../../ui/format.ts";
import { notify } from "../../../../ui/notices.ts";
import { CopyButton } from "../../../../ui/components/copy.tsx";
import { Confirm } from "../../../../ui/components/dialog.tsx";
import { Badge, Empty, Field } from "../../../../ui/components/ui.tsx";

export function HostnameForm(props: { userId: number; onAdded(h: Hostname): void }) {
  const [name, setName] = useState("");
  const [vouch, setVouch] = useState(false);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (name.trim() === "") {
      setError("Hostname is required, such as demo.example.com");
      return input.current?.focus();
    }
    setBusy(true);
    try {
      const h = await api.addHostname(name.trim(), props.userId, vouch);
      setName("");
      setError(undefined);
      notify("ok", h.verified ? `${h.hostname} is ${h.username}'s, verified.` : `${h.hostname} is added: publish its TXT record, then verify it.`);
      props.onAdded(h);
    } catch (err) {
      setError(messageOf(err));
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="inline-form" onSubmit={submit} noValidate>
      <Field label="Hostname" error={error} hint="A name of their own, such as demo.example.com or *.dev.example.com" class="grow">
        {({ id, describedBy, invalid }) => (
          <input ref={input} id={id} name="hostname" autocomplete="off" autocapitalize="off" spellcheck={false} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
        )}
      </Field>
      <label class="check">
        <input type="checkbox" name="verified" checked={vouch} onChange={(e) => setVouch(e.currentTarget.checked)} /> Verified (I vouch for it)
      </label>
      <button type="submit" class="btn primary" disabled={busy}>
        {busy ? "Adding…" : "Add"}
      </button>
    </form>
  );
}

export function HostnameList(props: { hostnames: Hostname[]; onChanged(): void; empty: string }) {
  const [deleting, setDeleting] = useState<Hostname>();
  const [verifying, setVerifying] = useState<number>();
  const verify = async (h: Hostname) => {
    setVerifying(h.id);
    try {
      await api.verifyHostname(h.id);
      notify("ok", `${h.hostname} is verified.`);
      props.onChanged();
    } catch (err) {
      notify("error", messageOf(err));
    } finally {
      setVerifying(undefined);
    }
  };
  return (
    <>
      {props.hostnames.length === 0 ? (
        <Empty>{props.empty}</Empty>
      ) : (
        <ul class="list hostnames">
          {props.hostnames.map((h) => (
            <li key={h.id} data-hostname={h.hostname}>
              <div class="list-main">
                <span class="strong mono">{h.hostname}</span>{" "}
                {h.verified ? <Badge tone="ok">verified</Badge> : <Badge tone="warn">not verified</Badge>}
                <span class="muted small block">
                  added {utcDateTime(h.created_at)}
                  {h.verified_at && <> · verified {utcDateTime(h.verified_at)}</>}
                </span>
                {!h.verified && (
                  <span class="small block verification">
                    TXT record <code class="mono">{h.verification.name}</code> = <code class="mono">{h.verification.value}</code>{" "}
                    <CopyButton text={h.verification.value} label={`Copy the TXT value of ${h.hostname}`} />
                  </span>
                )}
              </div>
              {!h.verified && (
                <button type="button" class="btn small" disabled={verifying === h.id} onClick={() => verify(h)} aria-label={`Verify ${h.hostname}`}>
                  {verifying === h.id ? "Verifying…" : "Verify"}
                </button>
              )}
              <button type="button" class="btn small danger-ghost" onClick={() => setDeleting(h)} aria-label={`Delete ${h.hostname}`}>
                Delete
              </button>
            </li>
          ))}
        </ul>
      )}
      {deleting && (
        <Confirm
          title={`Delete ${deleting.hostname}?`}
          confirmLabel="Delete"
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await api.deleteHostname(deleting.id);
            notify("ok", `${deleting.hostname} is deleted.`);
            setDeleting(undefined);
            props.onChanged();
          }}
        >
          <p>Its tunnels will no longer be reached by this name.</p>
        </Confirm>
      )}
    </>
  );
}
