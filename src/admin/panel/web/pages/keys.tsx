/**
 * Admin API keys: make one (its secret shown once, with a curl line that
 * uses it), list them with their owner and state, revoke with confirmation.
 */
import { useRef, useState } from "preact/hooks";
import { api, messageOf, type AdminKey, type NewAdminKey } from "../api.ts";
import { CopyButton } from "../../../../ui/components/copy.tsx";
import { Confirm, Modal } from "../../../../ui/components/dialog.tsx";
import { Badge, Card, Empty, ErrorBox, Field, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { ago, utcDateTime } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { notify } from "../../../../ui/notices.ts";

const EXPIRY_CHOICES = [
  { value: "", label: "Never" },
  { value: "7", label: "In 7 days" },
  { value: "30", label: "In 30 days" },
  { value: "90", label: "In 90 days" },
  { value: "365", label: "In a year" },
];

const STATUS_TONE = { active: "ok", expired: "warn", revoked: "muted" } as const;

export function KeysPage() {
  useTitle("API keys");
  const keys = useApi(api.keys, []);
  const [revoking, setRevoking] = useState<AdminKey>();
  const [made, setMade] = useState<NewAdminKey>();
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>API keys</h1>
        <p class="muted">
          A key lets a script use the admin API as the admin who made it: <code>Authorization: Bearer brk_…</code>. It stops working when it expires, when it
          is revoked, or when its admin is disabled or demoted.
        </p>
      </div>
      <Card title="Make a key" id="make-key">
        <KeyForm
          onMade={(key) => {
            setMade(key);
            void keys.reload();
          }}
        />
      </Card>
      <Card title={`Keys${keys.data ? ` (${keys.data.length})` : ""}`} id="keys">
        {keys.error && !keys.data && <ErrorBox title="Could not load API keys" message={keys.error} retry={keys.reload} />}
        <StaleWarning error={keys.data ? keys.error : undefined} what="API keys" />
        {!keys.data && !keys.error && <Loading what="API keys" />}
        {keys.data && keys.data.length === 0 && <Empty>No API key yet.</Empty>}
        {keys.data && keys.data.length > 0 && (
          <ul class="list keys">
            {keys.data.map((k) => (
              <li key={k.id} class={k.status === "active" ? "" : "revoked"} data-key={k.name}>
                <div class="list-main">
                  <span class="strong">{k.name}</span> <Badge tone={STATUS_TONE[k.status]}>{k.status}</Badge>
                  <span class="muted small block">
                    #{k.id} · {k.username} · created {utcDateTime(k.created_at)} · {k.expires_at ? `expires ${utcDateTime(k.expires_at)}` : "never expires"} ·{" "}
                    {k.last_used ? <span title={utcDateTime(k.last_used)}>last used {ago(k.last_used)}</span> : "never used"}
                  </span>
                </div>
                {k.status !== "revoked" && (
                  <button type="button" class="btn small danger-ghost" onClick={() => setRevoking(k)} aria-label={`Revoke key ${k.name}`}>
                    Revoke
                  </button>
                )}
              </li>
            ))}
          </ul>
        )}
      </Card>
      {made && <SecretDialog made={made} onClose={() => setMade(undefined)} />}
      {revoking && (
        <Confirm
          title={`Revoke the key “${revoking.name}”?`}
          confirmLabel="Revoke key"
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            await api.revokeKey(revoking.id);
            notify("ok", `Key “${revoking.name}” revoked.`);
            await keys.reload();
          }}
        >
          <p>Scripts using this key get 401 from now on. This cannot be undone: they will need a new key.</p>
        </Confirm>
      )}
    </>
  );
}

function KeyForm(props: { onMade(key: NewAdminKey): void }) {
  const [name, setName] = useState("");
  const [expiry, setExpiry] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    if (name.trim() === "") {
      setError("Name it after the script or machine that will use it.");
      input.current?.focus();
      return;
    }
    setError(undefined);
    setBusy(true);
    try {
      props.onMade(await api.createKey(name.trim(), expiry === "" ? undefined : Number(expiry)));
      setName("");
    } catch (err) {
      setError(messageOf(err));
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="inline-form" onSubmit={submit} noValidate>
      <Field label="Name" error={error} hint="e.g. backup-cron or ci" class="grow">
        {({ id, describedBy, invalid }) => (
          <input ref={input} id={id} name="name" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" />
        )}
      </Field>
      <div class="field">
        <label for="key-expiry">Expires</label>
        <select id="key-expiry" value={expiry} onChange={(e) => setExpiry(e.currentTarget.value)}>
          {EXPIRY_CHOICES.map((c) => (
            <option key={c.value} value={c.value}>
              {c.label}
            </option>
          ))}
        </select>
      </div>
      <button type="submit" class="btn primary" disabled={busy}>
        {busy ? "Making…" : "Make key"}
      </button>
    </form>
  );
}

function SecretDialog(props: { made: NewAdminKey; onClose(): void }) {
  const example = `curl -H "Authorization: Bearer ${props.made.key}" ${location.origin}/api/users`;
  return (
    <Modal title={`API key “${props.made.name}”`} onClose={props.onClose} wide>
      <p class="warn-box">
        <strong>Copy it now.</strong> {props.made.message}
      </p>
      <div class="secret">
        <label for="key-secret">The key</label>
        <div class="copy-row">
          <input id="key-secret" class="mono" readOnly value={props.made.key} onFocus={(e) => e.currentTarget.select()} data-testid="key-secret" />
          <CopyButton text={props.made.key} label="Copy the key" />
        </div>
      </div>
      <div class="secret">
        <label for="key-example">Try it</label>
        <div class="copy-row">
          <textarea id="key-example" class="mono" readOnly rows={2} value={example} onFocus={(e) => e.currentTarget.select()} />
          <CopyButton text={example} label="Copy the example" />
        </div>
        <p class="hint">{props.made.expires_at ? `It expires ${utcDateTime(props.made.expires_at)} UTC.` : "It does not expire; revoke it here when it is no longer needed."}</p>
      </div>
      <div class="form-actions">
        <button type="button" class="btn primary" onClick={props.onClose}>
          I have stored it
        </button>
      </div>
    </Modal>
  );
}
