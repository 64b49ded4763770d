/**
 * Every fact of burrow's wire protocol, in one place.
 *
 * An agent holds one connection to the edge: a WebSocket (binary messages,
 * no compression), or a direct TCP/TLS socket on the edge's agent port,
 * which carries the same frames back to back with no messages around them.
 * Each WebSocket message carries one or more whole frames, back to back:
 *
 *   type u8 | stream u32 (big-endian) | length u32 (big-endian) | payload
 *
 * Frames that a side produces in the same turn of its event loop travel in
 * one message (up to BATCH_BYTES), so a small request and its response cost
 * one WebSocket message each way rather than one per frame.
 *
 * The type byte's high bit (FLAG_FIN) on OPEN, REPLY or DATA means "and no
 * more from me on this stream": a bodyless request is one OPEN, a small
 * response one REPLY and one DATA, with no separate FIN frames.
 * Stream 0 is the control stream: HELLO, READY, ERROR, PING, PONG, GOAWAY,
 * MOVE and the others below (DRAIN, ROTATION, REVOKE, ADD, REMOVE...).
 * Other streams are opened by the edge (even ids) for each visitor
 * connection or request, and carry OPEN, REPLY, DATA, WINDOW, FIN, RST and
 * DATAGRAM.
 * A sender has at most the credit the receiver granted in flight per stream;
 * overrunning it is a protocol error that ends the whole connection.
 *
 * Version rules. PROTOCOL_VERSION changes only when a change breaks what a
 * peer of the version before understands; everything else is added so that
 * an agent and a server of the version before keep working as they did:
 *
 * - JSON messages gain optional keys only. Both sides read messages with
 *   schemas that drop keys they do not know, so a key a peer does not know
 *   is never an error, and a key a peer does not send means the old way.
 * - A frame type is new to a peer of the version before, which takes it for
 *   a protocol error. So a side sends a new frame only to a peer that said
 *   it understands it: the agent says so in HELLO (`drain`, `revoke`,
 *   `policy_notes`, `policy_passed`, `derived_notes`, `live`, `remote`), the edge in READY (`live`; a tunnel's `notes`). A side
 *   that did not hear it does what the version before did.
 * - A new ability is used only when both said it: an agent whose READY does
 *   not say `live` changes its tunnels by connecting again, as before; an
 *   edge never sends a `live` frame (ADDED, REMOVED, CONFIG, ASK) to an
 *   agent whose HELLO did not say it, nor POLICY to one that did not say
 *   `policy_notes`, nor POLICY_PASSED to one that did not say `policy_passed`; a value
 *   of a new type in a known key (a log field's number: `typed_logs`; its map or list: `json_logs`) likewise. The abilities are independent: an agent may say any of
 *   them, and each is judged alone.
 * - A frame type's number is never reused or changed once given: each new
 *   frame takes a number no other frame has had (a test holds the table to
 *   one name per number).
 */

/**
 * Bumped when frames change incompatibly; sent in HELLO, checked by the edge.
 * 2: an HTTP request is one "h1" stream carrying the request and response
 * as their bytes (messages.ts OpenMeta), where 1 had JSON heads and
 * WebSocket records.
 */
export const PROTOCOL_VERSION = 2;

