/**
 * The JSON carried by control frames and by OPEN/REPLY, with their schemas.
 * Both ends validate what they receive: a message that does not fit is a
 * protocol error, never a crash.
 */
import * as v from "valibot";
import { KIND_NAMES, PRIVATE_KINDS, STREAM_KINDS, type TunnelKind } from "./kinds.ts";
import { MAX_PAYLOAD } from "./wire.ts";

/** Header fields in order, names as sent. */
export type HeaderList = [string, string][];

/** An Upgrade protocol name (RFC 9110 §7.8) as --allow-upgrade takes it: a token, without a version. */
export const UPGRADE_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;

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

/**
 * A private tunnel (`--private --name db --share bob,carol`): no public port
 * or name; reached only through `burrow connect owner/name` by its owner and
 * the users it is shared with. `localPort`: the owner's service port, which a
 * connector's local port takes when it is free there.
 */
export const PrivateRequest = v.object({
  name: v.pipe(v.string(), v.maxLength(63)),
  share: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64))), v.maxLength(64))),
  localPort: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
});
export type PrivateRequest = v.InferOutput<typeof PrivateRequest>;

export const TunnelRequest = v.variant("protocol", [
  v.object({
    protocol: v.literal("http"),
    subdomain: v.optional(v.pipe(v.string(), v.maxLength(253))),
    /** A custom hostname of the user's, verified (demo.acme.com): the tunnel is reached by it as well as by its subdomain. */
    hostname: v.optional(v.pipe(v.string(), v.maxLength(253))),
    skipWarning: v.optional(v.boolean()),
    /** Seconds the edge waits for the local service's answer, asked by the agent (the edge caps it). */
    responseTimeout: v.optional(v.pipe(v.number(), v.minValue(0.1), v.maxValue(86_400))),
    access: v.optional(HttpAccess),
    /** Share the name with the user's other agents that ask for it with `pool` (edge/pool.ts). */
    pool: v.optional(v.boolean()),
    /** How the pool spreads requests; the first member's choice holds for the pool. */
    balance: v.optional(v.picklist(["round-robin", "least-requests"])),
    /** No public name: reached through `burrow connect` (PrivateRequest), each request with the connector's X-Burrow-User. */
    private: v.optional(PrivateRequest),
    /**
     * Protocols besides websocket a request may switch to (Upgrade tokens,
     * such as h2c); any other Upgrade is taken off the request (http/upgrade.ts).
     * A server that predates it drops it: websocket only, the safe side.
     */
    allowUpgrade: v.optional(v.pipe(v.array(v.pipe(v.string(), v.regex(UPGRADE_TOKEN))), v.maxLength(16))),
  }),
  v.object({
    protocol: v.literal("tcp"),
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
    access: v.optional(TcpAccess),
    /** No public port: reached through `burrow connect` (PrivateRequest). */
    private: v.optional(PrivateRequest),
    /** Share the port with the user's other agents that ask for it with `pool`: connections are spread. */
    pool: v.optional(v.boolean()),
    balance: v.optional(v.picklist(["round-robin", "least-requests"])),
  }),
  /** Visitors' TLS connections for `subdomain`, passed through by the ClientHello's name, undecrypted; IP rules only, as tcp. */
  v.object({
    protocol: v.literal("tls"),
    subdomain: v.optional(v.pipe(v.string(), v.maxLength(253))),
    hostname: v.optional(v.pipe(v.string(), v.maxLength(253))),
    access: v.optional(TcpAccess),
  }),
  /** A public UDP port (its own port space, not tcp's): each visitor address's datagrams a flow to the local service; IP rules only. */
  v.object({
    protocol: v.literal("udp"),
    port: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
    access: v.optional(TcpAccess),
    /** No public port: reached through `burrow connect` (PrivateRequest). */
    private: v.optional(PrivateRequest),
  }),
]);
export type TunnelRequest = v.InferOutput<typeof TunnelRequest>;

