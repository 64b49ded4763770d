/**
 * Webhooks over HTTP, as the admin API (/api/webhooks, every webhook) and
 * the portal (/_burrow/api/me/webhooks, the user's own) both serve them:
 * the bodies and queries they take, the answers' shapes, and the handlers,
 * each given whose webhooks it may reach (`owner`: undefined for an
 * admin, the user's id on the portal). A secret is in the answers of a
 * creation and a rotation only.
 */
import * as v from "valibot";
import { EVENT_TYPES } from "../core/events/catalogue.ts";
import { DELIVERY_STATUSES, MAX_OVERLAP_S, type Delivery, type Owner, type Webhook } from "../core/events/webhooks.ts";
import type { Core } from "../core/index.ts";
import { MAX_URL_LENGTH } from "../validate/webhook-url.ts";
import { json, parseBody, parseId, parseQuery } from "./http.ts";
import type { OperationDoc } from "./operation-doc.ts";
import { EntryList, ErrorBody, StatusBody } from "./responses.ts";

const id = v.pipe(v.number(), v.integer(), v.minValue(1));
const count = v.pipe(v.number(), v.integer(), v.minValue(0));
const timestamp = v.pipe(v.string(), v.isoTimestamp());

export const DEFAULT_DELIVERIES_LIMIT = 50;
export const MAX_DELIVERIES_LIMIT = 1000;
/** A rotation's overlap when none is asked: a day. */
export const DEFAULT_OVERLAP_S = 86_400;

const url = v.pipe(v.string("must be a string"), v.trim(), v.minLength(1, "must not be empty"), v.maxLength(MAX_URL_LENGTH, `must be at most ${MAX_URL_LENGTH} characters`));
const events = v.pipe(
  v.array(v.pipe(v.string("must be strings"), v.maxLength(100, "an entry is at most 100 characters")), "must be an array of event types or patterns"),
  v.minLength(1, "must name at least one event type or pattern (* for every one)"),
  v.maxLength(EVENT_TYPES.length + 10, "names too many entries"),
);
const description = v.pipe(v.string("must be a string"), v.trim(), v.maxLength(500, "must be at most 500 characters"));

export const CreateWebhookBody = v.object({
  url: v.nonOptional(url, "is required"),
  events: v.nonOptional(events, "is required"),
  description: v.optional(description),
  enabled: v.optional(v.boolean("must be true or false")),
});

export const UpdateWebhookBody = v.object({
  url: v.optional(url),
  events: v.optional(events),
  description: v.optional(description),
  enabled: v.optional(v.boolean("must be true or false")),
});

export const RotateBody = v.object({
  overlap_seconds: v.optional(
    v.pipe(v.number(`must be an integer from 0 to ${MAX_OVERLAP_S}`), v.integer(`must be an integer from 0 to ${MAX_OVERLAP_S}`), v.minValue(0, `must be an integer from 0 to ${MAX_OVERLAP_S}`), v.maxValue(MAX_OVERLAP_S, `must be an integer from 0 to ${MAX_OVERLAP_S}`)),
  ),
});

const queryInteger = (min: number, max: number, message: string) =>
  v.pipe(v.string(message), v.regex(/^[0-9]{1,16}$/, message), v.transform(Number), v.minValue(min, message), v.maxValue(max, message));

export const DeliveriesQuery = v.object({
  limit: v.optional(queryInteger(1, MAX_DELIVERIES_LIMIT, `must be an integer from 1 to ${MAX_DELIVERIES_LIMIT}`)),
  before_id: v.optional(queryInteger(1, Number.MAX_SAFE_INTEGER, "must be a positive integer")),
  status: v.optional(v.picklist(DELIVERY_STATUSES, `must be one of ${DELIVERY_STATUSES.join(", ")}`)),
});

export const WebhookJson = v.strictObject({
  id,
  url: v.string(),
  description: v.string(),
  /** Event types and patterns (`*`, `tunnel.*`, `token.revoked`). */
  events: v.array(v.string()),
  enabled: v.boolean(),
  /** A user's own webhook (made on the portal): events about that user only; null for an admin's. */
  user_id: v.nullable(id),
  /** api, portal, or flag (the row --alert-webhook keeps). */
  origin: v.picklist(["api", "portal", "flag"]),
  /** Deliveries waiting now. */
  pending: count,
  /** Deliveries dropped unsent because too many were waiting (--webhook-max-pending). */
  dropped: count,
  /** Until when the secret before the last rotation still signs beside the new one; null: it does not. */
  previous_secret_until: v.nullable(timestamp),
  created_at: timestamp,
  updated_at: timestamp,
});

export const NewWebhookJson = v.strictObject({
  ...WebhookJson.entries,
  /** whsec_...: verify deliveries with it (Standard Webhooks); shown here only. */
  secret: v.pipe(v.string(), v.startsWith("whsec_")),
  message: v.string(),
});

