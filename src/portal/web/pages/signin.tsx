/** Sign-in: the server's refusal in words (wrong password, a disabled account, too many attempts). */
import { useEffect, useRef, useState } from "preact/hooks";
import { Logo } from "../../../ui/components/logo.tsx";
import { Field } from "../../../ui/components/ui.tsx";
import { useTitle } from "../../../ui/hooks.ts";
import { api, ApiError, messageOf } from "../api.ts";

const TITLES: Record<number, string> = { 401: "Cannot sign in", 403: "Refused", 429: "Too many attempts" };

export function SignInPage(props: { message?: string; onSignedIn(): void }) {
  useTitle("Sign in");
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [errors, setErrors] = useState<{ username?: string; password?: string }>({});
  const [failure, setFailure] = useState<{ title: string; text: string; until?: number }>();
  const [busy, setBusy] = useState(false);
  const [now, setNow] = useState(Date.now());
  const form = useRef<HTMLFormElement>(null);
  const [company, setCompany] = useState(false);

  useEffect(() => {
    api.signInOptions().then((o) => setCompany(o.company), () => setCompany(false));
  }, []);

  const companySignIn = async () => {
    setBusy(true);
    setFailure(undefined);
    try {
      const { url } = await api.companySignIn({ to: location.pathname + location.search });
      location.assign(url);
    } catch (err) {
      setFailure({ title: "Company sign-in failed", text: messageOf(err) });
      setBusy(false);
    }
  };

  // a throttled sign-in counts down to when it may be tried again
  useEffect(() => {
    if (!failure?.until) return;
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, [failure?.until]);

  const submit = async (e: Event) => {
    e.preventDefault();
    const found = { username: username.trim() === "" ? "Enter your username" : undefined, password: password === "" ? "Enter your password" : undefined };
    setErrors(found);
    if (found.username || found.password) {
      form.current?.querySelector<HTMLElement>("[aria-invalid='true']")?.focus();
      return;
    }
    setBusy(true);
    setFailure(undefined);
    try {
      await api.login(username.trim(), password);
      props.onSignedIn();
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      const until = err instanceof ApiError && err.retryAfter ? Date.now() + err.retryAfter * 1000 : undefined;
      setFailure({ title: TITLES[status] ?? "Sign-in failed", text: messageOf(err), until });
      setNow(Date.now());
      setBusy(false);
    }
  };

  const wait = failure?.until ? Math.ceil((failure.until - now) / 1000) : 0;

  return (
    <div class="signin">
      <form class="signin-card" ref={form} onSubmit={submit} noValidate aria-labelledby="signin-title">
        <div class="signin-brand">
          <Logo />
          <span>burrow</span>
        </div>
        <h1 id="signin-title">Sign in to {location.hostname}</h1>
        {props.message && (
          <p class="info-box" role="status">
            {props.message}
          </p>
        )}
        {failure && (
          <div class="error-box" role="alert">
            <strong>{failure.title}:</strong> <span class="error-text">{failure.text}</span>
            {wait > 0 && <span class="muted"> (you can try again in {wait} s)</span>}
          </div>
        )}
        <Field label="Username" error={errors.username}>
          {({ id, describedBy, invalid }) => (
            <input id={id} name="username" autocomplete="username" autofocus value={username} onInput={(e) => setUsername(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
          )}
        </Field>
        <Field label="Password" error={errors.password}>
          {({ id, describedBy, invalid }) => (
            <input
              id={id}
              name="password"
              type="password"
              autocomplete="current-password"
              value={password}
              onInput={(e) => setPassword(e.currentTarget.value)}
              aria-invalid={invalid}
              aria-describedby={describedBy}
            />
          )}
        </Field>
        <button type="submit" class="btn primary wide" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
        {company && (
          <button type="button" class="btn wide" disabled={busy} onClick={companySignIn}>
            Sign in with your company account
          </button>
        )}
        <p class="hint center">See your tunnels and traffic, add devices, and approve `burrow login`.</p>
      </form>
    </div>
  );
}
