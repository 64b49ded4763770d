/**
 * Webhooks: make one (its secret shown once), list them with what waits
 * and what was dropped, each with its recent deliveries (status, attempts,
 * the receiver's answer, the next attempt) and a way to send a finished
 * one again; turn one off and on, rotate its secret, delete it.
 */
import { useState } from "preact/hooks";
import { api, messageOf, type Delivery, type Webhook, type WebhookWithSecret } from "../api.ts";
import { CopyButton } from "../../../../ui/components/copy.tsx";
import { Confirm, Modal } from "../../../../ui/components/dialog.tsx";
import { Badge, Card, Empty, ErrorBox, Field, Loading, StaleWarning } from "../../../../ui/components/ui.tsx";
import { ago, utcDateTime } from "../../../../ui/format.ts";
import { useApi, useTitle } from "../../../../ui/hooks.ts";
import { notify } from "../../../../ui/notices.ts";

const DELIVERY_TONE = { pending: "info", delivered: "ok", failed: "bad", dropped: "warn" } as const;
/** A rotation's overlap in the panel: a day, as the API's default. */
const OVERLAP_S = 86_400;

export function WebhooksPage() {
  useTitle("Webhooks");
  const hooks = useApi(api.webhooks, [], 10_000);
  const [made, setMade] = useState<WebhookWithSecret>();
  const [deleting, setDeleting] = useState<Webhook>();
  return (
    <>
      <div class="page-head">
        <h1 tabIndex={-1}>Webhooks</h1>
        <p class="muted">
          Events (a tunnel online, a token revoked, a quota used up…) are posted to each webhook's URL, signed with its secret as Standard Webhooks says, in
          order, and tried again for a day when its receiver does not answer. Users make their own on the portal, for their own tunnels, tokens and quota.
        </p>
      </div>
      <Card title="Make a webhook" id="make-webhook">
        <WebhookForm
          onMade={(w) => {
            setMade(w);
            void hooks.reload();
          }}
        />
      </Card>
      <Card title={`Webhooks${hooks.data ? ` (${hooks.data.length})` : ""}`} id="webhooks">
        {hooks.error && !hooks.data && <ErrorBox title="Could not load webhooks" message={hooks.error} retry={hooks.reload} />}
        <StaleWarning error={hooks.data ? hooks.error : undefined} what="webhooks" />
        {!hooks.data && !hooks.error && <Loading what="webhooks" />}
        {hooks.data && hooks.data.length === 0 && <Empty>No webhook yet.</Empty>}
        {hooks.data && hooks.data.length > 0 && (
          <ul class="list webhooks">
            {hooks.data.map((w) => (
              <WebhookItem key={w.id} hook={w} changed={hooks.reload} onSecret={setMade} onDelete={() => setDeleting(w)} />
            ))}
          </ul>
        )}
      </Card>
      {made && <SecretDialog made={made} onClose={() => setMade(undefined)} />}
      {deleting && (
        <Confirm
          title={`Delete the webhook to ${deleting.url}?`}
          confirmLabel="Delete webhook"
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await api.deleteWebhook(deleting.id);
            notify("ok", "Webhook deleted.");
            await hooks.reload();
          }}
        >
          <p>Its {deleting.pending} waiting deliveries are never sent, and its delivery history goes with it.</p>
        </Confirm>
      )}
    </>
  );
}

function WebhookItem(props: { hook: Webhook; changed(): Promise<void>; onSecret(w: WebhookWithSecret): void; onDelete(): void }) {
  const w = props.hook;
  const [open, setOpen] = useState(false);
  const act = async (what: string, run: () => Promise<unknown>) => {
    try {
      await run();
      notify("ok", what);
      await props.changed();
    } catch (err) {
      notify("error", messageOf(err));
    }
  };
  return (
    <li class={w.enabled ? "" : "revoked"} data-webhook={w.id}>
      <div class="list-main">
        <span class="strong mono">{w.url}</span> <Badge tone={w.enabled ? "ok" : "muted"}>{w.enabled ? "on" : "off"}</Badge>
        {w.pending > 0 && <Badge tone="info">{w.pending} waiting</Badge>}
        {w.dropped > 0 && (
          <Badge tone="warn" title="dropped unsent: too many were waiting">
            {w.dropped} dropped
          </Badge>
        )}
        <span class="muted small block">
          #{w.id} · {w.events.join(", ")} · {w.user_id === null ? (w.origin === "flag" ? "--alert-webhook" : "admin's") : `user #${w.user_id}'s`}
          {w.description && ` · ${w.description}`} · made {utcDateTime(w.created_at)}
          {w.previous_secret_until && ` · old secret signs until ${utcDateTime(w.previous_secret_until)}`}
        </span>
        <button type="button" class="btn small ghost" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? "Hide deliveries" : "Recent deliveries"}
        </button>
        {open && <Deliveries hook={w} />}
      </div>
      <div class="row-actions">
        <button type="button" class="btn small ghost" onClick={() => act(w.enabled ? "Webhook turned off." : "Webhook turned on.", () => api.updateWebhook(w.id, { enabled: !w.enabled }))}>
          {w.enabled ? "Turn off" : "Turn on"}
        </button>
        <button
          type="button"
          class="btn small ghost"
          onClick={async () => {
            try {
              props.onSecret(await api.rotateWebhook(w.id, OVERLAP_S));
              await props.changed();
            } catch (err) {
              notify("error", messageOf(err));
            }
          }}
        >
          Rotate secret
        </button>
        <button type="button" class="btn small danger-ghost" onClick={props.onDelete} aria-label={`Delete the webhook to ${w.url}`}>
          Delete
        </button>
      </div>
    </li>
  );
}

