/** The user's account: who they are, their limits, and changing their password. */
import { useState } from "preact/hooks";
import { Card, ErrorBox, Field } from "../../../ui/components/ui.tsx";
import { formatLimit, formatQuota, utcDateTime } from "../../../ui/format.ts";
import { useTitle } from "../../../ui/hooks.ts";
import { notify } from "../../../ui/notices.ts";
import { api, messageOf } from "../api.ts";
import { useMe } from "../session.ts";

export function AccountPage() {
  useTitle("Account");
  const { me } = useMe();
  const u = me.user;
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Account</h1>
      </div>
      <div class="grid two">
        <Card title="You" id="you">
          <dl class="facts">
            <dt>Username</dt>
            <dd class="strong">{u.username}</dd>
            <dt>Member since</dt>
            <dd>{utcDateTime(u.created_at)}</dd>
            <dt>Tunnels at once</dt>
            <dd>{formatLimit(u.max_tunnels)}</dd>
            <dt>Devices</dt>
            <dd>{formatLimit(u.max_devices)}</dd>
            <dt>Traffic</dt>
            <dd>{u.traffic_limit > 0 ? formatQuota(u.traffic_limit, u.traffic_period) : "No limit"}</dd>
            <dt>Protocols</dt>
            <dd>{u.allowed_protocols.split(",").join(", ")}</dd>
          </dl>
          <p class="muted small">Limits are set by the server's admins.</p>
        </Card>
        <Card title="Password" id="password">
          {u.has_password ? <PasswordForm /> : <p>You sign in with your company's account: there is no password to change here.</p>}
        </Card>
      </div>
    </>
  );
}

function PasswordForm() {
  const [current, setCurrent] = useState("");
  const [next, setNext] = useState("");
  const [again, setAgain] = useState("");
  const [errors, setErrors] = useState<{ current?: string; next?: string; again?: string }>({});
  const [failure, setFailure] = useState<string>();
  const [busy, setBusy] = useState(false);

  const submit = async (e: Event) => {
    e.preventDefault();
    const found = {
      current: current === "" ? "Enter your current password" : undefined,
      next: next.length < 8 ? "At least 8 characters" : next.length > 1024 ? "At most 1024 characters" : undefined,
      again: again !== next ? "The two do not match" : undefined,
    };
    setErrors(found);
    if (found.current || found.next || found.again) return;
    setBusy(true);
    setFailure(undefined);
    try {
      await api.changePassword(current, next);
      setCurrent("");
      setNext("");
      setAgain("");
      notify("ok", "Password changed; your other browsers are signed out.");
    } catch (err) {
      setFailure(messageOf(err));
    } finally {
      setBusy(false);
    }
  };

  const field = (label: string, value: string, set: (v: string) => void, error: string | undefined, autocomplete: string, name: string) => (
    <Field label={label} error={error}>
      {({ id, describedBy, invalid }) => (
        <input id={id} name={name} type="password" autocomplete={autocomplete} value={value} onInput={(e) => set(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
      )}
    </Field>
  );

  return (
    <form onSubmit={submit} noValidate>
      {failure && <ErrorBox title="Not changed" message={failure} />}
      {field("Current password", current, setCurrent, errors.current, "current-password", "current_password")}
      {field("New password", next, setNext, errors.next, "new-password", "new_password")}
      {field("New password again", again, setAgain, errors.again, "new-password", "new_password_again")}
      <button type="submit" class="btn primary" disabled={busy}>
        {busy ? "Changing…" : "Change password"}
      </button>
    </form>
  );
}
