/**
 * The user's devices (tokens): add one (by `burrow login` on the device, or
 * a token made here, shown once with its login line), list, revoke, and set
 * the tunnels a token's `burrow start --remote` runs (its remote config);
 * and their SSH keys (ssh-keys.tsx), devices too, which have no remote
 * config (an `ssh -R` says its own tunnels).
 */
import { useRef, useState } from "preact/hooks";
import { CopyButton } from "../../../ui/components/copy.tsx";
import { Confirm, Modal } from "../../../ui/components/dialog.tsx";
import { TunnelsConfigDialog } from "../../../ui/components/tunnels-config.tsx";
import { Badge, Card, Empty, ErrorBox, Field, Loading } from "../../../ui/components/ui.tsx";
import { ago, utcDateTime } from "../../../ui/format.ts";
import { useApi, useTitle } from "../../../ui/hooks.ts";
import { notify } from "../../../ui/notices.ts";
import { api, messageOf, type NewDevice, type Token } from "../api.ts";
import { useMe } from "../session.ts";
import { SshKeysCard } from "./ssh-keys.tsx";

export function DevicesPage() {
  useTitle("Devices");
  const { me, reload } = useMe();
  const tokens = useApi(api.tokens, []);
  const [device, setDevice] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [secret, setSecret] = useState<NewDevice>();
  const [revoking, setRevoking] = useState<Token>();
  const [configuring, setConfiguring] = useState<Token>();
  const input = useRef<HTMLInputElement>(null);
  const loginLine = `burrow login --server ${location.origin}`;
  const full = me.user.max_devices > 0 && me.devices >= me.user.max_devices;

  const add = async (e: Event) => {
    e.preventDefault();
    const name = device.trim();
    if (name === "" || name.length > 100) {
      setError(name === "" ? "Give the device a name" : "The name must be at most 100 characters");
      input.current?.focus();
      return;
    }
    setError(undefined);
    setBusy(true);
    try {
      setSecret(await api.addDevice(name));
      setDevice("");
      await Promise.all([tokens.reload(), reload()]);
    } catch (err) {
      setError(messageOf(err));
      input.current?.focus();
    } finally {
      setBusy(false);
    }
  };

  const active = tokens.data?.filter((t) => t.enabled) ?? [];
  const revoked = tokens.data?.filter((t) => !t.enabled) ?? [];

  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Devices</h1>
        <p class="muted">
          Each machine that runs <code>burrow</code> has a token of its own{me.user.max_devices > 0 ? `; you may have ${me.user.max_devices}` : ""}.
        </p>
      </div>
      <Card title="Add a device" id="add">
        <ol class="steps">
          <li>
            On the device, run
            <div class="copy-row">
              <input class="mono" readOnly value={loginLine} aria-label="The login command" onFocus={(e) => e.currentTarget.select()} />
              <CopyButton text={loginLine} label="Copy the login command" />
            </div>
          </li>
          <li>It shows a code and this site's address: approve the code here, and the device is logged in.</li>
        </ol>
        <p class="muted small">No browser near the device? Make its token here instead:</p>
        <form class="inline-form" onSubmit={add} noValidate>
          <Field label="Device name" error={error} hint="A label for the machine, e.g. laptop or build-server" class="grow">
            {({ id, describedBy, invalid }) => (
              <input ref={input} id={id} name="device_name" value={device} onInput={(e) => setDevice(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" />
            )}
          </Field>
          <button type="submit" class="btn primary" disabled={busy || full}>
            {busy ? "Making…" : "Make a token"}
          </button>
        </form>
        {full && <p class="warn-box">You have all {me.user.max_devices} of your devices: revoke one you no longer use to add another.</p>}
      </Card>
      <Card title="Your devices" id="devices">
        {tokens.error && !tokens.data && <ErrorBox title="Could not load your devices" message={tokens.error} retry={tokens.reload} />}
        {!tokens.data && !tokens.error && <Loading what="your devices" />}
        {tokens.data && tokens.data.length === 0 && <Empty>No devices yet.</Empty>}
        <ul class="list tokens">
          {[...active, ...revoked].map((t) => (
            <li key={t.id} class={t.enabled ? "" : "revoked"} data-token={t.device_name}>
              <div class="list-main">
                <span class="strong">{t.device_name}</span> {t.enabled ? <Badge tone="ok">active</Badge> : <Badge tone="muted">revoked</Badge>}
                <span class="muted small block">
                  added {utcDateTime(t.created_at)} · {t.last_used ? <span title={utcDateTime(t.last_used)}>last used {ago(t.last_used)}</span> : "never used"}
                </span>
              </div>
              {t.enabled && (
                <button type="button" class="btn small" onClick={() => setConfiguring(t)} aria-label={`Tunnels of ${t.device_name}`}>
                  Tunnels
                </button>
              )}
              {t.enabled && (
                <button type="button" class="btn small danger-ghost" onClick={() => setRevoking(t)} aria-label={`Revoke ${t.device_name}`}>
                  Revoke
                </button>
              )}
            </li>
          ))}
        </ul>
      </Card>
      <SshKeysCard full={full} changed={reload} />
      {configuring && (
        <TunnelsConfigDialog
          device={configuring.device_name}
          load={() => api.deviceConfig(configuring.id)}
          save={(tunnels) => api.setDeviceConfig(configuring.id, tunnels)}
          onSaved={(c) => notify("ok", `Tunnels of “${configuring.device_name}” saved (version ${c.version}): run burrow start --remote on it.`)}
          onClose={() => setConfiguring(undefined)}
        />
      )}
      {secret && (
        <Modal title={`Token for “${secret.device_name}”`} onClose={() => setSecret(undefined)} wide>
          <p class="warn-box">
            <strong>Copy it now.</strong> {secret.message}
          </p>
          <div class="secret">
            <label for="token-command">On the device, run</label>
            <div class="copy-row">
              <textarea id="token-command" class="mono" readOnly rows={2} value={secret.command} onFocus={(e) => e.currentTarget.select()} data-testid="token-command" />
              <CopyButton text={secret.command} label="Copy the login command" />
            </div>
            <p class="hint">
              then <code>burrow http 3000</code> or <code>burrow tcp 5432</code>.
            </p>
          </div>
          <div class="form-actions">
            <button type="button" class="btn primary" onClick={() => setSecret(undefined)}>
              I have stored it
            </button>
          </div>
        </Modal>
      )}
      {revoking && (
        <Confirm
          title={`Revoke “${revoking.device_name}”?`}
          confirmLabel="Revoke"
          onClose={() => setRevoking(undefined)}
          onConfirm={async () => {
            await api.revoke(revoking.id);
            notify("ok", `“${revoking.device_name}” revoked; its tunnels are closed.`);
            await Promise.all([tokens.reload(), reload()]);
          }}
        >
          <p>
            <strong>{revoking.device_name}</strong> can no longer connect, and its tunnels close now. To use it again, log it in again.
          </p>
        </Confirm>
      )}
    </>
  );
}
