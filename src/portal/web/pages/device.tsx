/**
 * Approving a device that runs `burrow login`: the code from the address
 * (?code=) or typed, the device's name and where it asked from, then
 * approve or deny. Wrong codes are counted by the server.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { Card, ErrorBox, Field, Loading } from "../../../ui/components/ui.tsx";
import { utcDateTime } from "../../../ui/format.ts";
import { useTitle } from "../../../ui/hooks.ts";
import { api, messageOf, type PendingDevice } from "../api.ts";
import { navigate } from "../router.ts";
import { useMe } from "../session.ts";

type Step = { kind: "typing" } | { kind: "looking" } | { kind: "found"; device: PendingDevice } | { kind: "done"; device: PendingDevice; approved: boolean };

const codeOf = (raw: string) => raw.toUpperCase().replace(/[^A-Z]/g, "");

export function DevicePage() {
  useTitle("Log in a device");
  const { reload } = useMe();
  const fromAddress = new URLSearchParams(location.search).get("code") ?? "";
  const [code, setCode] = useState(fromAddress);
  const [step, setStep] = useState<Step>(fromAddress ? { kind: "looking" } : { kind: "typing" });
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const input = useRef<HTMLInputElement>(null);

  const look = async (raw: string) => {
    if (codeOf(raw).length !== 8) {
      setError("A code has 8 letters, like WDJB-MJHT");
      setStep({ kind: "typing" });
      input.current?.focus();
      return;
    }
    setError(undefined);
    setStep({ kind: "looking" });
    try {
      setStep({ kind: "found", device: await api.pendingDevice(raw) });
    } catch (err) {
      setError(messageOf(err));
      setStep({ kind: "typing" });
    }
  };

  useEffect(() => {
    if (fromAddress) void look(fromAddress);
  }, []);

  const decide = async (device: PendingDevice, approve: boolean) => {
    setBusy(true);
    setError(undefined);
    try {
      await (approve ? api.approve(device.user_code) : api.deny(device.user_code));
      setStep({ kind: "done", device, approved: approve });
      // the code is used: keep it out of the address bar (and of a reload)
      navigate("/device", { replace: true });
      if (approve) await reload();
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };

  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Log in a device</h1>
        <p class="muted">
          A device that runs <code>burrow login</code> shows a code: approve it here to give that device a token of yours.
        </p>
      </div>
      <Card>
        {error && <ErrorBox title="That did not work" message={error} />}
        {step.kind === "typing" && (
          <form
            onSubmit={(e) => {
              e.preventDefault();
              void look(code);
            }}
            noValidate
          >
            <Field label="The code the device shows" hint="8 letters; the dash is optional">
              {({ id, describedBy, invalid }) => (
                <input ref={input} id={id} name="user_code" class="code-input" autocomplete="off" autofocus value={code} onInput={(e) => setCode(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
              )}
            </Field>
            <button type="submit" class="btn primary">
              Continue
            </button>
          </form>
        )}
        {step.kind === "looking" && <Loading what="the device" />}
        {step.kind === "found" && (
          <div data-testid="pending-device">
            <p>Is this the device you are logging in?</p>
            <p class="user-code">{step.device.user_code}</p>
            <dl class="facts">
              <dt>Device</dt>
              <dd class="strong">{step.device.device_name}</dd>
              <dt>Asked from</dt>
              <dd class="mono">{step.device.address}</dd>
              <dt>Asked at</dt>
              <dd>{utcDateTime(step.device.created_at)}</dd>
            </dl>
            <p class="warn-box">Approve only a code you see on your own device's screen. Someone who sends you a code is asking for your access.</p>
            <div class="decision">
              <button type="button" class="btn primary" disabled={busy} onClick={() => decide(step.device, true)}>
                Approve
              </button>
              <button type="button" class="btn danger-ghost" disabled={busy} onClick={() => decide(step.device, false)}>
                Deny
              </button>
            </div>
          </div>
        )}
        {step.kind === "done" && (
          <div role="status" class={step.approved ? "ok-box" : "info-box"}>
            {step.approved ? (
              <>
                <strong>{step.device.device_name}</strong> is approved: it is logged in within a few seconds. You can close this page.
              </>
            ) : (
              <>
                <strong>{step.device.device_name}</strong> was denied: it gets no token.
              </>
            )}
          </div>
        )}
      </Card>
    </>
  );
}
