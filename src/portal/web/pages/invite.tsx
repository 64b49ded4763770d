/**
 * An invitation opened: what it offers, then a username and a password for
 * the new account, which is then signed in. The link's secret is in the
 * address after `#`, which the browser never sends by itself; it is taken
 * out of the address bar once used.
 */
import { useEffect, useState } from "preact/hooks";
import { Logo } from "../../../ui/components/logo.tsx";
import { ErrorBox, Field, Loading } from "../../../ui/components/ui.tsx";
import { formatLimit, formatQuota, utcDateTime } from "../../../ui/format.ts";
import { useTitle } from "../../../ui/hooks.ts";
import { api, ApiError, messageOf, type Offer } from "../api.ts";

import { USERNAME_PATTERN } from "../../../validate/fields.ts";

export function InvitePage(props: { signedInAs?: string; onSignOut(): void; onJoined(): void }) {
  useTitle("You are invited");
  const secret = decodeURIComponent(location.hash.slice(1));
  const [offer, setOffer] = useState<Offer>();
  const [problem, setProblem] = useState<string>();
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [again, setAgain] = useState("");
  const [errors, setErrors] = useState<{ username?: string; password?: string; again?: string }>({});
  const [failure, setFailure] = useState<string>();
  const [busy, setBusy] = useState(false);

  const [company, setCompany] = useState(false);

  useEffect(() => {
    api.signInOptions().then((o) => setCompany(o.company), () => setCompany(false));
  }, []);

  const joinWithCompany = async () => {
    setBusy(true);
    setFailure(undefined);
    try {
      const { url } = await api.companySignIn({ invitation: secret, to: "/devices" });
      history.replaceState(null, "", "/invite"); // the link now travels in the sign-in's own cookie
      location.assign(url);
    } catch (err) {
      setFailure(messageOf(err));
      setBusy(false);
    }
  };

  useEffect(() => {
    if (!secret) {
      setProblem("This address has no invitation in it: open the whole link you were sent.");
      return;
    }
    api.offer(secret).then(setOffer, (err) => setProblem(messageOf(err)));
  }, []);

  const submit = async (e: Event) => {
    e.preventDefault();
    const found = {
      username: USERNAME_PATTERN.test(username.trim()) ? undefined : "1 to 64 letters, digits and _ . - @",
      password: password.length < 8 ? "At least 8 characters" : password.length > 1024 ? "At most 1024 characters" : undefined,
      again: again !== password ? "The two do not match" : undefined,
    };
    setErrors(found);
    if (found.username || found.password || found.again) return;
    setBusy(true);
    setFailure(undefined);
    try {
      await api.accept(secret, username.trim(), password);
      history.replaceState(null, "", "/invite"); // the link is used: out of the address bar
      props.onJoined();
    } catch (err) {
      setFailure(err instanceof ApiError && err.status === 409 ? `${messageOf(err)}: choose another` : messageOf(err));
      setBusy(false);
    }
  };

  return (
    <div class="signin">
      <form class="signin-card" onSubmit={submit} noValidate aria-labelledby="invite-title">
        <div class="signin-brand">
          <Logo />
          <span>burrow</span>
        </div>
        <h1 id="invite-title">You are invited to {location.hostname}</h1>
        {props.signedInAs && (
          <p class="info-box" role="status">
            You are signed in as {props.signedInAs}. This invitation makes a new account;{" "}
            <button type="button" class="btn small" onClick={props.onSignOut}>
              sign out
            </button>{" "}
            first if it is for someone else.
          </p>
        )}
        {problem && <ErrorBox title="This invitation cannot be used" message={problem} />}
        {!problem && !offer && <Loading what="the invitation" />}
        {offer && (
          <>
            {offer.note && <p class="muted">“{offer.note}”</p>}
            <dl class="facts" data-testid="offer">
              <dt>Tunnels at once</dt>
              <dd>{formatLimit(offer.max_tunnels)}</dd>
              <dt>Devices</dt>
              <dd>{formatLimit(offer.max_devices)}</dd>
              <dt>Traffic</dt>
              <dd>{offer.traffic_limit > 0 ? formatQuota(offer.traffic_limit, offer.traffic_period) : "No limit"}</dd>
              <dt>Protocols</dt>
              <dd>{offer.allowed_protocols.split(",").join(", ")}</dd>
              <dt>Valid until</dt>
              <dd>{utcDateTime(offer.expires_at)}</dd>
            </dl>
            {failure && <ErrorBox title="Not joined" message={failure} />}
            <Field label="Choose a username" error={errors.username}>
              {({ id, describedBy, invalid }) => (
                <input id={id} name="username" autocomplete="username" autofocus value={username} onInput={(e) => setUsername(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
              )}
            </Field>
            <Field label="Choose a password" error={errors.password}>
              {({ id, describedBy, invalid }) => (
                <input id={id} name="password" type="password" autocomplete="new-password" value={password} onInput={(e) => setPassword(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
              )}
            </Field>
            <Field label="The password again" error={errors.again}>
              {({ id, describedBy, invalid }) => (
                <input id={id} name="password_again" type="password" autocomplete="new-password" value={again} onInput={(e) => setAgain(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
              )}
            </Field>
            <button type="submit" class="btn primary wide" disabled={busy}>
              {busy ? "Joining…" : "Join"}
            </button>
            {company && (
              <button type="button" class="btn wide" disabled={busy} onClick={joinWithCompany}>
                Join with your company account
              </button>
            )}
          </>
        )}
      </form>
    </div>
  );
}
