/** Small building blocks shared by the pages. */
import type { AnchorHTMLAttributes, ComponentChildren } from "preact";
import { useId } from "preact/hooks";
import { followLink } from "../navigation.ts";

export function Link(props: AnchorHTMLAttributes<HTMLAnchorElement> & { href: string }) {
  return <a {...props} onClick={followLink} />;
}

export function Card(props: { title?: ComponentChildren; actions?: ComponentChildren; class?: string; children: ComponentChildren; id?: string }) {
  return (
    <section class={`card ${props.class ?? ""}`} aria-labelledby={props.id ? `${props.id}-title` : undefined}>
      {(props.title || props.actions) && (
        <header class="card-head">
          {props.title && <h2 id={props.id ? `${props.id}-title` : undefined}>{props.title}</h2>}
          {props.actions && <div class="card-actions">{props.actions}</div>}
        </header>
      )}
      {props.children}
    </section>
  );
}

/** A failure in words, with a way to try again when there is one. */
export function ErrorBox(props: { title?: string; message: string; retry?: () => void }) {
  return (
    <div class="error-box" role="alert">
      <strong>{props.title ?? "Something went wrong"}:</strong> <span class="error-text">{props.message}</span>
      {props.retry && (
        <button type="button" class="btn small" onClick={props.retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** Shown above data that is still there when a refresh failed. */
export function StaleWarning(props: { error?: string; what: string }) {
  if (!props.error) return null;
  return (
    <p class="stale" role="alert">
      Could not refresh {props.what}: <span class="error-text">{props.error}</span>. Showing the last data; retrying.
    </p>
  );
}

export function Loading(props: { what: string }) {
  return (
    <p class="loading" role="status">
      <span class="spinner" aria-hidden="true" /> Loading {props.what}…
    </p>
  );
}

export function Badge(props: { tone?: "ok" | "warn" | "bad" | "info" | "muted"; children: ComponentChildren; title?: string }) {
  return (
    <span class={`badge ${props.tone ?? "muted"}`} title={props.title}>
      {props.children}
    </span>
  );
}

/** A bar for "used against quota"; past 80 % it turns amber, at 100 % red. */
export function Progress(props: { value: number; max: number; label: string }) {
  const ratio = props.max > 0 ? props.value / props.max : 0;
  const pct = Math.min(100, Math.round(ratio * 1000) / 10);
  const tone = ratio >= 1 ? "bad" : ratio >= 0.8 ? "warn" : "ok";
  return (
    <div
      class={`progress ${tone}`}
      role="progressbar"
      aria-label={props.label}
      aria-valuemin={0}
      aria-valuemax={100}
      aria-valuenow={pct}
      aria-valuetext={`${pct}%`}
    >
      <div class="progress-fill" style={{ width: `${Math.max(pct, ratio > 0 ? 1 : 0)}%` }} />
    </div>
  );
}

export function Empty(props: { children: ComponentChildren }) {
  return <p class="empty">{props.children}</p>;
}

interface FieldProps {
  label: string;
  hint?: ComponentChildren;
  error?: string;
  children: (ids: { id: string; describedBy?: string; invalid: boolean }) => ComponentChildren;
  class?: string;
}

/** A labelled control with its hint and its error, wired for screen readers. */
export function Field(props: FieldProps) {
  const id = useId();
  const hintId = props.hint && !props.error ? `${id}-hint` : undefined;
  const errorId = props.error ? `${id}-error` : undefined;
  const describedBy = [errorId, hintId].filter(Boolean).join(" ") || undefined;
  return (
    <div class={`field ${props.error ? "has-error" : ""} ${props.class ?? ""}`}>
      <label for={id}>{props.label}</label>
      {props.children({ id, describedBy, invalid: Boolean(props.error) })}
      {props.error && (
        <p class="field-error" id={errorId}>
          {props.error}
        </p>
      )}
      {hintId && (
        <p class="hint" id={hintId}>
          {props.hint}
        </p>
      )}
    </div>
  );
}

export function Checkbox(props: { label: ComponentChildren; checked: boolean; onChange(v: boolean): void; hint?: string; name?: string; invalid?: boolean }) {
  const id = useId();
  return (
    <div class="check">
      <input
        id={id}
        type="checkbox"
        name={props.name}
        checked={props.checked}
        onChange={(e) => props.onChange(e.currentTarget.checked)}
        aria-invalid={props.invalid || undefined}
        aria-describedby={props.hint ? `${id}-hint` : undefined}
      />
      <label for={id}>
        {props.label}
        {props.hint && (
          <span class="hint" id={`${id}-hint`}>
            {props.hint}
          </span>
        )}
      </label>
    </div>
  );
}

/** A stat tile for the dashboard. */
export function Stat(props: { label: string; value: ComponentChildren; sub?: ComponentChildren; href?: string; tone?: string }) {
  const body = (
    <>
      <span class="stat-label">{props.label}</span>
      <span class="stat-value">{props.value}</span>
      {props.sub && <span class="stat-sub">{props.sub}</span>}
    </>
  );
  return props.href ? (
    <Link class={`stat ${props.tone ?? ""}`} href={props.href}>
      {body}
    </Link>
  ) : (
    <div class={`stat ${props.tone ?? ""}`}>{body}</div>
  );
}