function Deliveries(props: { hook: Webhook }) {
  const list = useApi(() => api.deliveries(props.hook.id, 10), [props.hook.id], 5_000);
  if (list.error && !list.data) return <ErrorBox title="Could not load deliveries" message={list.error} retry={list.reload} />;
  if (!list.data) return <Loading what="deliveries" />;
  if (list.data.length === 0) return <Empty>No delivery yet.</Empty>;
  return (
    <div class="table-wrap">
    <table class="cards-on-phone deliveries">
      <thead>
        <tr>
          <th scope="col">Event</th>
          <th scope="col">Status</th>
          <th scope="col">Attempts</th>
          <th scope="col">Last answer</th>
          <th scope="col">Next</th>
          <th scope="col">
            <span class="sr-only">Actions</span>
          </th>
        </tr>
      </thead>
      <tbody>
        {list.data.map((d) => (
          <DeliveryRow key={d.id} d={d} retry={async () => {
            try {
              await api.retryDelivery(props.hook.id, d.id);
              notify("ok", `Delivery #${d.id} will be sent again.`);
              await list.reload();
            } catch (err) {
              notify("error", messageOf(err));
            }
          }} />
        ))}
      </tbody>
    </table>
    </div>
  );
}

function DeliveryRow(props: { d: Delivery; retry(): void }) {
  const { d } = props;
  const answer = d.response_status !== null ? `${d.response_status}` : d.error ? "" : "—";
  return (
    <tr data-delivery={d.id}>
      <td data-label="Event">
        <span class="mono">{d.event_type}</span>
        <span class="muted small block" title={utcDateTime(d.event_at)}>
          {ago(d.event_at)}
        </span>
      </td>
      <td data-label="Status">
        <Badge tone={DELIVERY_TONE[d.status]}>{d.status}</Badge>
      </td>
      <td data-label="Attempts">{d.attempts}</td>
      <td data-label="Last answer">
        {answer}
        {d.duration_ms !== null && <span class="muted small"> {d.duration_ms} ms</span>}
        {d.error && <span class="muted small block">{d.error}</span>}
      </td>
      <td data-label="Next">{d.next_attempt_at ? utcDateTime(d.next_attempt_at) : "—"}</td>
      <td>
        {d.status !== "pending" && (
          <button type="button" class="btn small ghost" onClick={props.retry}>
            Send again
          </button>
        )}
      </td>
    </tr>
  );
}

function WebhookForm(props: { onMade(w: WebhookWithSecret): void }) {
  const [url, setUrl] = useState("");
  const [events, setEvents] = useState("*");
  const [description, setDescription] = useState("");
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      const list = events.split(",").map((x) => x.trim()).filter((x) => x !== "");
      props.onMade(await api.createWebhook({ url: url.trim(), events: list, ...(description.trim() ? { description: description.trim() } : {}) }));
      setUrl("");
      setDescription("");
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="inline-form" onSubmit={submit} noValidate>
      <Field label="URL" error={error} hint="https://hooks.example.com/burrow" class="grow">
        {({ id, describedBy, invalid }) => <input id={id} name="url" type="url" maxLength={2048} value={url} onInput={(e) => setUrl(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" />}
      </Field>
      <Field label="Events" hint="* or, comma-separated, tunnel.*, token.revoked…">
        {({ id, describedBy }) => <input id={id} name="events" value={events} onInput={(e) => setEvents(e.currentTarget.value)} aria-describedby={describedBy} autocomplete="off" />}
      </Field>
      <Field label="Description" hint="optional">
        {({ id, describedBy }) => <input id={id} name="description" maxLength={500} value={description} onInput={(e) => setDescription(e.currentTarget.value)} aria-describedby={describedBy} autocomplete="off" />}
      </Field>
      <button type="submit" class="btn primary" disabled={busy}>
        {busy ? "Making…" : "Make webhook"}
      </button>
    </form>
  );
}

function SecretDialog(props: { made: WebhookWithSecret; onClose(): void }) {
  return (
    <Modal title="The webhook's signing secret" onClose={props.onClose} wide>
      <p class="warn-box">
        <strong>Copy it now.</strong> {props.made.message}
      </p>
      <div class="secret">
        <label for="webhook-secret">Secret for {props.made.url}</label>
        <div class="copy-row">
          <input id="webhook-secret" class="mono" readOnly value={props.made.secret} onFocus={(e) => e.currentTarget.select()} data-testid="webhook-secret" />
          <CopyButton text={props.made.secret} label="Copy the secret" />
        </div>
        {props.made.previous_secret_until && <p class="hint">The old secret signs beside it until {utcDateTime(props.made.previous_secret_until)} UTC.</p>}
      </div>
      <div class="form-actions">
        <button type="button" class="btn primary" onClick={props.onClose}>
          I have stored it
        </button>
      </div>
    </Modal>
  );
}
