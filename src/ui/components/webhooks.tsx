/**
 * Webhooks as a page shows them, the admin panel's (every webhook) and the
 * portal's (the user's own) alike, each given its side's calls: make one
 * (its secret shown once), list them with what waits and what was
 * dropped, each with its recent deliveries and a way to send a finished
 * one again; change its URL, events and description, turn it off and on,
 * rotate its secret, delete it.
 */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { messageOf } from "../errors.ts";
import { utcDateTime } from "../format.ts";
import { useApi } from "../hooks.ts";
import { notify } from "../notices.ts";
import { CopyButton } from "./copy.tsx";
import { Confirm, Modal } from "./dialog.tsx";
import { Badge, Card, Checkbox, Empty, ErrorBox, Field, Loading, StaleWarning } from "./ui.tsx";
import { Deliveries } from "./webhook-deliveries.tsx";
import type { Webhook, WebhookFields, WebhooksClient, WebhookWithSecret } from "./webhook-types.ts";

/** A rotation's overlap from a page: a day, as the API's default. */
const OVERLAP_S = 86_400;

export interface WebhooksViewProps {
  client: WebhooksClient;
  /** What the events field's hint says may be asked for. */
  eventsHint: string;
  /** Whose webhook it is, in a few words (the panel's list has every user's); none: not said. */
  owner?: (w: Webhook) => string;
  /** Said when there is none yet. */
  empty: ComponentChildren;
}

