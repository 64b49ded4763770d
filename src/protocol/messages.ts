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

/** CIDRs or single addresses, IPv4 or IPv6, as written ("10.0.0.0/8", "::1"); the edge checks them. */
const CidrTexts = v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64))), v.maxLength(256)));
const HeaderPairs = v.optional(
  v.pipe(v.array(v.tuple([v.pipe(v.string(), v.maxLength(256)), v.pipe(v.string(), v.maxLength(8192))])), v.maxLength(64)),
);

/**
 * Who may reach an http tunnel, asked by its agent and enforced by the edge
 * before a byte reaches the agent. Basic-auth passwords and the OIDC client
 * secret travel here, over the agent's connection: the edge never logs them
 * nor puts them in a refusal. A server that predates `access` drops it
 * (unknown keys are dropped) and would open the tunnel unprotected, so the
 * edge says `access: true` on each tunnel of READY whose rules it took, and
 * the agent serves no tunnel that asked for rules without it.
 */
export const HttpAccess = v.object({
  basicAuth: v.optional(v.pipe(v.array(v.object({ user: v.pipe(v.string(), v.maxLength(256)), password: v.pipe(v.string(), v.maxLength(1024)) })), v.maxLength(64))),
  /** Visitors must be in one of these (when there are any)... */
  allowCidrs: CidrTexts,
  /** ...and in none of these: deny wins. */
  denyCidrs: CidrTexts,
  /** Set on each request to the local service (replacing what the visitor sent under that name). */
  requestHeaderAdd: HeaderPairs,
  /** Removed from each request before it travels. */
  requestHeaderRemove: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(256))), v.maxLength(64))),
  /** Set on each response to the visitor (replacing the service's under that name). */
  responseHeaderAdd: HeaderPairs,
  /** Visitors sign in with this OpenID Connect provider. */
  oidc: v.optional(
    v.object({
      issuer: v.pipe(v.string(), v.maxLength(2048)),
      clientId: v.pipe(v.string(), v.maxLength(512)),
      clientSecret: v.pipe(v.string(), v.maxLength(2048)),
      /** "a@b.com" or "@domain.com"; none: any address the provider vouches for. */
      allowEmails: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(320))), v.maxLength(256))),
    }),
  ),
});
export type HttpAccess = v.InferOutput<typeof HttpAccess>;

/** A tcp tunnel has IP rules only: nothing of a TCP stream says who the visitor is. */
export const TcpAccess = v.object({ allowCidrs: CidrTexts, denyCidrs: CidrTexts });
export type TcpAccess = v.InferOutput<typeof TcpAccess>;

export const TunnelRequest = v.variant("protocol", [
  v.object({
    protocol: v.literal("http"),
    subdomain: v.optional(v.pipe(v.string(), v.maxLength(253))),
    skipWarning: v.optional(v.boolean()),
    /** Seconds the edge waits for the local service's answer, asked by the agent (the edge caps it). */
    responseTimeout: v.optional(v.pipe(v.number(), v.minValue(0.1), v.maxValue(86_400))),
    access: v.optional(HttpAccess),
  }),
  v.object({
    protocol: v.literal("tcp"),
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
    access: v.optional(TcpAccess),
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
  /** The agent can leave a WebSocket for the edge's direct port when sent MOVE. */
  direct: v.optional(v.boolean(), false),
  /** The agent understands DRAIN (reconnect now, keep this connection for its streams). */
  drain: v.optional(v.boolean(), false),
  /**
   * Several tunnels, each on its own: the edge grants those it can and names
   * the others in READY's `refused`. Without it one refused tunnel refuses the
   * HELLO. Checks of the token, the user or the connection refuse it either way.
   */
  partial: v.optional(v.boolean(), false),
});
export type Hello = v.InferOutput<typeof Hello>;

export interface GrantedTunnel {
  id: string;
  protocol: "http" | "tcp";
  subdomain?: string;
  port?: number;
  /** The public address, as a person would type it. */
  url: string;
  index?: number;
  /** The edge enforces the tunnel's `access` rules (sent only when it had some). */
  access?: boolean;
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
      /** Which of HELLO's tunnels this is (a partial HELLO); without it, READY lists them in HELLO's order. */
      index: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
      /** The edge took the tunnel's `access` rules; an agent that asked for some serves no tunnel without it. */
      access: v.optional(v.boolean()),
    }),
  ),
  /** Tunnels of a partial HELLO that were not granted, each with why. */
  refused: v.optional(
    v.array(v.object({ index: v.pipe(v.number(), v.integer(), v.minValue(0)), code: v.string(), message: v.string() })),
  ),
});
export type Ready = v.InferOutput<typeof Ready>;