export const FrameType = {
  /** agent -> edge, stream 0: JSON Hello (version, token, tunnels wanted). */
  HELLO: 0x01,
  /** edge -> agent, stream 0: JSON Ready (session id, tunnels granted). */
  READY: 0x02,
  /** either way, stream 0: JSON Refusal {code, message, retry_after?}; the sender closes next. */
  ERROR: 0x03,
  /** either way, stream 0: PING_BYTES (4) opaque bytes, answered by PONG with the same bytes; any other size is a PROTOCOL_ERROR. */
  PING: 0x04,
  PONG: 0x05,
  /** agent -> edge, stream 0: the agent is leaving on purpose; release its tunnels now, no grace. */
  GOAWAY: 0x06,
  /**
   * edge -> agent, stream 0, instead of READY: JSON {port}. The edge takes
   * agents directly (frames over TCP, or TLS when it has a certificate) on
   * that port: the agent closes this connection and says HELLO there. Sent
   * only to an agent whose HELLO asked (\`direct\`), over a WebSocket.
   */
  MOVE: 0x07,
  /**
   * edge -> agent, stream 0: JSON {}. This server is going away (a restart):
   * the agent connects again at once, as on a lost connection but without
   * waiting, and keeps this connection for the streams still in flight; the
   * edge closes it when they are done (at most its drain timeout). Sent only
   * to an agent whose HELLO said it understands (\`drain\`).
   */
  DRAIN: 0x08,
  /**
   * agent -> edge, stream 0: JSON {tunnel, in} (messages.ts Rotation). A
   * pool member's tunnel leaves the pool's rotation (its health check
   * failed, or its agent is stopping and finishes what is in flight) or
   * comes back. Sent only for tunnels READY said are pool members.
   */
  ROTATION: 0x09,
  /**
   * edge -> agent, stream 0: JSON {tunnel, code, message} (messages.ts
   * Revoke). One tunnel of the session (READY's id) is closed alone: an
   * admin's change no longer allows it, `code` the refusal its handshake
   * would get now. The edge ends its streams; the session and its other
   * tunnels go on, and the agent does not ask for it again. Sent only to an
   * agent whose HELLO said it understands (\`revoke\`); another is sent
   * ERROR with the code, which ends its whole session.
   */
  REVOKE: 0x0a,
  /**
   * edge -> agent, stream 0: JSON (messages.ts PolicyNote). A visitor's
   * request to one of the session's tunnels was answered by the edge's
   * traffic policies (a deny, a rate limit, a failed sign-in...) and never
   * reached the agent: which of the tunnel's own rules matched and which
   * action ended it, for the agent's request inspector. Sent only to an
   * agent whose HELLO asked (`policy_notes`), and at most a few a second:
   * `skipped` counts those left out since the last one.
   */
  POLICY: 0x0b,
  /**
   * agent -> edge, stream 0: JSON {ref, name, tunnel} (messages.ts
   * AddTunnel). One more tunnel on the live session, judged alone by the
   * handshake's rules as a tunnel of a partial HELLO is (admission, limits,
   * names, access rules, policies; the token, user and connection as they
   * are now). Answered by ADDED with the same `ref`. The edge takes ADD and
   * REMOVE one at a time, in the order sent. Sent only when READY said
   * `live`; the edge takes it only from an agent whose HELLO said `live`.
   */
  ADD: 0x0c,
  /**
   * edge -> agent, stream 0: JSON {ref, tunnel} or {ref, refused: {code,
   * message}} (messages.ts TunnelAdded): ADD's answer. `tunnel` is as
   * READY lists one (its id is what OPEN names from now on); `refused` is
   * the code the tunnel would get in a HELLO now. The session and its other
   * tunnels go on either way.
   */
  ADDED: 0x0d,
  /**
   * agent -> edge, stream 0: JSON {ref, tunnel} (messages.ts RemoveTunnel):
   * the agent gives up one tunnel of its session (READY's or ADDED's id).
   * It goes at once, with no grace, as a GOAWAY frees a whole session's: its
   * streams are reset and its visitors meet what a tunnel gone meets; the
   * other tunnels' streams go on untouched. Answered by REMOVED. `live` only,
   * as ADD.
   */
  REMOVE: 0x0e,
  /** edge -> agent, stream 0: JSON {ref, tunnel}: REMOVE's answer, sent once the tunnel's name or port is free. */
  REMOVED: 0x0f,
  /** opener -> acceptor: a new stream; JSON metadata (tunnel, kind, request head: messages.ts OpenMeta). */
  OPEN: 0x10,
  /** acceptor -> opener: the stream is accepted, its answer begins; JSON metadata (`{}` for h1 and tcp). */
  REPLY: 0x11,
  /** either way: bytes; at most the credit granted. */
  DATA: 0x12,
  /** either way: u32 credit increment for the stream's other direction. */
  WINDOW: 0x13,
  /** either way: the sender will send no more DATA (half close). */
  FIN: 0x14,
  /** either way: abort the stream; payload is a UTF-8 reset code. */
  RST: 0x15,
  /**
   * either way: one datagram, whole (at most MAX_DATAGRAM bytes), outside
   * the stream's bytes and credit. A sender never splits or merges them and
   * never queues one: when its connection is congested it drops it, as the
   * network would, so that no stream's bytes wait behind datagrams. A
   * receiver with no taker for it drops it too. For traffic that may lose
   * (UDP), never for what must not.
   */
  DATAGRAM: 0x16,
  /**
   * edge -> agent, stream 0: JSON {version, tunnels} (messages.ts Config):
   * the device's tunnels kept on the server for its token (burrow.yml's
   * `tunnels:` map), sent after READY and again at each change. The agent
   * runs them with ADD and REMOVE, and says what it made of them in
   * STATUS. Sent only to an agent whose HELLO said `live` and `remote`.
   */
  CONFIG: 0x17,
  /**
   * agent -> edge, stream 0: JSON (messages.ts Status): what the agent runs
   * now, for the server's list of agents: its tunnels by its own names, the
   * remote config's version it runs (or why it could not), its last error.
   * Sent after READY and when it changes, at most a few times a second.
   * Only when READY said `live`; the edge keeps the last one.
   */
  STATUS: 0x18,
  /**
   * edge -> agent, stream 0: JSON {ref, action} (messages.ts Ask): the
   * server's admin asks the agent to connect again ("restart") or to run
   * `burrow update` ("update"). The agent decides by its own flags, and
   * answers ANSWER either way. Sent only to an agent whose HELLO said `live`.
   */
  ASK: 0x19,
  /** agent -> edge, stream 0: JSON {ref, accepted, message}: ASK's answer, sent before the agent acts on it. */
  ANSWER: 0x1a,
  /**
   * edge -> agent, stream 0: JSON (messages.ts PolicyPassed). A request
   * the traffic policies let through to the agent, on stream `stream`:
   * what the tunnel's own rules did with it in each phase, the event
   * stream's too (the rules that matched and their actions, the log
   * action's fields) and, when a
   * response rule replaced the service's answer, the action that did and
   * whose layer it was. Sent once the edge has the response's head (the
   * agent has the request by then: it is the latest on that stream), only
   * when something is to be told, and only to an agent whose HELLO asked
   * (`policy_passed`). Not paced as POLICY is: each goes with a request
   * the agent served. Not sent at all for a request whose note the agent
   * makes itself: one whose HELLO said `derived_notes`, for a tunnel whose
   * READY or ADDED entry has `notes` (messages.ts DerivedNotes), when the
   * note would say only what those and the request's
   * X-Burrow-Policy-Rules field say; an agent that did not say it is sent
   * every note, as before.
   */
  POLICY_PASSED: 0x1b,
} as const;

