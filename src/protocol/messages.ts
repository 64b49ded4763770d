/**
 * The JSON carried by control frames and by OPEN/REPLY, with their schemas.
 * Both ends validate what they receive: a message that does not fit is a
 * protocol error, never a crash.
 */
import * as v from "valibot";
import { KIND_NAMES, PRIVATE_KINDS, STREAM_KINDS, TUNNEL_REQUESTS, type TunnelKind } from "./kinds.ts";
import { MAX_PAYLOAD, MAX_SESSION_TUNNELS } from "./wire.ts";

/** Header fields in order, names as sent. */
export type HeaderList = [string, string][];

export { HttpAccess, PrivateRequest, TcpAccess, TUNNEL_POLICY_MAX_CHARS, UPGRADE_TOKEN } from "./kinds/request-parts.ts";

/**
 * One tunnel a HELLO asks for: one variant per kind, each its unit's
 * (kinds/<kind>.ts), told apart by `protocol`, in the kind table's order.
 */
export const TunnelRequest = v.variant("protocol", TUNNEL_REQUESTS);
export type TunnelRequest = v.InferOutput<typeof TunnelRequest>;

/** agent -> edge, first frame. */
export const Hello = v.pipe(
  v.object({
    version: v.number(),
    token: v.pipe(v.string(), v.maxLength(512)),
    /** At least one, unless the HELLO is a connector's (`connect`), which opens none. */
    tunnels: v.pipe(v.array(TunnelRequest), v.maxLength(MAX_SESSION_TUNNELS)),
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
    /** The agent wants POLICY notes (wire.ts): its tunnels' requests the traffic policies answered at the edge, for its inspector. */
    policy_notes: v.optional(v.boolean(), false),
    /** The agent wants POLICY_PASSED notes (wire.ts): what the traffic policies did with its tunnels' requests they let through, for its inspector. */
    policy_passed: v.optional(v.boolean(), false),
    /**
     * The agent makes a POLICY_PASSED note itself for a tunnel whose READY
     * (or ADDED) entry has `notes`: from the request's X-Burrow-Policy-Rules
     * field and the rules listed there. Without it every note is sent.
     */
    derived_notes: v.optional(v.boolean(), false),
    /** The agent reads a POLICY or POLICY_PASSED note's log fields as numbers and bools where the policy wrote them so (NoteLogs); without it they are sent as text. */
    typed_logs: v.optional(v.boolean(), false),
    /** The agent reads a note's log field that is null, a list or a map as that JSON value (NoteLogs); without it such a field is sent as JSON text. */
    json_logs: v.optional(v.boolean(), false),
    /**
     * The agent adds and removes tunnels on the live session (ADD, REMOVE)
     * once READY says `live`, and understands their answers (ADDED, REMOVED).
     */
    live: v.optional(v.boolean(), false),
    /**
     * The agent runs the device's tunnels kept on the server for its token
     * (`burrow start --remote`): it is sent CONFIG after READY and at each
     * change (with `live`). Its HELLO may ask for no tunnel.
     */
    remote: v.optional(v.boolean(), false),
    /** What the agent runs on, for the server's list of agents: `os` and `arch` as Node names them, `started` when its process started (ISO 8601). */
    system: v.optional(v.object({ os: v.pipe(v.string(), v.maxLength(32)), arch: v.pipe(v.string(), v.maxLength(32)), started: v.pipe(v.string(), v.maxLength(40)) })),
    /** Which of the server's asks (ASK) the agent takes: its own flags say; an agent that does not say takes none. */
    manage: v.optional(v.object({ restart: v.boolean(), update: v.boolean() })),
  }),
  v.check((h) => h.connect !== undefined || h.remote || h.tunnels.length >= 1, "tunnels: at least one, unless connect or remote"),
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
  /** The edge runs the tunnel's own traffic policy (sent only when it sent one). */
  policy?: boolean;
  /** The edge sends no POLICY_PASSED note the agent can make itself (DerivedNotes); sent only to an agent whose HELLO said `derived_notes`. */
  notes?: DerivedNotes;
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

/** Bounds on what a POLICY note carries: it is shown, not acted on. */
const noteText = (max: number) => v.pipe(v.string(), v.maxLength(max));

/** A log field's value in a note: a JSON value, its strings, lists and maps cut to these bounds. */
export type NoteLogValue = string | number | boolean | null | readonly NoteLogValue[] | { readonly [name: string]: NoteLogValue };
/** How deeply a note's log field nests lists and maps, how many members each has, and a string's length, at most. */
export const NOTE_LOG_DEPTH = 8;
export const NOTE_LOG_MEMBERS = 64;
export const NOTE_LOG_TEXT = 256;

function noteLogValue(x: unknown, depth: number): boolean {
  if (x === null || typeof x === "boolean") return true;
  if (typeof x === "number") return Number.isFinite(x);
  if (typeof x === "string") return x.length <= NOTE_LOG_TEXT;
  if (typeof x !== "object" || depth >= NOTE_LOG_DEPTH) return false;
  if (Array.isArray(x)) return x.length <= NOTE_LOG_MEMBERS && x.every((m) => noteLogValue(m, depth + 1));
  const entries = Object.entries(x);
  return entries.length <= NOTE_LOG_MEMBERS && entries.every(([k, m]) => k.length <= 64 && noteLogValue(m, depth + 1));
}

/**
 * A log action's fields, as a note carries them: a number or a bool as
 * the policy wrote it, else text. Sent typed only to an agent whose HELLO
 * said `typed_logs` (the version before read text alone); to others, as
 * text. null, a list or a map, as they are only to an agent whose HELLO
 * said `json_logs` too; to one that said `typed_logs` alone, as JSON text.
 */
const NoteLogs = v.pipe(
  v.array(v.record(noteText(64), v.custom<NoteLogValue>((x) => noteLogValue(x, 0), "not a log field's value"))),
  v.maxLength(10),
);

/**
 * edge -> agent: a request the traffic policies answered at the edge
 * (wire.ts POLICY). `rules`: the tunnel's own rules that matched (a rule's
 * name, or `#N`), in order; `ended`: the action that answered, and whose
 * layer it was (the tunnel's own policy, or the server's operator, whose
 * rules are not named); `logs`: the tunnel's own log actions' fields.
 */
export const PolicyNote = v.object({
  tunnel: noteText(64),
  method: noteText(32),
  target: noteText(2048),
  status: v.pipe(v.number(), v.integer(), v.minValue(100), v.maxValue(999)),
  remote: v.optional(noteText(100)),
  rules: v.pipe(v.array(noteText(100)), v.maxLength(20)),
  ended: v.object({ by: v.picklist(["tunnel", "server"]), action: noteText(64), rule: v.optional(noteText(100)) }),
  logs: v.optional(NoteLogs),
  /** Notes left out (past the rate they are sent at) since the one before. */
  skipped: v.optional(v.pipe(v.number(), v.integer(), v.minValue(0))),
});
export type PolicyNote = v.InferOutput<typeof PolicyNote>;


/**
 * One phase of a request the policies let through (PolicyPassed): the
 * tunnel's own rules that matched, each with its actions' types in order;
 * `ended`: the action that answered in place of the service (a response
 * rule's custom-response or deny) and whose layer it was (the operator's
 * rules are not named); `logs`: the tunnel's own log actions' fields.
 */
export const NoteRule = v.object({ rule: noteText(100), actions: v.pipe(v.array(noteText(64)), v.maxLength(20)) });
export const PhaseNote = v.object({
  rules: v.pipe(v.array(NoteRule), v.maxLength(20)),
  ended: v.optional(v.object({ by: v.picklist(["tunnel", "server"]), action: noteText(64), rule: v.optional(noteText(100)) })),
  logs: v.optional(NoteLogs),
});
export type PhaseNote = v.InferOutput<typeof PhaseNote>;

/**
 * edge -> agent: a request the traffic policies let through to the agent,
 * on the session's stream `stream` (wire.ts POLICY_PASSED): its request
 * phase, its response phase and its event stream phase (on_event_stream_
 * message, judged on the response's head) as the tunnel's own rules saw
 * them (a phase with nothing to tell is left out), and the status the
 * visitor got when a response rule answered in the service's place.
 */
export const PolicyPassed = v.object({
  tunnel: noteText(64),
  stream: v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(0xffff_ffff)),
  request: v.optional(PhaseNote),
  response: v.optional(PhaseNote),
  events: v.optional(PhaseNote),
  status: v.optional(v.pipe(v.number(), v.integer(), v.minValue(100), v.maxValue(999))),
});
export type PolicyPassed = v.InferOutput<typeof PolicyPassed>;