export const RotatedJson = v.strictObject({
  ...WebhookJson.entries,
  secret: v.pipe(v.string(), v.startsWith("whsec_")),
  message: v.string(),
});

export const DeliveryJson = v.strictObject({
  id,
  /** The event's id: the body's `id` and the `webhook-id` header. */
  event_id: v.string(),
  event_type: v.string(),
  /** When the event happened. */
  event_at: timestamp,
  status: v.picklist(DELIVERY_STATUSES),
  attempts: count,
  created_at: timestamp,
  last_attempt_at: v.nullable(timestamp),
  /** The receiver's status code at the last attempt; null: no answer (refused, timed out, an address refused). */
  response_status: v.nullable(v.pipe(v.number(), v.integer())),
  duration_ms: v.nullable(count),
  /** Why the last attempt failed, in a few words. */
  error: v.nullable(v.string()),
  /** When it is tried next (pending only; it waits behind the webhook's earlier deliveries). */
  next_attempt_at: v.nullable(timestamp),
  /** When a pending delivery's last attempt comes (--webhook-retry-window). */
  give_up_at: timestamp,
  delivered_at: v.nullable(timestamp),
});

const iso = (ms: number | null) => (ms === null ? null : new Date(ms).toISOString());

export const webhookJson = (w: Webhook) => ({
  id: w.id,
  url: w.url,
  description: w.description,
  events: JSON.parse(w.events) as string[],
  enabled: w.enabled,
  user_id: w.userId,
  origin: w.origin,
  pending: w.pending,
  dropped: w.dropped,
  previous_secret_until: w.previousUntil !== null && Date.parse(w.previousUntil) > Date.now() ? w.previousUntil : null,
  created_at: w.createdAt,
  updated_at: w.updatedAt,
});

export const deliveryJson = (d: Delivery) => ({
  id: d.id,
  event_id: d.eventUid,
  event_type: d.eventType,
  event_at: d.eventAt,
  status: d.status,
  attempts: d.attempts,
  created_at: d.createdAt,
  last_attempt_at: d.lastAttemptAt,
  response_status: d.responseStatus,
  duration_ms: d.durationMs,
  error: d.error,
  next_attempt_at: d.status === "pending" ? iso(d.nextAttemptMs) : null,
  give_up_at: iso(d.giveUpMs)!,
  delivered_at: d.deliveredAt,
});

const SECRET_MESSAGE = "Store this secret now: it is shown only once. Verify each delivery with it (Standard Webhooks: the standardwebhooks or svix libraries).";

/** What a handler is given: the request, its path's parameters, and whose webhooks it reaches. */
export interface WebhookCall {
  req: Request;
  params: Record<string, string | undefined>;
  core: Core;
  owner: Owner;
  audit: { target?: string; details?: Record<string, unknown> };
}

/** The handlers, by path (relative to the webhooks' base) and method. */
export const webhookHandlers = {
  list: async ({ core, owner }: WebhookCall) => json((await core.webhooks.list(owner)).map(webhookJson)),
  async create({ req, core, owner, audit }: WebhookCall) {
    const body = await parseBody(req, CreateWebhookBody);
    const { webhook, secret } = await core.webhooks.create(body, { userId: owner });
    audit.target = `webhook:${webhook.id}`;
    audit.details = { events: body.events, ...(body.description ? { description: body.description.slice(0, 100) } : {}) };
    return json({ ...webhookJson(webhook), secret, message: SECRET_MESSAGE }, 201);
  },
  read: async ({ params, core, owner }: WebhookCall) => json(webhookJson(await core.webhooks.get(parseId(params.id), owner))),
  async update({ req, params, core, owner, audit }: WebhookCall) {
    const webhookId = parseId(params.id);
    audit.target = `webhook:${webhookId}`;
    const body = await parseBody(req, UpdateWebhookBody);
    audit.details = { fields: Object.keys(body).filter((k) => (body as Record<string, unknown>)[k] !== undefined) };
    return json(webhookJson(await core.webhooks.update(webhookId, body, owner)));
  },
  async remove({ params, core, owner, audit }: WebhookCall) {
    const webhookId = parseId(params.id);
    audit.target = `webhook:${webhookId}`;
    await core.webhooks.remove(webhookId, owner);
    return json({ status: "deleted" });
  },
  async rotate({ req, params, core, owner, audit }: WebhookCall) {
    const webhookId = parseId(params.id);
    audit.target = `webhook:${webhookId}`;
    const body = await parseBody(req, RotateBody);
    const overlap = body.overlap_seconds ?? DEFAULT_OVERLAP_S;
    audit.details = { overlap_seconds: overlap };
    const { webhook, secret } = await core.webhooks.rotate(webhookId, overlap, owner);
    return json({ ...webhookJson(webhook), secret, message: SECRET_MESSAGE });
  },
  async deliveries({ req, params, core, owner }: WebhookCall) {
    const q = parseQuery(req, DeliveriesQuery);
    const list = await core.webhooks.deliveries(parseId(params.id), { limit: q.limit ?? DEFAULT_DELIVERIES_LIMIT, beforeId: q.before_id, status: q.status }, owner);
    return json(list.map(deliveryJson));
  },
  async retry({ params, core, owner, audit }: WebhookCall) {
    const webhookId = parseId(params.id);
    const deliveryId = parseId(params.delivery, "delivery");
    audit.target = `webhook:${webhookId}`;
    audit.details = { delivery: deliveryId };
    return json(deliveryJson(await core.webhooks.retry(webhookId, deliveryId, owner)));
  },
};

