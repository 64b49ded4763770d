/**
 * The operator's traffic policies (/api/policies): each with what it
 * covers (every tunnel, a user's, a hostname's), made, edited with its
 * YAML or JSON as written, and deleted after a confirmation. A document
 * the server refuses comes back with its errors, each with its line and
 * column, its rule and its code (CEL's with a caret under the column);
 * choosing one puts the cursor there in the document.
 */
import { useRef, useState } from "preact/hooks";
import { api, ApiError, messageOf, type PolicyBody, type PolicyScope, type TrafficPolicy, type User } from "../api.ts";
import { offsetOf, policyErrors, type ShownError } from "../policy-errors.ts";
import { Confirm, Modal } from "../../../../ui/components/dialog.tsx";
import { Badge, Card, Empty, ErrorBox, Field, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { utcDateTime } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { notify } from "../../../../ui/notices.ts";

const EXAMPLE = `# runs before every covered tunnel's own policy (ngrok's Traffic Policy format)
on_http_request:
  - name: office only
    actions:
      - type: restrict-ips
        config:
          allow: [203.0.113.0/24]
`;

const SCOPES: { value: PolicyScope; label: string }[] = [
  { value: "server", label: "Every tunnel" },
  { value: "user", label: "A user's tunnels" },
  { value: "hostname", label: "A hostname's tunnels" },
];

export function PoliciesPage() {
  useTitle("Traffic policies");
  const policies = useApi(api.policies, []);
  const users = useApi(api.users, []);
  const [editing, setEditing] = useState<TrafficPolicy | "new">();
  const [deleting, setDeleting] = useState<TrafficPolicy>();
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Traffic policies</h1>
        <p class="muted">
          Rules in ngrok's Traffic Policy format that run before a tunnel's own, on every tunnel, a user's or a hostname's; a tunnel's agent cannot lift
          them. Live tunnels take a change within seconds.
        </p>
      </div>
      <Card
        title={`Policies${policies.data ? ` (${policies.data.length})` : ""}`}
        id="policies"
        actions={
          <button type="button" class="btn primary small" onClick={() => setEditing("new")}>
            New policy
          </button>
        }
      >
        {policies.error && !policies.data && <ErrorBox title="Could not load the policies" message={policies.error} retry={policies.reload} />}
        <StaleWarning error={policies.data ? policies.error : undefined} what="policies" />
        {!policies.data && !policies.error && <Loading what="policies" />}
        {policies.data && policies.data.length === 0 && <Empty>No policy yet: tunnels run their own alone.</Empty>}
        {policies.data && policies.data.length > 0 && (
          <ul class="list policies">
            {policies.data.map((p) => (
              <li key={p.id} data-policy={p.name}>
                <div class="list-main">
                  <span class="strong">{p.name}</span> <Badge tone="info">{scopeWords(p)}</Badge>
                  <span class="muted small block">
                    #{p.id} · changed {utcDateTime(p.updated_at)} · made {utcDateTime(p.created_at)}
                  </span>
                  <details class="policy-text">
                    <summary>Document</summary>
                    <pre class="mono">{p.policy}</pre>
                  </details>
                </div>
                <button type="button" class="btn small" onClick={() => setEditing(p)} aria-label={`Edit policy ${p.name}`}>
                  Edit
                </button>
                <button type="button" class="btn small danger-ghost" onClick={() => setDeleting(p)} aria-label={`Delete policy ${p.name}`}>
                  Delete
                </button>
              </li>
            ))}
          </ul>
        )}
      </Card>
      {editing && (
        <PolicyEditor
          policy={editing === "new" ? undefined : editing}
          users={users.data}
          onClose={() => setEditing(undefined)}
          onSaved={async (p, made) => {
            setEditing(undefined);
            notify("ok", made ? `Policy “${p.name}” made.` : `Policy “${p.name}” saved.`);
            await policies.reload();
          }}
        />
      )}
      {deleting && (
        <Confirm
          title={`Delete the policy “${deleting.name}”?`}
          confirmLabel="Delete policy"
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await api.deletePolicy(deleting.id);
            notify("ok", `Policy “${deleting.name}” deleted.`);
            await policies.reload();
          }}
        >
          <p>The tunnels it covers ({scopeWords(deleting).toLowerCase()}) stop running its rules within seconds.</p>
        </Confirm>
      )}
    </>
  );
}

function scopeWords(p: TrafficPolicy): string {
  if (p.scope === "user") return `User ${p.username ?? `#${p.user_id}`}`;
  if (p.scope === "hostname") return `Hostname ${p.hostname}`;
  return "Every tunnel";
}