export function WebhooksView(props: WebhooksViewProps) {
  const { client } = props;
  const hooks = useApi(client.list, [], 10_000);
  const [made, setMade] = useState<WebhookWithSecret>();
  const [editing, setEditing] = useState<Webhook>();
  const [deleting, setDeleting] = useState<Webhook>();
  return (
    <>
      <Card title="Make a webhook" id="make-webhook">
        <WebhookForm
          eventsHint={props.eventsHint}
          submitLabel="Make webhook"
          busyLabel="Making…"
          onSubmit={async (fields) => {
            setMade(await client.create({ url: fields.url, events: fields.events, ...(fields.description ? { description: fields.description } : {}) }));
            await hooks.reload();
          }}
        />
      </Card>
      <Card title={`Webhooks${hooks.data ? ` (${hooks.data.length})` : ""}`} id="webhooks">
        {hooks.error && !hooks.data && <ErrorBox title="Could not load webhooks" message={hooks.error} retry={hooks.reload} />}
        <StaleWarning error={hooks.data ? hooks.error : undefined} what="webhooks" />
        {!hooks.data && !hooks.error && <Loading what="webhooks" />}
        {hooks.data && hooks.data.length === 0 && <Empty>{props.empty}</Empty>}
        {hooks.data && hooks.data.length > 0 && (
          <ul class="list webhooks">
            {hooks.data.map((w) => (
              <WebhookItem key={w.id} hook={w} client={client} owner={props.owner} changed={hooks.reload} onSecret={setMade} onEdit={() => setEditing(w)} onDelete={() => setDeleting(w)} />
            ))}
          </ul>
        )}
      </Card>
      {made && <SecretDialog made={made} onClose={() => setMade(undefined)} />}
      {editing && (
        <Modal title={`Change the webhook to ${editing.url}`} onClose={() => setEditing(undefined)} wide>
          <WebhookForm
            initial={editing}
            eventsHint={props.eventsHint}
            submitLabel="Save changes"
            busyLabel="Saving…"
            onSubmit={async (fields) => {
              await client.update(editing.id, fields);
              notify("ok", "Webhook changed.");
              setEditing(undefined);
              await hooks.reload();
            }}
          />
        </Modal>
      )}
      {deleting && (
        <Confirm
          title={`Delete the webhook to ${deleting.url}?`}
          confirmLabel="Delete webhook"
          onClose={() => setDeleting(undefined)}
          onConfirm={async () => {
            await client.remove(deleting.id);
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

function WebhookItem(props: {
  hook: Webhook;
  client: WebhooksClient;
  owner?: (w: Webhook) => string;
  changed(): Promise<void>;
  onSecret(w: WebhookWithSecret): void;
  onEdit(): void;
  onDelete(): void;
}) {
  const { hook: w, client } = props;
  const [open, setOpen] = useState(false);
  const act = async (run: () => Promise<unknown>, done?: string) => {
    try {
      await run();
      if (done) notify("ok", done);
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
          #{w.id} · {w.events.join(", ")}
          {props.owner && ` · ${props.owner(w)}`}
          {w.description && ` · ${w.description}`} · made {utcDateTime(w.created_at)}
          {w.previous_secret_until && ` · old secret signs until ${utcDateTime(w.previous_secret_until)}`}
        </span>
        <button type="button" class="btn small" aria-expanded={open} onClick={() => setOpen(!open)}>
          {open ? "Hide deliveries" : "Recent deliveries"}
        </button>
        {open && <Deliveries client={client} webhookId={w.id} />}
      </div>
      <div class="row-actions">
        <button type="button" class="btn small" onClick={props.onEdit} aria-label={`Change the webhook to ${w.url}`}>
          Change
        </button>
        <button type="button" class="btn small" onClick={() => act(() => client.update(w.id, { enabled: !w.enabled }), w.enabled ? "Webhook turned off." : "Webhook turned on.")}>
          {w.enabled ? "Turn off" : "Turn on"}
        </button>
        <button type="button" class="btn small" onClick={() => act(async () => props.onSecret(await client.rotate(w.id, OVERLAP_S)))}>
          Rotate secret
        </button>
        <button type="button" class="btn small danger-ghost" onClick={props.onDelete} aria-label={`Delete the webhook to ${w.url}`}>
          Delete
        </button>
      </div>
    </li>
  );
}

/** The patterns typed in the events field: comma- or space-separated. */
const eventList = (text: string) => text.split(/[\s,]+/).filter((x) => x !== "");

/** A webhook's fields: empty to make one, or a webhook's to change it (then `enabled` too). */
function WebhookForm(props: { initial?: Webhook; eventsHint: string; submitLabel: string; busyLabel: string; onSubmit(fields: WebhookFields): Promise<void> }) {
  const { initial } = props;
  const [url, setUrl] = useState(initial?.url ?? "");
  const [events, setEvents] = useState(initial?.events.join(", ") ?? "*");
  const [description, setDescription] = useState(initial?.description ?? "");
  const [enabled, setEnabled] = useState(initial?.enabled ?? true);
  const [error, setError] = useState<string>();
  const [busy, setBusy] = useState(false);
  const submit = async (e: Event) => {
    e.preventDefault();
    setError(undefined);
    setBusy(true);
    try {
      await props.onSubmit({ url: url.trim(), events: eventList(events), description: description.trim(), enabled });
      if (!initial) {
        setUrl("");
        setDescription("");
      }
    } catch (err) {
      setError(messageOf(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form class="webhook-form" onSubmit={submit} noValidate>
      <Field label="URL" error={error} hint="https://hooks.example.com/burrow">
        {({ id, describedBy, invalid }) => <input id={id} name="url" type="url" maxLength={2048} value={url} onInput={(e) => setUrl(e.currentTarget.value)} aria-invalid={invalid} aria-describedby={describedBy} autocomplete="off" />}
      </Field>
      <Field label="Events" hint={props.eventsHint}>
        {({ id, describedBy }) => <input id={id} name="events" value={events} onInput={(e) => setEvents(e.currentTarget.value)} aria-describedby={describedBy} autocomplete="off" spellcheck={false} />}
      </Field>
      <Field label="Description" hint="optional">
        {({ id, describedBy }) => <input id={id} name="description" maxLength={500} value={description} onInput={(e) => setDescription(e.currentTarget.value)} aria-describedby={describedBy} autocomplete="off" />}
      </Field>
      {initial && <Checkbox label="On: deliver events to it" checked={enabled} onChange={setEnabled} name="enabled" />}
      <button type="submit" class="btn primary" disabled={busy}>
        {busy ? props.busyLabel : props.submitLabel}
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
