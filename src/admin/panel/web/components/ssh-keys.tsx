/**
 * A user's SSH keys, with which they open tunnels through the SSH gateway
 * with plain `ssh`: add one (the line of a .pub file), list them with their
 * fingerprints, remove one after a confirmation (its SSH sessions close).
 */
import { useRef, useState } from "preact/hooks";
import { api, messageOf, type SshKey } from "../api.ts";
import { ago, utcDateTime } from "../../../../ui/format.ts";
import { notify } from "../../../../ui/notices.ts";
import { Confirm } from "../../../../ui/components/dialog.tsx";
import { Empty, Field } from "../../../../ui/components/ui.tsx";

export function SshKeysPanel(props: { userId: number; username: string; keys: SshKey[]; onChanged(): void }) {
  const [text, setText] = useState("");
  const [name, setName] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [removing, setRemoving] = useState<SshKey>();
  const input = useRef<HTMLTextAreaElement>(null);

  const add = async (e: Event) => {
    e.preventDefault();
    if (text.trim() === "") {
      setError("Paste the line of the user's public key file, e.g. id_ed25519.pub");
      input.current?.focus();
      return;
    }
    setError(undefined);
    setBusy(true);
    try {
      const added = await api.addSshKey(props.userId, text.trim(), name.trim() || undefined);
      notify("ok", `SSH key “${added.name}” added for ${props.username}.`);
      setText("");
      setName("");
      props.onChanged();
    } catch (err) {
      setError(messageOf(err));
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <form onSubmit={add} noValidate>
        <Field label="Public key" error={error} hint="One line of a .pub file: ed25519, ecdsa, or RSA of 2048 bits or more">
          {({ id, describedBy, invalid }) => (
            <textarea ref={input} id={id} name="key" class="mono" rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" spellcheck={false} />
          )}
        </Field>
        <div class="inline-form">
          <Field label="Name" hint="Optional: the key's comment otherwise" class="grow">
            {({ id, describedBy }) => <input id={id} name="ssh_key_name" value={name} onInput={(e) => setName(e.currentTarget.value)} aria-describedby={describedBy} autocomplete="off" />}
          </Field>
          <button type="submit" class="btn primary" disabled={busy}>
            {busy ? "Adding…" : "Add SSH key"}
          </button>
        </div>
      </form>
      {props.keys.length === 0 ? (
        <Empty>{props.username} has no SSH key.</Empty>
      ) : (
        <ul class="list ssh-keys">
          {props.keys.map((k) => (
            <li key={k.id} data-ssh-key={k.name}>
              <div class="list-main">
                <span class="strong">{k.name}</span> <span class="muted small">{k.type}</span>
                <code class="block small">{k.fingerprint}</code>
                <span class="muted small block">
                  added {utcDateTime(k.created_at)} · {k.last_used ? <span title={utcDateTime(k.last_used)}>last used {ago(k.last_used)}</span> : "never used"}
                </span>
              </div>
              <button type="button" class="btn small danger-ghost" onClick={() => setRemoving(k)} aria-label={`Remove SSH key ${k.name}`}>
                Remove
              </button>
            </li>
          ))}
        </ul>
      )}
      {removing && (
        <Confirm
          title={`Remove SSH key “${removing.name}”?`}
          confirmLabel="Remove"
          onClose={() => setRemoving(undefined)}
          onConfirm={async () => {
            await api.removeSshKey(removing.id);
            notify("ok", `SSH key “${removing.name}” removed; its SSH sessions are closed.`);
            props.onChanged();
          }}
        >
          <p>
            {props.username} can no longer sign in with <strong>{removing.name}</strong> ({removing.fingerprint}), and the tunnels it opened close now.
          </p>
        </Confirm>
      )}
    </>
  );
}