/** agent -> edge, first frame. */
export const Hello = v.pipe(
  v.object({
    version: v.number(),
    token: v.pipe(v.string(), v.maxLength(512)),
    /** At least one, unless the HELLO is a connector's (`connect`), which opens none. */
    tunnels: v.pipe(v.array(TunnelRequest), v.maxLength(16)),
    /**
     * `burrow connect owner/name`: this connection reaches a private tunnel
     * instead of opening tunnels. After READY the agent opens a stream per
     * local connection (OPEN `{tunnel: "connect", kind: "tcp", remote}`; for
     * a udp tunnel one per local flow, kind "udp", its datagrams DATAGRAM
     * frames), which the edge joins to a stream to the owner's agent.
     */
    connect: v.optional(v.object({ target: v.pipe(v.string(), v.maxLength(200)) })),
    /** The agent reaches the edge through a proxy. */
    proxy: v.optional(v.boolean(), false),
    /** Session id from a previous READY: the edge evicts that session (if still live) and hands its tunnels back. */
    resume: v.optional(v.pipe(v.string(), v.maxLength(64))),
    agent: v.optional(v.pipe(v.string(), v.maxLength(100))),
    /** The agent can leave a WebSocket for the edge's direct port when sent MOVE. */
    direct: v.optional(v.boolean(), false),
    /** The agent understands DRAIN (reconnect now, keep this connection for its streams). */
    drain: v.optional(v.boolean(), false),
    /** The agent serves an h1 stream whose OPEN says `keep`: a visitor connection's requests, one after another (OpenMeta). */
    keep: v.optional(v.boolean(), false),
    /**
     * Several tunnels, each on its own: the edge grants those it can and names
     * the others in READY's `refused`. Without it one refused tunnel refuses the
     * HELLO. Checks of the token, the user or the connection refuse it either way.
     */
    partial: v.optional(v.boolean(), false),
    /** The agent understands REVOKE (wire.ts): one of its tunnels closed alone, the others going on. */
    revoke: v.optional(v.boolean(), false),
  }),
  v.check((h) => h.connect !== undefined || h.tunnels.length >= 1, "tunnels: at least one, unless connect"),
);
export type Hello = v.InferOutput<typeof Hello>;

export interface GrantedTunnel {
  id: string;
  protocol: TunnelKind;
  subdomain?: string;
  /** Its custom hostname, when it has one. */
  hostname?: string;
  port?: number;
  /** The public address, as a person would type it. */
  url: string;
  index?: number;
  /** The edge enforces the tunnel's `access` rules (sent only when it had some). */
  access?: boolean;
  /** A pool member (edge/pool.ts). */
  pool?: boolean;
  private?: { target: string; shares: string[] };
}

/** agent -> edge: a pool member's tunnel (READY's id) leaves the rotation (`in`: false) or comes back. */
export const Rotation = v.object({ tunnel: v.pipe(v.string(), v.maxLength(64)), in: v.boolean() });
export type Rotation = v.InferOutput<typeof Rotation>;

/** edge -> agent: one tunnel of the session closed alone (wire.ts REVOKE), with the refusal its handshake would get now. */
export const Revoke = v.object({ tunnel: v.pipe(v.string(), v.maxLength(64)), code: v.pipe(v.string(), v.maxLength(100)), message: v.pipe(v.string(), v.maxLength(1000)) });
export type Revoke = v.InferOutput<typeof Revoke>;

/** The edge's answer to a GET of CONNECT_PATH (wire.ts): where its direct port is, if it has one. */
export const DirectPortAnswer = v.object({
  direct_port: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
});
export type DirectPortAnswer = v.InferOutput<typeof DirectPortAnswer>;