export type FrameTypeName = keyof typeof FrameType;
export type FrameTypeValue = (typeof FrameType)[FrameTypeName];

export const FRAME_NAMES: Record<number, FrameTypeName> = Object.fromEntries(
  Object.entries(FrameType).map(([name, value]) => [value, name as FrameTypeName]),
);

/** Frames that belong to stream 0. */
export const CONTROL_FRAMES: ReadonlySet<number> = new Set([
  FrameType.HELLO,
  FrameType.READY,
  FrameType.ERROR,
  FrameType.PING,
  FrameType.PONG,
  FrameType.GOAWAY,
  FrameType.MOVE,
  FrameType.DRAIN,
  FrameType.ROTATION,
  FrameType.REVOKE,
  FrameType.POLICY,
  FrameType.ADD,
  FrameType.ADDED,
  FrameType.REMOVE,
  FrameType.REMOVED,
  FrameType.CONFIG,
  FrameType.STATUS,
  FrameType.ASK,
  FrameType.ANSWER,
  FrameType.POLICY_PASSED,
]);

/** Set in the type byte of OPEN, REPLY or DATA: the sender half-closes with this frame. */
export const FLAG_FIN = 0x80;
/** Frames that may carry FLAG_FIN. */
export const FIN_CARRIERS: ReadonlySet<number> = new Set([FrameType.OPEN, FrameType.REPLY, FrameType.DATA]);

export const HEADER_LENGTH = 9;
/** A message is sent as soon as the frames waiting for it reach this size. */
export const BATCH_BYTES = 64 * 1024;
/** Largest DATA payload a sender makes over a WebSocket; bigger writes are split. */
export const MAX_DATA_PAYLOAD = 64 * 1024;
/** Largest payload of any frame (OPEN/REPLY metadata included); more is a protocol error. */
export const MAX_PAYLOAD = 256 * 1024;
/**
 * Largest DATA payload a sender makes over a direct link, where frames are
 * bytes in a stream, with no message for a proxy to limit. Every decoder
 * takes up to MAX_PAYLOAD, so an older peer reads these too. A quarter of
 * the frames of 64 KiB ones, and of the writes that carry them (to the link
 * on one side, to the local socket on the other): about a tenth less CPU
 * per GiB through a tcp tunnel, server and agent together.
 */
