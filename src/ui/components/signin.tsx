/**
 * Sign-in with a username and password, the admin panel's and the portal's:
 * checked before sending, the server's refusal in words (by status), and a
 * throttled sign-in counting down to when it may be tried again.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import { messageOf } from "../errors.ts";
import { useTitle } from "../hooks.ts";
import { ApiError } from "../json-client.ts";
import { Logo } from "./logo.tsx";
import { Field } from "./ui.tsx";

export interface SignInProps {
  title: string;
  /** Why the person is here (signed out, a device waiting), above the form. */
  message?: string;
  hint: string;
  /** A failure's heading by the answer's status. */
  titles: Record<number, string>;
  signIn(username: string, password: string): Promise<void>;
  /** Below the button (another way to sign in). */
  children?: ComponentChildren;
}

export function SignInForm(props: SignInProps) {
  useTitle("Sign in");
  const [username, setUsername] = useState("");
  const [password, setPassword] = useState("");
  const [errors, setErrors] = useState<{ username?: string; password?: string }>({});
  const [failure, setFailure] = useState<{ title: string; text: string; until?: number }>();
  const [busy, setBusy] = useState(false);
  const [now, setNow] = useState(Date.now());
  const form = useRef<HTMLFormElement>(null);

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
      await props.signIn(username.trim(), password);
    } catch (err) {
      const status = err instanceof ApiError ? err.status : 0;
      const until = err instanceof ApiError && err.retryAfter ? Date.now() + err.retryAfter * 1000 : undefined;
      setFailure({ title: props.titles[status] ?? "Sign-in failed", text: messageOf(err), until });
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
        <h1 id="signin-title">{props.title}</h1>
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
        {props.children}
        <p class="hint center">{props.hint}</p>
      </form>
    </div>
  );
}
