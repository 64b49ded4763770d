/**
 * A webhook's recent deliveries, newest first, as the admin panel and the
 * portal show them: the event, its status, attempts, the receiver's last
 * answer (status, time, error), the next attempt, and a way to send a
 * finished one again.
 */
import { useApi } from "../hooks.ts";
import { messageOf } from "../errors.ts";
import { ago, utcDateTime } from "../format.ts";
import { notify } from "../notices.ts";
import { Badge, Empty, ErrorBox, Loading } from "./ui.tsx";
import type { Delivery, WebhooksClient } from "./webhook-types.ts";

const DELIVERY_TONE = { pending: "info", delivered: "ok", failed: "bad", dropped: "warn" } as const;
/** Deliveries a webhook's list shows. */
const RECENT = 10;

export function Deliveries(props: { client: WebhooksClient; webhookId: number }) {
  const { client, webhookId } = props;
  const list = useApi(() => client.deliveries(webhookId, RECENT), [webhookId], 5_000);
  if (list.error && !list.data) return <ErrorBox title="Could not load deliveries" message={list.error} retry={list.reload} />;
  if (!list.data) return <Loading what="deliveries" />;
  if (list.data.length === 0) return <Empty>No delivery yet.</Empty>;
  const retry = async (d: Delivery) => {
    try {
      await client.retry(webhookId, d.id);
      notify("ok", `Delivery #${d.id} will be sent again.`);
      await list.reload();
    } catch (err) {
      notify("error", messageOf(err));
    }
  };
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
            <DeliveryRow key={d.id} d={d} retry={() => retry(d)} />
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
          <button type="button" class="btn small" onClick={props.retry} aria-label={`Send delivery #${d.id} again`}>
            Send again
          </button>
        )}
      </td>
    </tr>
  );
}