export const DIRECT_DATA_PAYLOAD = MAX_PAYLOAD;
/** Largest DATAGRAM payload: the most a UDP datagram over IPv4 carries (65,535 less the IP and UDP headers). */
export const MAX_DATAGRAM = 65_507;
/** Largest message a peer may send: a batch just under BATCH_BYTES plus one largest frame. */
export const MAX_MESSAGE = BATCH_BYTES + HEADER_LENGTH + MAX_PAYLOAD;
/** Credit each side grants a new stream before any WINDOW. */
export const INITIAL_WINDOW = 512 * 1024;
/** Credit is returned in batches of at least this much (yamux's half window); a mux built with another window uses half of that. */
export const WINDOW_UPDATE_THRESHOLD = INITIAL_WINDOW / 2;
export const MAX_STREAM_ID = 0xffff_ffff;

/**
 * A PING's payload, and so its PONG's: exactly this many bytes (the
 * sender's clock, for the round trip). Any other size is a PROTOCOL_ERROR,
 * before a HELLO as after: a peer is never made to echo more than it takes
 * to say.
 */
export const PING_BYTES = 4;
/** The agent must send HELLO within this time of connecting. */
export const HANDSHAKE_TIMEOUT_MS = 10_000;
/**
 * Bytes of frames an edge keeps, unhandled, while it checks a HELLO (the
 * rules may take a database query): what the agent sent after its HELLO is
 * handled after READY, in order. An agent waits for READY before it sends
 * anything but PINGs, so past this it is a hostile peer (PROTOCOL_ERROR).
 */
export const MAX_HELD_BYTES = 64 * 1024;
/**
 * Each side of every connection (agent and edge, and the links between
 * nodes) pings this often (Mux.keepAlive()); any frame counts as a sign of life.
 */
export const KEEPALIVE_INTERVAL_MS = 10_000;
/**
 * A peer silent this long is dead: the side that finds it says ERROR
 * KEEPALIVE_TIMEOUT and drops the connection. Two missed PINGs and then
 * some: one lost to a slow moment is not a death.
 */
export const DEAD_AFTER_MS = 25_000;
/** Most tunnels one session holds: a HELLO asks for at most this many, and ADD adds none past it. */
export const MAX_SESSION_TUNNELS = 16;
/**
 * ADD and REMOVE frames an edge keeps waiting per session while it judges
 * the one before (each may take database queries): an agent waits for the
 * answers of what it sent, so past this it is a hostile peer (PROTOCOL_ERROR).
 */
export const MAX_PENDING_CHANGES = 32;
/** A dropped agent's names and ports stay held for its token this long. */
export const RECLAIM_GRACE_MS = 60_000;
/** After DRAIN the agent tries this often (with up to as much again of jitter) until a server answers... */
export const RESTART_RETRY_MS = 100;
/** ...for this long; then the usual backoff. Covers a restart's gap with room to spare. */
export const RESTART_RETRY_FOR_MS = 30_000;
/** A connection the edge said DRAIN on is closed by the agent after this, if the edge has not. */
export const DRAIN_MAX_MS = 120_000;
/** The agent's reconnect backoff: 0.5 s doubling to 30 s, with jitter. */
export const RECONNECT_BASE_MS = 500;
export const RECONNECT_MAX_MS = 30_000;

/**
 * The path of the agents' WebSocket on the edge's bare domain. A GET of it
 * without an upgrade asks where the edge's direct port is: 200 with JSON
 * DirectPortAnswer (messages.ts), `direct_port` null when it has none. An
 * agent that may go direct asks once before its first WebSocket, and with a
 * port goes straight there: one small request instead of a WebSocket, a
 * HELLO and a MOVE. Any other answer (an older edge's 426) and the agent
 * opens the WebSocket as before.
 */
export const CONNECT_PATH = "/_burrow/connect";
/**
 * Logging a device in through the browser (RFC 8628), on the bare domain
 * with the portal on: `burrow login` POSTs {device_name} to the first and
 * gets {device_code, user_code, verification_uri, verification_uri_complete,
 * expires_in, interval}; it then POSTs {device_code} to the second every
 * `interval` seconds until 200 {token, token_id, username}, or a 400 whose
 * `error` is not authorization_pending or slow_down (which adds 5 s). A 404
 * on the first: the server has no portal (off, or older).
 */