/** edge -> agent, the handshake's success. */
export const Ready = v.object({
  session: v.string(),
  username: v.string(),
  tunnels: v.array(
    v.object({
      id: v.string(),
      protocol: v.picklist(KIND_NAMES),
      subdomain: v.optional(v.string()),
      hostname: v.optional(v.string()),
      port: v.optional(v.number()),
      url: v.string(),
      /** Which of HELLO's tunnels this is (a partial HELLO); without it, READY lists them in HELLO's order. */
      index: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
      /** The edge took the tunnel's `access` rules; an agent that asked for some serves no tunnel without it. */
      access: v.optional(v.boolean()),
      /** A pool member: the agent may take it out of rotation and back (ROTATION). */
      pool: v.optional(v.boolean()),
      /** A private tunnel: reached as `target` (owner/name) by its owner and these users. */
      private: v.optional(v.object({ target: v.string(), shares: v.array(v.string()) })),
    }),
  ),
  /** A connector's HELLO: what it reaches, and the owner's service port to offer locally. */
  connect: v.optional(v.object({ target: v.string(), protocol: v.picklist(PRIVATE_KINDS), localPort: v.optional(v.number()) })),
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

/**
 * OPEN metadata, edge -> agent.
 *
 * kind "h1", one visitor request: `head` is the request head as the local
 * service is to read it (request line, header fields, the blank line), in
 * latin1, the edge's X-Forwarded-* and access rules already applied; the
 * agent changes only Host, when told to. The request's body follows in DATA
 * exactly as the visitor framed it (chunked stays chunked), and the edge's
 * FIN comes after its last byte (with OPEN itself when there is none). The
 * agent answers REPLY `{}` with the local service's first byte, then DATA:
 * the response exactly as the service sent it (interim 1xx answers, head,
 * body with its framing), nothing past its end, and FIN after its last byte.
 * After a `101 Switching Protocols` both directions carry the new
 * protocol's bytes until each side's FIN.
 *
 * With `keep` (sent only to an agent whose HELLO said `keep`), the stream
 * carries a visitor connection's requests one after another, as that
 * connection does: there is no FIN after the request; after a response's
 * last byte the agent keeps the stream open, and the edge sends the next
 * request's head in DATA, its body after it, once the response before it
 * has reached its end (never pipelined). The agent's REPLY comes once, with
 * the first response; every later response begins with its first DATA. The
 * agent ends its side with FIN after a response (exactly as it would
 * without `keep`) when the stream cannot carry another: the service or the
 * visitor said close, a body was refused, the request was an upgrade. The
 * edge ends its side with FIN when the visitor's connection is over, and
 * when it has no more requests for this agent on it.
 *
 * kind "tcp", one visitor connection: no head; bytes both ways.
 *
 * A private http tunnel's connection (`burrow connect`): kind "h1" with
 * `keep` and `user`, and no head. The connector's requests come one after
 * another in DATA from the first byte, as on a kept stream after its first
 * request, unread by the edge: the agent reads each head itself and gives
 * it `X-Burrow-User: <user>` (the connector's username, which only the
 * edge can vouch for), dropping any X-Burrow-User the connector sent.
 *
 * kind "udp", one flow: the datagrams of one visitor address and port
 * (`remote`), each a DATAGRAM frame whole, both ways; never DATA, no
 * REPLY. The agent sends each of the service's replies back on the flow it
 * came for. The edge ends the flow (FIN) when it has been idle long enough
 * or it makes room for a newer one; the agent resets it when it cannot
 * reach the service.
 */
export const OpenMeta = v.object({
  tunnel: v.string(),
  /** "tls": a visitor's TLS connection, passed through undecrypted: its bytes, the ClientHello first. */
  kind: v.picklist(STREAM_KINDS),
  /** The visitor's address, "ip:port". */
  remote: v.string(),
  /** tcp and tls: the address the visitor reached, "ip:port" (the server's side of its connection), for a PROXY protocol header. */
  local: v.optional(v.pipe(v.string(), v.maxLength(64))),
  head: v.optional(v.pipe(v.string(), v.maxLength(MAX_PAYLOAD))),
  /** h1 only: the stream carries the visitor connection's requests in order (above). */
  keep: v.optional(v.boolean()),
  /** h1 on a private tunnel: the connector's username, for X-Burrow-User (above); no head then. */
  user: v.optional(v.pipe(v.string(), v.maxLength(64))),
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
  /**
   * A connector's connection to a private tunnel (`tunnel` its cluster row,
   * "private:<owner id>/<name>"): who connects, as the connector's node
   * admitted them, and with which token (`token`, its id: absent from
   * nodes of the version before); the agent's node asks the rules again,
   * for each stream.
   */
  connector?: { id: number; username: string; token?: number };
};

// -- per-request fast paths ---------------------------------------------------------------------
// OPEN and REPLY metadata arrive once per visitor request: checked by hand, as the schemas
// above describe, because a generic schema walk costs more than the rest of the request.

const OPEN_KINDS: ReadonlySet<string> = new Set(STREAM_KINDS);

/** OpenMeta, or undefined when `raw` does not fit it. */
export function readOpenMeta(raw: unknown): OpenMeta | undefined {
  if (typeof raw !== "object" || raw === null) return undefined;
  const m = raw as Record<string, unknown>;
  if (typeof m.tunnel !== "string" || typeof m.remote !== "string" || !OPEN_KINDS.has(m.kind as string)) return undefined;
  if (m.head !== undefined && (typeof m.head !== "string" || m.head.length > MAX_PAYLOAD)) return undefined;
  if (m.user !== undefined && (typeof m.user !== "string" || m.user.length === 0 || m.user.length > 64)) return undefined;
  // an h1 stream has its first head in OPEN, unless it is a private tunnel's connection (`user`)
  if (m.kind === "h1" && m.head === undefined && m.user === undefined) return undefined;
  if (m.keep !== undefined && typeof m.keep !== "boolean") return undefined;
  if (m.local !== undefined && (typeof m.local !== "string" || m.local.length > 64)) return undefined;
  return m as OpenMeta;
}

