/**
 * What one node tells the others over NOTIFY (cluster.ts): one JSON object
 * per message, `kind` saying which, `from` the node that said it. What
 * arrives is read through the schema below, so a payload that is not JSON or
 * not one of these shapes (a bug, a node of another version, anyone else
 * with NOTIFY rights on the database) is not acted on, and the reader gets
 * the reason to log.
 */
import * as v from "valibot";

const id = v.pipe(v.number(), v.integer());
/** Any code, not only this version's (core/errors.ts): a close from a newer node must still close. */
const code = v.pipe(v.string(), v.maxLength(100));
const from = v.string();

const Message = v.variant("kind", [
  /** An admin closed a user's tunnels (disabled, deleted, over quota): closed here too. */
  v.object({ kind: v.literal("close-user"), userId: id, code, message: v.string(), from }),
  /** A token was revoked: its tunnels here close. */
  v.object({ kind: v.literal("close-token"), tokenId: id, code, message: v.string(), from }),
  /**
   * An admin change that may narrow what someone may do (core/live.ts
   * RulesChange: one of `userId`, `hostname`, `subdomain`): what it concerns
   * here is judged again by the handshake's rules (edge/live-rules.ts).
   */
  v.object({
    kind: v.literal("rules"),
    userId: v.optional(id),
    hostname: v.optional(v.pipe(v.string(), v.maxLength(253))),
    subdomain: v.optional(v.pipe(v.string(), v.maxLength(63))),
    from,
  }),
  /** A token's remote config changed: its agents here that run it are sent it (edge/agents.ts sendConfig). */
  v.object({ kind: v.literal("config"), tokenId: id, from }),
  /** The admin asks an agent connected to node `to` (its session) to reconnect or to update (cluster/cluster-agents.ts). */
  v.object({ kind: v.literal("ask"), ref: v.pipe(v.string(), v.maxLength(64)), to: v.pipe(v.string(), v.maxLength(200)), session: v.pipe(v.string(), v.maxLength(64)), action: v.picklist(["restart", "update"]), from }),
  /** Node `to`'s ask answered: whether the session is there, whether its agent answered, and what. */
  v.object({
    kind: v.literal("answered"),
    ref: v.pipe(v.string(), v.maxLength(64)),
    to: v.pipe(v.string(), v.maxLength(200)),
    found: v.boolean(),
    answered: v.boolean(),
    accepted: v.optional(v.boolean()),
    message: v.optional(v.pipe(v.string(), v.maxLength(1000))),
    from,
  }),
  /** Said by nodes of the version before `rules`: a user's require_auth or allowed CIDRs changed; taken as `rules` for the user. */
  v.object({ kind: v.literal("user-access"), userId: id, from }),
  /** A name went to the sender's node: a tunnel of it kept here goes. */
  v.object({ kind: v.literal("taken"), name: v.string(), sessionId: v.string(), from }),
  /** A pool's members changed (one joined, left, or went in or out of rotation): what other nodes know of it is asked again. */
  v.object({ kind: v.literal("pool"), name: v.pipe(v.string(), v.maxLength(300)), from }),
  /** A private tunnel came, went, or was shared anew: its connectors on other nodes ask again whether they may reach it. */
  v.object({ kind: v.literal("private"), ownerId: id, name: v.pipe(v.string(), v.maxLength(63)), from }),
  /** Admin logins, for the login throttle to count cluster-wide. */
  v.object({ kind: v.literal("login-failed"), address: v.string(), username: v.string(), from }),
  v.object({ kind: v.literal("login-ok"), username: v.string(), from }),
  /** ACME (acme/shared.ts): a certificate stored in the database, to be served here too. */
  v.object({ kind: v.literal("acme-certificate"), id: v.pipe(v.string(), v.maxLength(253)), from }),
  /** ACME: a challenge answer to serve here too (added), or no longer. */
  v.object({
    kind: v.literal("acme-challenge"),
    type: v.picklist(["http-01", "dns-01", "tls-alpn-01"]),
    name: v.pipe(v.string(), v.maxLength(300)),
    value: v.pipe(v.string(), v.maxLength(1000)),
    added: v.boolean(),
    from,
  }),
  /** ACME: the sender serves the answer `id` published by node `to` (which waits for every live node's before the CA looks). */
  v.object({ kind: v.literal("acme-seen"), id: v.pipe(v.string(), v.maxLength(1400)), to: v.pipe(v.string(), v.maxLength(200)), from }),
]);

export type Message = v.InferOutput<typeof Message>;
/** A message as its sender writes it: `from` is added when it is sent. */
export type Said = Message extends infer M ? (M extends unknown ? Omit<M, "from"> : never) : never;

/** How much of a payload not understood a log line shows (NOTIFY allows up to 8000 bytes). */
export const SHOWN_PAYLOAD = 200;

/** The message a payload carries, or why it carries none. */
export function readMessage(payload: string): Message | { problem: string } {
  let raw: unknown;
  try {
    raw = JSON.parse(payload);
  } catch {
    return { problem: "not JSON" };
  }
  const parsed = v.safeParse(Message, raw);
  if (parsed.success) return parsed.output;
  const issue = parsed.issues[0];
  return { problem: `${v.getDotPath(issue) ?? "message"}: ${issue.message}` };
}
