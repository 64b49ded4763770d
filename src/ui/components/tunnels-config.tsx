/**
 * A device's tunnels kept on the server (its remote config), edited as
 * JSON: burrow.yml's `tunnels:` map, which `burrow start --remote` on the
 * device runs. The admin panel's token list and the portal's devices page
 * open it; the server checks it as burrow.yml is checked and says which
 * field is wrong, which stays in the dialog with what was typed.
 */
import { useEffect, useState } from "preact/hooks";
import type { TunnelsConfig } from "../device-config.ts";
import { messageOf } from "../errors.ts";
import { Modal } from "./dialog.tsx";
import { ErrorBox, Loading } from "./ui.tsx";

export type { TunnelsConfig };

const EXAMPLE = `{
  "web": { "proto": "http", "addr": 3000, "subdomain": "myapp" },
  "db": { "proto": "tcp", "addr": 5432 }
}`;

export function TunnelsConfigDialog(props: { device: string; load(): Promise<TunnelsConfig>; save(tunnels: Record<string, unknown>): Promise<TunnelsConfig>; onClose(): void; onSaved?(c: TunnelsConfig): void }) {
  const [text, setText] = useState<string>();
  const [version, setVersion] = useState(0);
  const [error, setError] = useState<string>();
  const [loadError, setLoadError] = useState<string>();
  const [busy, setBusy] = useState(false);

  useEffect(() => {
    props.load().then(
      (c) => {
        setVersion(c.version);
        setText(c.version === 0 && Object.keys(c.tunnels).length === 0 ? "{}" : JSON.stringify(c.tunnels, null, 2));
      },
      (err) => setLoadError(messageOf(err)),
    );
  }, []);

  const save = async (e: Event) => {
    e.preventDefault();
    let tunnels: unknown;
    try {
      tunnels = JSON.parse(text ?? "");
    } catch {
      return setError("This is not JSON: an object of tunnels by name, as in the example");
    }
    if (typeof tunnels !== "object" || tunnels === null || Array.isArray(tunnels)) return setError("An object of tunnels by name, as in the example");
    setBusy(true);
    setError(undefined);
    try {
      const saved = await props.save(tunnels as Record<string, unknown>);
      props.onSaved?.(saved);
      props.onClose();
    } catch (err) {
      setError(messageOf(err));
      setBusy(false);
    }
  };

  return (
    <Modal title={`Tunnels of “${props.device}”`} onClose={props.onClose} wide>
      <p class="muted">
        What <code>burrow start --remote</code> runs on this device: burrow.yml's <code>tunnels:</code> as JSON. A change reaches the device within seconds; its other tunnels and their requests go on.
      </p>
      {loadError && <ErrorBox title="Could not load the device's tunnels" message={loadError} />}
      {text === undefined && !loadError && <Loading what="the device's tunnels" />}
      {text !== undefined && (
        <form onSubmit={save} noValidate>
          <label for="tunnels-config" class="block">
            Tunnels {version > 0 ? <span class="muted small">(version {version})</span> : <span class="muted small">(none set yet)</span>}
          </label>
          <textarea id="tunnels-config" class="mono" rows={14} spellcheck={false} value={text} placeholder={EXAMPLE} onInput={(e) => setText(e.currentTarget.value)} aria-invalid={error !== undefined} data-testid="tunnels-config" />
          <p class="hint">
            e.g. <code class="mono">{'{"web": {"proto": "http", "addr": 3000, "subdomain": "myapp"}}'}</code>
          </p>
          {error && <ErrorBox title="Not saved" message={error} />}
          <div class="form-actions">
            <button type="button" class="btn" onClick={props.onClose}>
              Cancel
            </button>
            <button type="submit" class="btn primary" disabled={busy}>
              {busy ? "Saving…" : "Save"}
            </button>
          </div>
        </form>
      )}
    </Modal>
  );
}
