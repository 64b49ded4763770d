/** Reserved subdomains: reserve one for a user, list them, release with confirmation. */
import { useRef, useState } from "preact/hooks";
import { api, messageOf, type Domain, type User } from "../api.ts";
import { utcDateTime } from "../../../../ui/format.ts";
import { notify } from "../../../../ui/notices.ts";
import { useSession } from "../session.ts";
import { check, rules } from "../validate.ts";
import { Confirm } from "../../../../ui/components/dialog.tsx";
import { Empty, Field, Link } from "../../../../ui/components/ui.tsx";

/** Reserve form; with `userId` it reserves for that user, else it offers a user picker. */
export function ReserveForm(props: { userId?: number; users?: User[]; onReserved(d: Domain): void }) {
  const { server } = useSession();
  const [name, setName] = useState("");
  const [userId, setUserId] = useState("");
  const [errors, setErrors] = useState<{ subdomain?: string; user?: string; form?: string }>({});
  const [busy, setBusy] = useState(false);
  const nameInput = useRef<HTMLInputElement>(null);
  const userSelect = useRef<HTMLSelectElement>(null);

  const submit = async (e: Event) => {
    e.preventDefault();
    const owner = props.userId ?? Number(userId);
    const found = {
      subdomain: (() => {
        const problem = check(rules.subdomain, name);
        return problem ? `Subdomain ${problem}` : undefined;
      })(),
      user: owner > 0 ? undefined : "Choose the user it is for",
    };
    setErrors(found);
    if (found.subdomain) return nameInput.current?.focus();
    if (found.user) return userSelect.current?.focus();
    setBusy(true);
    try {
      const domain = await api.reserve(name.trim().toLowerCase(), owner);
      setName("");
      notify("ok", `${domain.subdomain} is reserved for ${domain.username}.`);
      props.onReserved(domain);
    } catch (err) {
      const message = messageOf(err);
      if (message.startsWith("subdomain ")) {
        setErrors({ subdomain: message });
        nameInput.current?.focus();
      } else if (message.startsWith("user_id ") || message.startsWith("user ")) setErrors({ user: message });
      else setErrors({ form: message });
    } finally {
      setBusy(false);
    }
  };

  return (
    <form class="inline-form" onSubmit={submit} noValidate>
      <Field label="Subdomain" error={errors.subdomain ?? errors.form} hint={server?.domain ? `Becomes <name>.${server.domain}` : "One DNS label: a-z, 0-9 and -"} class="grow">
        {({ id, describedBy, invalid }) => (
          <div class="with-suffix">
            <input ref={nameInput} id={id} name="subdomain" autocomplete="off" autocapitalize="off" spellcheck={false} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} />
            {server?.domain && <span class="suffix">.{server.domain}</span>}
          </div>
        )}
      </Field>
      {props.userId === undefined && (
        <Field label="For user" error={errors.user}>
          {({ id, describedBy, invalid }) => (
            <select ref={userSelect} id={id} name="user_id" value={userId} onChange={(e) => setUserId(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy}>
              <option value="">Choose…</option>
              {props.users?.map((u) => (
                <option key={u.id} value={u.id}>
                  {u.username}
                </option>
              ))}
            </select>
          )}
        </Field>
      )}
      <button type="submit" class="btn primary" disabled={busy}>
        {busy ? "Reserving…" : "Reserve"}
      </button>
    </form>
  );
}

export function DomainList(props: { domains: Domain[]; showUser?: boolean; onReleased(): void; empty: string }) {
  const { server } = useSession();
  const [releasing, setReleasing] = useState<Domain>();
  const full = (d: Domain) => (server?.domain ? `${d.subdomain}.${server.domain}` : d.subdomain);
  return (
    <>
      {props.domains.length === 0 ? (
        <Empty>{props.empty}</Empty>
      ) : (
        <ul class="list domains">
          {props.domains.map((d) => (
            <li key={d.id} data-domain={d.subdomain}>
              <div class="list-main">
                <span class="strong mono">{full(d)}</span>
                <span class="muted small block">
                  {props.showUser && (
                    <>
                      for <Link href={`/users/${d.user_id}`}>{d.username}</Link> ·{" "}
                    </>
                  )}
                  reserved {utcDateTime(d.created_at)}
                </span>
              </div>
              <button type="button" class="btn small danger-ghost" onClick={() => setReleasing(d)} aria-label={`Release ${d.subdomain}`}>
                Release
              </button>
            </li>
          ))}
        </ul>
      )}
      {releasing && (
        <Confirm
          title={`Release ${releasing.subdomain}?`}
          confirmLabel="Release"
          onClose={() => setReleasing(undefined)}
          onConfirm={async () => {
            await api.release(releasing.id);
            notify("ok", `${releasing.subdomain} is no longer reserved.`);
            props.onReleased();
          }}
        >
          <p>
            <strong class="mono">{full(releasing)}</strong> stops being reserved for {releasing.username}: anyone may then take it for a tunnel. A tunnel
            open on it now stays open.
          </p>
        </Confirm>
      )}
    </>
  );
}