/** Making or changing a policy: its name, what it covers, its document; the server's refusal beside what it names. */
function PolicyEditor(props: { policy?: TrafficPolicy; users?: User[]; onClose(): void; onSaved(p: TrafficPolicy, made: boolean): Promise<void> }) {
  const { policy } = props;
  const [name, setName] = useState(policy?.name ?? "");
  const [scope, setScope] = useState<PolicyScope>(policy?.scope ?? "server");
  const [userId, setUserId] = useState(policy?.user_id ? String(policy.user_id) : "");
  const [hostname, setHostname] = useState(policy?.hostname ?? "");
  const [text, setText] = useState(policy?.policy ?? EXAMPLE);
  const [problem, setProblem] = useState<{ field?: "name" | "user" | "hostname"; message: string }>();
  const [errors, setErrors] = useState<ShownError[]>();
  const [busy, setBusy] = useState(false);
  const documentRef = useRef<HTMLTextAreaElement>(null);

  const save = async (e: Event) => {
    e.preventDefault();
    setProblem(undefined);
    setErrors(undefined);
    if (name.trim() === "") return setProblem({ field: "name", message: "Name it after what it is for." });
    if (scope === "user" && userId === "") return setProblem({ field: "user", message: "Choose the user whose tunnels it covers." });
    if (scope === "hostname" && hostname.trim() === "") return setProblem({ field: "hostname", message: "Give the hostname, or a *.wildcard." });
    const body: PolicyBody = {
      name: name.trim(),
      scope,
      policy: text,
      ...(scope === "user" ? { user_id: Number(userId) } : {}),
      ...(scope === "hostname" ? { hostname: hostname.trim() } : {}),
    };
    setBusy(true);
    try {
      const saved = policy ? await api.updatePolicy(policy.id, body) : await api.createPolicy(body);
      await props.onSaved(saved, !policy);
    } catch (err) {
      const message = messageOf(err);
      const listed = err instanceof ApiError && err.status === 400 ? policyErrors(message) : undefined;
      if (listed) setErrors(listed);
      else setProblem({ field: fieldOf(message, err instanceof ApiError && err.status === 404 && scope === "user"), message });
    } finally {
      setBusy(false);
    }
  };

  /** Puts the cursor on an error's place in the document. */
  const show = (error: ShownError) => {
    const area = documentRef.current;
    if (!area || error.line === undefined) return;
    const at = offsetOf(text, error.line, error.column ?? 1);
    area.focus();
    area.setSelectionRange(at, at);
  };

  return (
    <Modal title={policy ? `Edit the policy “${policy.name}”` : "New traffic policy"} onClose={props.onClose} wide>
      <form onSubmit={save} noValidate class="policy-form">
        <Field label="Name" error={problem?.field === "name" ? problem.message : undefined}>
          {({ id, describedBy, invalid }) => (
            <input id={id} name="name" maxLength={100} value={name} onInput={(e) => setName(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" />
          )}
        </Field>
        <div class="field">
          <label for="policy-scope">Covers</label>
          <select id="policy-scope" name="scope" value={scope} onChange={(e) => setScope(e.currentTarget.value as PolicyScope)}>
            {SCOPES.map((s) => (
              <option key={s.value} value={s.value}>
                {s.label}
              </option>
            ))}
          </select>
        </div>
        {scope === "user" && (
          <Field label="User" error={problem?.field === "user" ? problem.message : undefined}>
            {({ id, describedBy, invalid }) => (
              <select id={id} name="user_id" value={userId} onChange={(e) => setUserId(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy}>
                <option value="">Choose a user…</option>
                {props.users?.map((u) => (
                  <option key={u.id} value={String(u.id)}>
                    {u.username}
                  </option>
                ))}
              </select>
            )}
          </Field>
        )}
        {scope === "hostname" && (
          <Field label="Hostname" hint="A tunnel's name (app.tunnels.example.com), a custom hostname, or a *.wildcard" error={problem?.field === "hostname" ? problem.message : undefined}>
            {({ id, describedBy, invalid }) => (
              <input id={id} name="hostname" value={hostname} onInput={(e) => setHostname(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" spellcheck={false} />
            )}
          </Field>
        )}
        <Field
          label="Document (YAML or JSON)"
          hint="Phases, rules and actions as ngrok's Traffic Policy writes them: on_tcp_connect, on_http_request, on_http_response, on_event_stream_message."
        >
          {({ id, describedBy }) => (
            <textarea
              ref={documentRef}
              id={id}
              name="policy"
              class="mono policy-document"
              rows={16}
              value={text}
              onInput={(e) => setText(e.currentTarget.value)}
              aria-invalid={errors !== undefined}
              aria-describedby={errors ? "policy-errors" : describedBy}
              spellcheck={false}
              autocomplete="off"
            />
          )}
        </Field>
        {errors && <PolicyErrors errors={errors} onShow={show} />}
        {problem && problem.field === undefined && <ErrorBox title="The server refused" message={problem.message} />}
        <div class="form-actions">
          <button type="button" class="btn" onClick={props.onClose}>
            Cancel
          </button>
          <button type="submit" class="btn primary" disabled={busy}>
            {busy ? "Saving…" : policy ? "Save policy" : "Make policy"}
          </button>
        </div>
      </form>
    </Modal>
  );
}

/** A refused document's errors, each a button that puts the cursor on its place. */
function PolicyErrors(props: { errors: ShownError[]; onShow(e: ShownError): void }) {
  return (
    <div class="error-box policy-errors" id="policy-errors" role="alert">
      <strong>The document does not load ({props.errors.length === 1 ? "1 error" : `${props.errors.length} errors`}):</strong>
      <ol>
        {props.errors.map((e, i) => (
          <li key={i} data-code={e.code}>
            {e.line !== undefined ? (
              <button type="button" class="link-btn" onClick={() => props.onShow(e)}>
                Line {e.line}, column {e.column}
              </button>
            ) : null}
            {e.line !== undefined ? ": " : ""}
            {e.message}
            {e.rule !== undefined && <span class="muted"> (rule {e.rule})</span>}
            {e.code !== undefined && <code class="small"> {e.code}</code>}
            {e.snippet !== undefined && <pre class="mono">{e.snippet}</pre>}
          </li>
        ))}
      </ol>
    </div>
  );
}

/** The field a refusal names (the API's "name: ...", "user_id: ...", "hostname: ...", a name taken, no such user), for the message beside it. */
function fieldOf(message: string, noSuchUser: boolean): "name" | "user" | "hostname" | undefined {
  if (noSuchUser || /^user_id\b/.test(message)) return "user";
  if (/^name\b|^a policy named .* exists already/.test(message)) return "name";
  if (/^hostname\b/.test(message)) return "hostname";
  return undefined;
}