/**
 * A tunnel's own rules as its POLICY_PASSED notes name them, in READY's
 * (or ADDED's) entry for it when the edge sends no note the agent can
 * make itself: one whose request phase is the rules named, in order, in
 * the request's X-Burrow-Policy-Rules field, each with its actions from
 * `request`, whose response phase is `response`'s rules and whose event
 * stream phase is `events`'s, all of them (absent: none), with no log
 * fields and nothing answered in the service's place. Any other request's note is sent whole, and replaces
 * the one made.
 */
export const DerivedNotes = v.object({
  request: v.pipe(v.array(NoteRule), v.maxLength(20)),
  response: v.optional(v.pipe(v.array(NoteRule), v.maxLength(20))),
  events: v.optional(v.pipe(v.array(NoteRule), v.maxLength(20))),
});
export type DerivedNotes = v.InferOutput<typeof DerivedNotes>;

/** The edge's answer to a GET of CONNECT_PATH (wire.ts): where its direct port is, if it has one. */
export const DirectPortAnswer = v.object({
  direct_port: v.nullable(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
});
export type DirectPortAnswer = v.InferOutput<typeof DirectPortAnswer>;

/** A tunnel granted, as READY lists it (and ADDED names one). */
export const GrantedTunnelJson = v.object({
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
  /** The edge took the tunnel's own traffic policy; an agent that sent one serves no tunnel without it. */
  policy: v.optional(v.boolean()),
  /** The edge sends no note of the tunnel's the agent can make itself (DerivedNotes). */
  notes: v.optional(DerivedNotes),
  /** A pool member: the agent may take it out of rotation and back (ROTATION). */
  pool: v.optional(v.boolean()),
  /** A private tunnel: reached as `target` (owner/name) by its owner and these users. */
  private: v.optional(v.object({ target: v.string(), shares: v.array(v.string()) })),
});

/** edge -> agent, the handshake's success. */
export const Ready = v.object({
  session: v.string(),
  username: v.string(),
  tunnels: v.array(GrantedTunnelJson),
  /** The edge takes ADD and REMOVE on this session (sent only to an agent whose HELLO said `live`). */
  live: v.optional(v.boolean()),
  /** A connector's HELLO: what it reaches, and the owner's service port to offer locally. */
  connect: v.optional(v.object({ target: v.string(), protocol: v.picklist(PRIVATE_KINDS), localPort: v.optional(v.number()) })),
  /** Tunnels of a partial HELLO that were not granted, each with why. */
  refused: v.optional(
    v.array(v.object({ index: v.pipe(v.number(), v.integer(), v.minValue(0)), code: v.string(), message: v.string() })),
  ),
});
export type Ready = v.InferOutput<typeof Ready>;

/** An agent's number for one of its ADD or REMOVE frames, which the answer repeats. */
const Ref = v.pipe(v.number(), v.integer(), v.minValue(0), v.maxValue(0xffff_ffff));
/** The agent's name for a tunnel (a burrow.yml key): what it and the agents list call it. */
export const TunnelName = v.pipe(v.string(), v.minLength(1), v.maxLength(64));

/** agent -> edge (wire.ts ADD): one more tunnel on the live session, judged alone. */
export const AddTunnel = v.object({ ref: Ref, name: TunnelName, tunnel: TunnelRequest });
export type AddTunnel = v.InferOutput<typeof AddTunnel>;

/** edge -> agent (wire.ts ADDED): ADD's answer, the tunnel granted or why not. */
export const TunnelAdded = v.object({
  ref: Ref,
  tunnel: v.optional(GrantedTunnelJson),
  refused: v.optional(v.object({ code: v.pipe(v.string(), v.maxLength(100)), message: v.pipe(v.string(), v.maxLength(1000)) })),
});
export type TunnelAdded = v.InferOutput<typeof TunnelAdded>;

/** agent -> edge (wire.ts REMOVE), and edge -> agent (REMOVED, its answer): one tunnel of the session, by its id. */
export const RemoveTunnel = v.object({ ref: Ref, tunnel: v.pipe(v.string(), v.maxLength(64)) });
export type RemoveTunnel = v.InferOutput<typeof RemoveTunnel>;

/** edge -> agent (wire.ts CONFIG): the device's tunnels kept on the server, burrow.yml's `tunnels:` map, and which change of them this is. */
export const Config = v.object({
  version: v.pipe(v.number(), v.integer(), v.minValue(0)),
  tunnels: v.record(v.string(), v.unknown()),
});
export type Config = v.InferOutput<typeof Config>;

/** One tunnel of an agent's STATUS: its own name, and the edge's id once granted. */
const StatusTunnel = v.object({
  name: TunnelName,
  id: v.optional(v.pipe(v.string(), v.maxLength(64))),
  /** Where it comes from: the server's remote config, the agent's command line or file, its agent API (agent/tunnel-set.ts). */
  source: v.optional(v.picklist(["remote", "local", "api"])),
});

/** agent -> edge (wire.ts STATUS): what the agent runs now, for the server's list of agents. */
export const Status = v.object({
  tunnels: v.pipe(v.array(StatusTunnel), v.maxLength(64)),
  /** The remote config it runs: the version it took, or why it could not (the tunnels running stay). */
  config: v.optional(v.object({ version: v.pipe(v.number(), v.integer(), v.minValue(0)), error: v.optional(v.pipe(v.string(), v.maxLength(1000))) })),
  /** The last thing that went wrong (a tunnel refused, a config that did not read), with when; none when all is well since it connected. */
  error: v.optional(v.object({ message: v.pipe(v.string(), v.maxLength(1000)), at: v.pipe(v.string(), v.maxLength(40)) })),
});
export type Status = v.InferOutput<typeof Status>;

/** What the server may ask an agent (wire.ts ASK): to connect again, or to run `burrow update`. */
export const ASK_ACTIONS = ["restart", "update"] as const;
export type AskAction = (typeof ASK_ACTIONS)[number];

/** edge -> agent (wire.ts ASK). */
export const Ask = v.object({ ref: Ref, action: v.picklist(ASK_ACTIONS) });
export type Ask = v.InferOutput<typeof Ask>;

/** agent -> edge (wire.ts ANSWER): whether it does what ASK asked, and why not. */
export const Answer = v.object({ ref: Ref, accepted: v.boolean(), message: v.pipe(v.string(), v.maxLength(1000)) });
export type Answer = v.InferOutput<typeof Answer>;

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
  /**
   * A tls connection: the name its ClientHello asked for, which the
   * visitor's node routed it by; the agent's node gives it to the tunnel's
   * on_tcp_connect as `conn.tls.sni`, as it would for a visitor of its own.
   * Absent from nodes of the version before.
   */
  sni?: string;
  /** A tls connection: the JA4 fingerprint of its ClientHello (`conn.tls.ja4_fingerprint`), made on the visitor's node, the one that read it. Absent likewise. */
  ja4?: string;
  /** The visitor's node's region (--region: `conn.server_region`), when it has one. Absent likewise. */
  region?: string;
  /** A request: the bytes its visitor's connection had read and written when it was relayed (`conn.bytes_in`, `conn.bytes_out`), as the visitor's node counts them. Absent likewise (0). */
  bytesIn?: number;
  bytesOut?: number;
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