/** edge -> agent instead of READY: say HELLO again on this port of the same host. */
export const Move = v.object({ port: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535)) });

/**
 * Either way: why the connection ends (handshake refusal, revocation, protocol error).
 * `retry_after` (seconds), when present, is when the same HELLO may come back (RATE_LIMITED);
 * optional, so agents that predate it read the rest as before (unknown keys are dropped).
 */
export const Refusal = v.object({
  code: v.string(),
  message: v.string(),
  retry_after: v.optional(v.pipe(v.number(), v.finite(), v.minValue(0))),
});
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

/**
 * OPEN between two nodes of a cluster (a relay link): `tunnel` is the
 * subdomain, and `client` the visitor's address as the visitor's node
 * judged it (trusted proxies applied), for the access rules the agent's node
 * applies. Never sent to an agent.
 */
export type RelayedMeta = OpenMeta & {
  client?: string;
  /**
   * The visitor's node would show this visitor the browser warning: the
   * agent's node shows it, once the visitor has passed the tunnel's access
   * rules (sign-in first, the warning after, as on one node).
   */
  warn?: boolean;
};

/** REPLY metadata for http: the local service's response head. */
export const ResponseHead = v.object({
  status: v.pipe(v.number(), v.integer(), v.minValue(100), v.maxValue(999)),
  headers: HeaderList,
});
export type ResponseHead = v.InferOutput<typeof ResponseHead>;

/**
 * REPLY metadata for ws: the subprotocol the local service chose. A ws REPLY
 * that is a ResponseHead instead (a status, and a Content-Length for the body
 * that follows) refuses the upgrade with that answer: another node sends it
 * when the tunnel's access rules turn a relayed visitor away.
 */
export const WsReply = v.object({ protocol: v.optional(v.string()) });

// -- per-request fast paths ---------------------------------------------------------------------
// OPEN and REPLY metadata arrive once per visitor request: checked by hand, as the schemas
// above describe, because a generic schema walk costs more than the rest of the request.

function isHeaderList(x: unknown): x is HeaderList {
  if (!Array.isArray(x) || x.length > 1000) return false;
  for (const pair of x) {
    if (!Array.isArray(pair) || pair.length !== 2) return false;
    const [n, v] = pair;
    if (typeof n !== "string" || typeof v !== "string" || n.length > 256 || v.length > 65536) return false;
  }
  return true;
}

const OPEN_KINDS = new Set(["http", "ws", "tcp"]);

/** OpenMeta, or undefined when `raw` does not fit it. */
export function readOpenMeta(raw: unknown): OpenMeta | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const m = raw as Record<string, unknown>;
  if (typeof m.tunnel !== "string" || typeof m.remote !== "string" || !OPEN_KINDS.has(m.kind as string)) return undefined;
  if (m.body !== undefined && typeof m.body !== "boolean") return undefined;
  if (m.head !== undefined) {
    const h = m.head as Record<string, unknown>;
    if (typeof h !== "object" || h === null) return undefined;
    if (typeof h.method !== "string" || h.method.length > 32 || typeof h.path !== "string" || h.path.length > 65536) return undefined;
    if (!isHeaderList(h.headers)) return undefined;
  }
  return m as OpenMeta;
}

/**
 * Whether a response with this status can be given to a visitor: 101 (the
 * switch to a WebSocket) and 200-599. The other 1xx are interim answers,
 * never a final one, and 600-999 fit a status line but mean nothing in
 * HTTP; Bun's Response refuses both.
 */
export function isFinalStatus(status: number): boolean {
  return status === 101 || (status >= 200 && status <= 599);
}

/**
 * ResponseHead, or why `raw` is none a visitor can be given: a sentence
 * about the tunnel (its agent, its local service) for the visitor's 502.
 */
export function readResponseHead(raw: unknown): ResponseHead | string {
  if (typeof raw !== "object" || raw === null) return "its agent sent a malformed response";
  const r = raw as Record<string, unknown>;
  const status = r.status as number;
  if (!Number.isInteger(status) || status < 100 || status > 999 || !isHeaderList(r.headers)) return "its agent sent a malformed response";
  // burrow's agent passes a local service's status on as it came: this is the one place it is judged
  if (!isFinalStatus(status)) return `its local service sent an invalid status ${status}`;
  return r as ResponseHead;
}