export const DEVICE_CODE_PATH = "/_burrow/device/code";
export const DEVICE_TOKEN_PATH = "/_burrow/device/token";
/** The path of another node's relay link (the same frames, turned around), authenticated by an HMAC of the cluster secret. */
export const NODE_PATH = "/_burrow/node";
/**
 * An agent's check, on the bare domain (`burrow diagnose`): a POST of JSON
 * AgentCheck (agent-check.ts: its version, token and tunnels) answered with
 * what a HELLO would get now, nothing opened or claimed. Answered by an
 * edge that has it; an older edge's answer is no JSON AgentCheckAnswer.
 */
export const CHECK_PATH = "/_burrow/check";

/**
 * Codes carried by ERROR (whole connection) and RST (one stream; those
 * marked `stream` only there), with what each means to the side that gets it
 * and what to do about it (docs/reference/codes.md is made from this
 * table). A handshake refusal may also carry a code of core/errors.ts.
 */
export const WIRE_ERRORS = {
  PROTOCOL_ERROR: {
    meaning: "The peer broke the protocol: a malformed frame, HELLO or message, a frame over `MAX_PAYLOAD`, a window overrun, or too much sent before READY. The whole connection ends; at the handshake it counts as a failed one.",
    advice: "Run the same burrow version on both ends; otherwise report it (the message names the fault).",
  },
  VERSION_MISMATCH: {
    meaning: "The agent's HELLO carries another protocol version than the server's.",
    advice: "Update the agent or the server so that both speak the same version.",
  },
  HANDSHAKE_TIMEOUT: {
    meaning: "No HELLO within 10 s of connecting (`HANDSHAKE_TIMEOUT_MS`).",
    advice: "Look at what is between the agent and the server (a proxy holding the connection); the agent tries again.",
  },
  /** The local service refused or failed the stream. */
  UPSTREAM_FAILED: {
    stream: true,
    meaning: "A stream's reset: the local service refused or failed it. The visitor gets the 502 page, with the reason.",
    advice: "Check that the local service runs at the address the agent was given.",
  },
  /** A traffic policy closed the visitor's connection (close-connection) on the node where the tunnel's rules live. */
  POLICY_CLOSED: {
    stream: true,
    meaning: "A stream's reset between nodes: the tunnel's traffic policy closed the visitor's connection (close-connection, or a closing on_tcp_connect rule) on the node that has the tunnel. The node that holds the visitor closes it without an answer.",
    advice: "Nothing to do: the policy said so.",
  },
  /** The visitor went away. */
  CANCELLED: { stream: true, meaning: "A stream's reset: the visitor went away.", advice: "Nothing to do." },
  /** A udp tunnel's flow is over. */
  FLOW_ENDED: {
    stream: true,
    meaning: "A stream's reset: the edge ended a udp tunnel's flow, idle for `--udp-idle` seconds, or the oldest idle one making room for a new one past `--udp-flows`.",
    advice: "Nothing to do: the visitor's next datagram starts a new flow.",
  },
  /** The session is closing. */
  GOING_AWAY: {
    meaning: "The session is closing: the agent leaves, or moved to the direct port.",
    advice: "Nothing to do.",
  },
  /** Nothing came from the peer for DEAD_AFTER_MS: the connection is taken for dead. */
  KEEPALIVE_TIMEOUT: {
    meaning: "Nothing came from the peer for 25 s (`DEAD_AFTER_MS`; each side pings every 10 s): the connection is taken for dead, and an agent's names are held 60 s for its token.",
    advice: "Nothing, usually: the agent connects again. If it keeps happening, look at the network between them.",
  },
  /** The edge is stopping: after the drain, its agents are told so. */
  SERVER_SHUTDOWN: {
    meaning: "The server is shutting down; agents that understood DRAIN have moved to its successor already.",
    advice: "Nothing: the agent connects again, and a server restarted on the same data dir holds its names.",
  },
  /** A newer connection of the same agent took its session over, on this node or another. */
  SESSION_REPLACED: {
    meaning: "A newer connection of the same agent took its session over, on this node or another; the old connection is closed with it.",
    advice: "Nothing: the newer connection carries on.",
  },
} as const;

export type WireErrorCode = keyof typeof WIRE_ERRORS;

/** The codes as values: WireError.PROTOCOL_ERROR === "PROTOCOL_ERROR". */
export const WireError = Object.fromEntries(Object.keys(WIRE_ERRORS).map((code) => [code, code])) as { readonly [K in WireErrorCode]: K };
