/**
 * The agent's check (wire.ts CHECK_PATH): what a HELLO with these tunnels
 * would get, asked without opening anything. `burrow diagnose` POSTs an
 * AgentCheck and reads an AgentCheckAnswer; the edge judges it with the
 * handshake's own rules (core/admission.ts) against what is live now, and
 * the handshake throttle counts a bad token as it counts a failed HELLO.
 *
 * With `remote`, the answer also carries the token's remote config (what
 * CONFIG sends an agent of it), which `burrow diagnose --remote` reads as
 * the agent would and asks about in a second check.
 *
 * Statuses: 200 with the answer; 400 for a body that is not an AgentCheck;
 * 409 VERSION_MISMATCH (the protocol versions differ: judged first, as at
 * the handshake); 401 AUTH_FAILED, 403 TOKEN_DISABLED or USER_DISABLED,
 * 429 RATE_LIMITED (with Retry-After), 503 DATABASE_UNAVAILABLE. Every
 * error's body is {"error": message, "code": CODE}.
 */
import * as v from "valibot";
import { TunnelRequest } from "./messages.ts";
import { MAX_SESSION_TUNNELS } from "./wire.ts";

/** The largest check body: a HELLO's frame, and some room for the JSON around it. */
export const MAX_CHECK_BYTES = 512 * 1024;

/** diagnose -> edge. */
export const AgentCheck = v.object({
  /** The agent's PROTOCOL_VERSION. */
  version: v.number(),
  token: v.pipe(v.string(), v.maxLength(512)),
  /** The agent reaches the edge through a proxy (the user's can_use_proxy decides, as at the handshake). */
  proxy: v.optional(v.boolean(), false),
  /** The tunnels of its config file, none for the token alone; as many as a HELLO carries. */
  tunnels: v.optional(v.pipe(v.array(TunnelRequest), v.maxLength(MAX_SESSION_TUNNELS)), []),
  /**
   * The agent runs its token's remote config (`burrow start --remote`): the
   * answer carries the config the server keeps for the token (what CONFIG
   * would send it), for the agent to read and check its tunnels with. An
   * edge older than remote configs drops the key and answers without it.
   */
  remote: v.optional(v.boolean(), false),
});
export type AgentCheck = v.InferOutput<typeof AgentCheck>;

/** A refusal: the code and the sentence the handshake would send. */
const Refusal = v.object({ code: v.string(), message: v.string() });

/** edge -> diagnose, 200. */
export const AgentCheckAnswer = v.object({
  /** The server's PROTOCOL_VERSION and burrow version. */
  protocol_version: v.number(),
  server_version: v.string(),
  token: v.object({ id: v.number(), device_name: v.string() }),
  /** The token's user and its limits (0: none), with what it uses now. */
  user: v.object({
    username: v.string(),
    enabled: v.boolean(),
    max_tunnels: v.number(),
    tunnels_open: v.number(),
    max_devices: v.number(),
    devices_connected: v.number(),
    allowed_protocols: v.string(),
    traffic_limit: v.number(),
    traffic_used: v.number(),
    traffic_period: v.string(),
    can_use_proxy: v.boolean(),
    require_auth: v.boolean(),
  }),
  /** What refuses every tunnel of this agent now (a device limit, the traffic quota, a proxy), or null. */
  refusal: v.nullable(Refusal),
  /** Each tunnel asked, in order: granted now (with the name or port it would get), or why not. */
  tunnels: v.array(
    v.object({
      index: v.number(),
      ok: v.boolean(),
      code: v.optional(v.string()),
      message: v.optional(v.string()),
      subdomain: v.optional(v.string()),
      hostname: v.optional(v.string()),
      port: v.optional(v.number()),
      /** The name or port is held by an agent of this same token now (it would be handed over on its reconnect). */
      held_by_this_token: v.optional(v.boolean()),
    }),
  ),
  /** Asked with `remote`: the token's remote config as CONFIG carries it (burrow.yml's `tunnels:` map; version 0 and none when it was never set). */
  remote_config: v.optional(v.object({ version: v.pipe(v.number(), v.integer(), v.minValue(0)), tunnels: v.record(v.string(), v.unknown()) })),
});
export type AgentCheckAnswer = v.InferOutput<typeof AgentCheckAnswer>;
