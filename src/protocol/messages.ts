/**
 * The JSON carried by control frames and by OPEN/REPLY, with their schemas.
 * Both ends validate what they receive: a message that does not fit is a
 * protocol error, never a crash.
 */
import * as v from "valibot";

const HeaderList = v.pipe(
  v.array(v.tuple([v.pipe(v.string(), v.maxLength(256)), v.pipe(v.string(), v.maxLength(65536))])),
  v.maxLength(1000),
);
export type HeaderList = [string, string][];

export const TunnelRequest = v.variant("protocol", [
  v.object({
    protocol: v.literal("http"),
    subdomain: v.optional(v.pipe(v.string(), v.maxLength(253))),
    skipWarning: v.optional(v.boolean()),
  }),
  v.object({
    protocol: v.literal("tcp"),
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
  }),
]);
export type TunnelRequest = v.InferOutput<typeof TunnelRequest>;

/** agent -> edge, first frame. */
export const Hello = v.object({
  version: v.number(),
  token: v.pipe(v.string(), v.maxLength(512)),
  tunnels: v.pipe(v.array(TunnelRequest), v.minLength(1), v.maxLength(16)),
  /** The agent reaches the edge through a proxy. */
  proxy: v.optional(v.boolean(), false),
  /** Session id from a previous READY: the edge evicts that session (if still live) and hands its tunnels back. */
  resume: v.optional(v.pipe(v.string(), v.maxLength(64))),
  agent: v.optional(v.pipe(v.string(), v.maxLength(100))),
});
export type Hello = v.InferOutput<typeof Hello>;

export interface GrantedTunnel {
  id: string;
  protocol: "http" | "tcp";
  subdomain?: string;
  port?: number;
  /** The public address, as a person would type it. */
  url: string;
}

/** edge -> agent, the handshake's success. */
export const Ready = v.object({
  session: v.string(),
  username: v.string(),
  tunnels: v.array(
    v.object({
      id: v.string(),
      protocol: v.picklist(["http", "tcp"]),
      subdomain: v.optional(v.string()),
      port: v.optional(v.number()),
      url: v.string(),
    }),
  ),
});
export type Ready = v.InferOutput<typeof Ready>;

/** Either way: why the connection ends (handshake refusal, revocation, protocol error). */
export const Refusal = v.object({ code: v.string(), message: v.string() });
export type Refusal = v.InferOutput<typeof Refusal>;

export const RequestHead = v.object({
  method: v.pipe(v.string(), v.maxLength(32)),
  path: v.pipe(v.string(), v.maxLength(65536)),
  headers: HeaderList,
});
export type RequestHead = v.InferOutput<typeof RequestHead>;

/** OPEN metadata, edge -> agent. */
export const OpenMeta = v.object({
  tunnel: v.string(),
  kind: v.picklist(["http", "ws", "tcp"]),
  /** The visitor's address, "ip:port". */
  remote: v.string(),
  head: v.optional(RequestHead),
  /** The request has a body (DATA follows); else the stream's edge side is already ended. */
  body: v.optional(v.boolean()),
});
export type OpenMeta = v.InferOutput<typeof OpenMeta>;

/** REPLY metadata for http: the local service's response head. */
export const ResponseHead = v.object({
  status: v.pipe(v.number(), v.integer(), v.minValue(100), v.maxValue(999)),
  headers: HeaderList,
});
export type ResponseHead = v.InferOutput<typeof ResponseHead>;

/** REPLY metadata for ws: the subprotocol the local service chose. */
export const WsReply = v.object({ protocol: v.optional(v.string()) });