const NOT_FOUND = { description: "No such webhook (or, on the portal, none of the user's)", schema: ErrorBody };
const BAD = { description: "A field is wrong: the URL's form or address (loopback, private and link-local ones are refused unless the server allows them), or an event name the catalogue does not have", schema: ErrorBody };

/** The OpenAPI words of each handler; `whose`: whose webhooks, as the side says it. */
export function webhookDocs(whose: string) {
  return {
    list: { summary: `${whose} webhooks, by id, with their deliveries waiting and dropped (never their secrets)`, responses: { 200: { description: "The webhooks", schema: EntryList(WebhookJson) } } },
    create: {
      summary: "Make a webhook: events (types, `subject.*` or `*`) are delivered to its URL, signed with its secret, which is in this answer only",
      body: CreateWebhookBody,
      responses: { 201: { description: "Made, with its secret", schema: NewWebhookJson }, 400: BAD, 409: { description: "TOO_MANY_WEBHOOKS", schema: ErrorBody } },
    },
    read: { summary: "A webhook", responses: { 200: { description: "The webhook", schema: WebhookJson }, 404: NOT_FOUND } },
    update: { summary: "Change a webhook: only the fields given change", body: UpdateWebhookBody, responses: { 200: { description: "Changed", schema: WebhookJson }, 400: BAD, 404: NOT_FOUND } },
    remove: { summary: "Delete a webhook with its deliveries (those waiting are never sent)", responses: { 200: { description: "Deleted", schema: StatusBody("deleted") }, 404: NOT_FOUND } },
    rotate: {
      summary: "A new secret for a webhook, in this answer only; the old one keeps signing beside it for overlap_seconds (default a day, 0 to 7 days)",
      description: "During the overlap each delivery carries two signatures in webhook-signature, one per secret, space-separated: receivers verifying with either accept it.",
      body: RotateBody,
      responses: { 200: { description: "The webhook with its new secret", schema: RotatedJson }, 404: NOT_FOUND },
    },
    deliveries: {
      summary: "A webhook's deliveries, newest first: status, attempts, the last attempt's answer, duration and error, the next attempt",
      description: `Page with before_id: the id of the last delivery of the previous page. ${DEFAULT_DELIVERIES_LIMIT} unless limit says.`,
      query: DeliveriesQuery,
      responses: { 200: { description: "Deliveries, newest first", schema: EntryList(DeliveryJson) }, 404: NOT_FOUND },
    },
    retry: {
      summary: "Send a delivery again (failed, dropped or delivered): pending once more, tried for another retry window, after the webhook's earlier ones",
      responses: { 200: { description: "The delivery, pending", schema: DeliveryJson }, 404: { description: "No such webhook or delivery", schema: ErrorBody }, 409: { description: "DELIVERY_PENDING: it is being tried already", schema: ErrorBody } },
    },
  } satisfies Record<keyof typeof webhookHandlers, OperationDoc>;
}

/**
 * The webhook routes under `prefix` (the admin API's /api/webhooks, the
 * portal's /_burrow/api/me/webhooks), each handler held to its caller by
 * `held`: an admin reaches every webhook, a user their own.
 */
export function webhookRouteTable<H>(prefix: string, whose: string, held: (h: (call: WebhookCall) => Promise<Response>) => H) {
  const docs = webhookDocs(whose);
  const h = webhookHandlers;
  return [
    { path: prefix, methods: { GET: held(h.list), POST: held(h.create) }, audit: { POST: "webhook.create" as const }, docs: { GET: docs.list, POST: docs.create } },
    {
      path: `${prefix}/:id`,
      methods: { GET: held(h.read), PUT: held(h.update), DELETE: held(h.remove) },
      audit: { PUT: "webhook.update" as const, DELETE: "webhook.delete" as const },
      docs: { GET: docs.read, PUT: docs.update, DELETE: docs.remove },
    },
    { path: `${prefix}/:id/rotate`, methods: { POST: held(h.rotate) }, audit: { POST: "webhook.rotate" as const }, docs: { POST: docs.rotate } },
    { path: `${prefix}/:id/deliveries`, methods: { GET: held(h.deliveries) }, docs: { GET: docs.deliveries } },
    { path: `${prefix}/:id/deliveries/:delivery/retry`, methods: { POST: held(h.retry) }, audit: { POST: "webhook.retry" as const }, docs: { POST: docs.retry } },
  ];
}
