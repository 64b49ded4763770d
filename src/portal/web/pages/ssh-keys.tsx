/**
 * The user's SSH keys, on the devices page: with one, plain `ssh -R` opens
 * tunnels through the server's SSH gateway. Add a key (the line of a .pub
 * file), list, remove (its sessions close); the gateway's command and host
 * keys, whose fingerprints the user checks at their first ssh.
 */
import { useRef, useState } from "preact/hooks";
import { CopyButton } from "../../../ui/components/copy.tsx";
import { Confirm } from "../../../ui/components/dialog.tsx";
import { Card, Empty, ErrorBox, Field, Loading } from "../../../ui/components/ui.tsx";
import { ago, utcDateTime } from "../../../ui/format.ts";
import { useApi } from "../../../ui/hooks.ts";
import { notify } from "../../../ui/notices.ts";
import { api, messageOf, type SshKey } from "../api.ts";

export function SshKeysCard(props: { full: boolean; changed: () => Promise<unknown> }) {
  const keys = useApi(api.sshKeys, []);
  const gateway = useApi(api.sshGateway, []);
  const [text, setText] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [removing, setRemoving] = useState<SshKey>();
  const input = useRef<HTMLTextAreaElement>(null);

  const add = async (e: Event) => {
    e.preventDefault();
    const key = text.trim();
    if (key === "") {
      setError("Paste the line of your public key file, e.g. ~/.ssh/id_ed25519.pub");
      input.current?.focus();
      return;
    }
    setError(undefined);
    setBusy(true);
    try {
      const added = await api.addSshKey(key, name.trim() || undefined);
      notify("ok", `Key “${added.name}” added.`);
      setText("");
      setName("");
      await Promise.all([keys.reload(), props.changed()]);
    } catch (err) {
      setError(messageOf(err));
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  };

  const g = gateway.data;
  return (
    <Card title="SSH keys" id="ssh-keys">
      {g?.port !== null && g?.command && (
        <div class="ssh-gateway">
          <p>
            With a key here, open a tunnel with plain <code>ssh</code>, nothing to install:
          </p>
          <div class="copy-row">
            <input class="mono" readOnly value={g.command} aria-label="An ssh command" onFocus={(e) => e.currentTarget.select()} />
            <CopyButton text={g.command} label="Copy the ssh command" />
          </div>
          <p class="muted small">At your first ssh, check that the server's key is one of these:</p>
          <ul class="list fingerprints" aria-label="The server's host keys">
            {g.host_keys.map((k) => (
              <li key={k.type}>
                <span class="strong">{k.type}</span> <code data-testid="host-key">{k.fingerprint}</code>
              </li>
            ))}
          </ul>
        </div>
      )}
      {g?.port === null && <p class="muted">This server's SSH gateway is off; a key added here works once its admin turns it on.</p>}
      <form class="stack-form" onSubmit={add} noValidate>
        <Field label="Public key" error={error} hint="The one line of a .pub file: ed25519, ecdsa, or RSA of 2048 bits or more. Never the private key." class="grow">
          {({ id, describedBy, invalid }) => (
            <textarea ref={input} id={id} name="key" class="mono" rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" spellcheck={false} />
          )}
        </Field>
        <Field label="Name" hint="Optional: the key's comment is used otherwise">
          {({ id, describedBy }) => <input id={id} name="name" value={name} onInput={(e) => setName(e.currentTarget.value)} aria-describedby={describedBy} autocomplete="off" />}
        </Field>
        <button type="submit" class="btn primary" disabled={busy || props.full}>
          {busy ? "Adding…" : "Add the key"}
        </button>
      </form>
      <p class="muted small">
        Or, from a device logged in with <code>burrow login</code>: <code>burrow keys add ~/.ssh/id_ed25519.pub</code>
      </p>
      {keys.error && !keys.data && <ErrorBox title="Could not load your SSH keys" message={keys.error} retry={keys.reload} />}
      {!keys.data && !keys.error && <Loading what="your SSH keys" />}
      {keys.data && keys.data.length === 0 && <Empty>No SSH keys yet.</Empty>}
      <ul class="list ssh-keys">
        {(keys.data ?? []).map((k) => (
          <li key={k.id} data-ssh-key={k.name}>
            <div class="list-main">
              <span class="strong">{k.name}</span> <span class="muted small">{k.type}</span>
              <code class="block small">{k.fingerprint}</code>
              <span class="muted small block">
                added {utcDateTime(k.created_at)} · {k.last_used ? <span title={utcDateTime(k.last_used)}>last used {ago(k.last_used)}</span> : "never used"}
              </span>
            </div>
            <button type="button" class="btn small danger-ghost" onClick={() => setRemoving(k)} aria-label={`Remove ${k.name}`}>
              Remove
            </button>
          </li>
        ))}
      </ul>
      {removing && (
        <Confirm
          title={`Remove “${removing.name}”?`}
          confirmLabel="Remove"
          onClose={() => setRemoving(undefined)}
          onConfirm={async () => {
            await api.removeSshKey(removing.id);
            notify("ok", `“${removing.name}” removed; its SSH sessions are closed.`);
            await Promise.all([keys.reload(), props.changed()]);
          }}
        >
          <p>
            <strong>{removing.name}</strong> can no longer sign in, and the tunnels it opened close now.
          </p>
        </Confirm>
      )}
    </Card>
  );
}
