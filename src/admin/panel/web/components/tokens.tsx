/**
 * A user's device tokens: generate one (its secret shown once, with the exact
 * `burrow login` line), list them, revoke with confirmation.
 */
import { useRef, useState } from "preact/hooks";
import { api, messageOf, type NewToken, type Token } from "../api.ts";
import { ago, utcDateTime } from "../../../../ui/format.ts";
import { notify } from "../../../../ui/notices.ts";
import { useSession } from "../session.ts";
import { check, rules } from "../validate.ts";
import { CopyButton } from "../../../../ui/components/copy.tsx";
import { Confirm, Modal } from "../../../../ui/components/dialog.tsx";
import { Badge, Empty, ErrorBox, Field } from "../../../../ui/components/ui.tsx";
import { TunnelsConfigDialog } from "../../../../ui/components/tunnels-config.tsx";

export function TokensPanel(props: { userId: number; username: string; tokens: Token[]; onChanged(): void }) {
  const [device, setDevice] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [secret, setSecret] = useState<NewToken & { device: string }>();
  const [revoking, setRevoking] = useState<Token>();
  const [configuring, setConfiguring] = useState<Token>();
  const input = useRef<HTMLInputElement>(null);

  const generate = async (e: Event) => {
    e.preventDefault();
    const problem = check(rules.deviceName, device);
    if (problem) {
      setError(`Device name ${problem}`);
      input.current?.focus();
      return;
    }
    setError(undefined);
    setBusy(true);
    try {
      const created = await api.createToken(props.userId, device.trim());
      setSecret({ ...created, device: device.trim() });
      setDevice("");
      props.onChanged();
    } catch (err) {
      setError(messageOf(err));
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  };

  const active = props.tokens.filter((t) => t.enabled);
  const revoked = props.tokens.filter((t) => !t.enabled);

  return (
    <>
      <form class="inline-form" onSubmit={generate} noValidate>
        <Field label="Device name" error={error} hint="A label for the machine, e.g. laptop or build-server" class="grow">
          {({ id, describedBy, invalid }) => (
            <input ref={input} id={id} name="device_name" value={device} onInput={(e) => setDevice(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" />
          )}
        </Field>
        <button type="submit" class="btn primary" disabled={busy}>
          {busy ? "Generating…" : "Generate token"}
        </button>
      </form>

      {props.tokens.length === 0 ? (
        <Empty>No tokens yet. Generate one for each device that will run the agent.</Empty>
      ) : (
        <ul class="list tokens">
          {[...active, ...revoked].map((t) => (
            <li key={t.id} class={t.enabled ? "" : "revoked"} data-token={t.device_name}>
              <div class="list-main">
                <span class="strong">{t.device_name}</span> {t.enabled ? <Badge tone="ok">active</Badge> : <Badge tone="muted">revoked</Badge>}
                <span class="muted small block">
                  #{t.id} · created {utcDateTime(t.created_at)} · {t.last_used ? <span title={utcDateTime(t.last_used)}>last used {ago(t.last_used)}</span> : "never used"}
                </span>
              </div>
              {t.enabled && (
                <button type="button" class="btn small" onClick={() => setConfiguring(t)} aria-label={`Tunnels of ${t.device_name}`}>
                  Tunnels
                </button>
              )}
              {t.enabled && (
                <button type="button" class="btn small danger-ghost" onClick={() => setRevoking(t)} aria-label={`Revoke token ${t.device_name}`}>
                  Revoke
                </button>
              )}
            </li>
          ))}
        </ul>
      )}

      {configuring && (
        <TunnelsConfigDialog
          device={configuring.device_name}
          load={() => api.tokenConfig(configuring.id)}
          save={(tunnels) => api.setTokenConfig(configuring.id, tunnels)}
          onSaved={(c) => notify("ok", `Tunnels of “${configuring.device_name}” saved (version ${c.version}).`)}
          onClose={() => setConfiguring(undefined)}
        />
      )}
      {secret && <SecretDialog secret={secret} username={props.username} onClose={() => setSecret(undefined)} />}
      {revoking && (
        <Confirm
          title={`Revoke the token “${revoking.device_name}”?`}
          confirmLabel="Revoke token"
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            await api.revokeToken(revoking.id);
            notify("ok", `Token “${revoking.device_name}” revoked; its tunnels are closed.`);
            props.onChanged();
          }}
        >
          <p>
            The device <strong>{revoking.device_name}</strong> of {props.username} can no longer connect, and its tunnels close now. This cannot be undone:
            the device will need a new token.
          </p>
        </Confirm>
      )}
    </>
  );
}

function SecretDialog(props: { secret: NewToken & { device: string }; username: string; onClose(): void }) {
  const { server } = useSession();
  const serverUrl = server?.edge_url || "https://tunnels.example.com";
  const command = `burrow login --server ${serverUrl} --token ${props.secret.token}`;
  return (
    <Modal title={`Token for “${props.secret.device}”`} onClose={props.onClose} wide>
      <p class="warn-box">
        <strong>Copy it now.</strong> {props.secret.message}
      </p>
      <div class="secret">
        <label for="token-secret">Token for {props.username}</label>
        <div class="copy-row">
          <input id="token-secret" class="mono" readOnly value={props.secret.token} onFocus={(e) => e.currentTarget.select()} data-testid="token-secret" />
          <CopyButton text={props.secret.token} label="Copy the token" />
        </div>
      </div>
      <div class="secret">
        <label for="token-command">On the device, run</label>
        <div class="copy-row">
          <textarea id="token-command" class="mono" readOnly rows={2} value={command} onFocus={(e) => e.currentTarget.select()} data-testid="token-command" />
          <CopyButton text={command} label="Copy the login command" />
        </div>
        <p class="hint">
          then <code>burrow http 3000</code> or <code>burrow tcp 5432</code>.
          {!server?.edge_url && " (The server's public address could not be read; adjust the --server URL.)"}
        </p>
      </div>
      <div class="form-actions">
        <button type="button" class="btn primary" onClick={props.onClose}>
          I have stored it
        </button>
      </div>
    </Modal>
  );
}

export function TokenLoadError(props: { message: string; retry(): void }) {
  return <ErrorBox title="Could not load tokens" message={props.message} retry={props.retry} />;
}
