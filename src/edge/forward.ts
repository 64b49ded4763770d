/**
 * One visitor request carried to a tunnel's agent as an "h1" stream
 * (protocol/messages.ts OpenMeta) and its response back, as bytes both
 * ways: the request's body goes on with the framing the visitor gave it,
 * and the response reaches the visitor exactly as the local service sent
 * it (status line, header case and order, Content-Length or chunks, interim
 * 100 Continue answers), read here only to know where it ends, so that
 * nothing past its end reaches the visitor and the connection can carry the
 * next request. After a 101 the connection is a pipe both ways.
 *
 * Credit bounds memory: a request body is read from the visitor only as
 * the stream takes it, and response bytes are acknowledged to the agent
 * only once the visitor's socket took them.
 */
import type { TrustedProxies } from "../http/addresses.ts";
import { isBurrowField } from "../http/burrow-fields.ts";
import { ChunkedDecoder } from "../http/chunked.ts";
import { everyField, type RequestHead } from "../http/request-head.ts";
import { ResponseParser, type ResponseSink } from "../http/response-reader.ts";
import { responseHeadBytes, type ParsedHead } from "../http/response-head.ts";
import { connectionWithoutUpgrade, isUpgradeField, responseFields, switchRefusal, upgradeAllowed } from "../http/upgrade.ts";
import { log } from "../log.ts";
import { HTTP_REQUEST, WEBSOCKET_REQUEST, type EdgeCounters } from "../metrics/edge-counters.ts";
import type { OpenMeta, RelayedMeta } from "../protocol/messages.ts";
import { relayedConnection } from "./traffic-policy/node-region.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { USER_EMAIL_HEADER } from "../validate/access.ts";
import type { HttpConnection, Occupant } from "./http-connection.ts";
import { stays, type LiveVisit } from "./judgement/live-visits.ts";
import { badGatewayPage, slowServicePage } from "./pages.ts";
import { ResponseTimeout, type ResponseWait } from "./replies.ts";
import type { HeaderPairs } from "../policy/facts.ts";
import { sameFields } from "../policy/message.ts";
import type { Tunnel } from "./registry.ts";
import { RequestStream, type StreamUser } from "./request-stream.ts";
import { POLICY_RULES_FIELD, type LayeredRun } from "./traffic-policy/layered-run.ts";
import { breakersAnswered, breakersEnded } from "./traffic-policy/breaker-outcomes.ts";
import { ResponseFilter } from "./traffic-policy/response-filter.ts";
import type { Outlet } from "./traffic-policy/response-steps.ts";
import { tellPassed, toldWhenAnswered } from "./traffic-policy/passed-notes.ts";
import { judgeHeadInPlace, type HeadChange } from "./traffic-policy/response-head-rules.ts";
import { judgedSince, pipeSubject } from "./traffic-policy/live-rejudge.ts";
import { serverPortOf } from "./traffic-policy/http-request.ts";
import type { TunnelPolicy } from "./traffic-policy/tunnel-policy.ts";
import { SKIP_HEADER } from "./warning.ts";

/**
 * Request fields the edge sets itself: a visitor's own are dropped, as are
 * burrow's own in any spelling (isBurrowField: X-Burrow-User, X_Burrow_User...).
 */
const EDGE_SET = new Set(["x-forwarded-for", "x-forwarded-proto", "x-forwarded-host", "x-real-ip", "forwarded", SKIP_HEADER, USER_EMAIL_HEADER]);
const edgeSets = (lower: string): boolean => EDGE_SET.has(lower) || isBurrowField(lower);
/** EDGE_SET and what asks for a switch (upgrade.ts isUpgradeField): the fields dropped from a request whose switch was taken off, or that asked for none. */
const EDGE_SET_UNSWITCHED: ReadonlySet<string> = new Set([...EDGE_SET, "upgrade", "http2-settings"]);
/** A Connection value that names an option of a switch (upgrade.ts isUpgradeField). */
const UPGRADE_OPTION = /upgrade|http2-settings/i;

export interface ForwardContext {
  /** The visitor's socket peer, and who the visitor is (a trusted proxy's client, or the peer). */
  remoteIp: string;
  remotePort: number;
  client: string;
  secure: boolean;
  /** The Host as the visitor sent it (name and port). */
  host: string;
  /** Whose Forwarded field is kept (a trusted proxy's, as for the client's address). */
  trustedProxies: TrustedProxies;
  responseTimeoutMs: number;
  maxResponseTimeoutMs: number;
  /** The request asked for a switch the tunnel does not allow, taken off by forward(): a failure closes its connection, as a refused 101 does. */
  switchTakenOff?: boolean;
  /** Another node's tunnel: this visitor is due the browser warning, which that node shows after its access rules. */
  warn?: boolean;
  counters: EdgeCounters;
  startedAt: number;
  /** The tunnel's traffic policies' run of this request (traffic-policy/): the request as they left it goes to the agent, and the response's run follows; undefined without policies. */
  policy?: LayeredRun;
  /** A request that asks for a switch: its head's text as it came, which its pipe is judged by again when the tunnel's policies change (live-rejudge.ts), and the layers its judgement began with (the door's: http-door.ts). */
  switchText?: string;
  switchJudgedWith?: TunnelPolicy;
}

/**
 * The names of the fields the edge reads of a request head, by length (what
 * the parser keeps for it: http-connection.ts). X-Real-IP, Forwarded and
 * burrow's own it keeps whatever their length (http/burrow-fields.ts), so
 * that no common name of 9 letters (sec-ch-ua) costs every request a copy.
 */
export const EDGE_READS: ReadonlySet<number> = new Set(
  [...EDGE_SET].filter((n) => n !== "x-real-ip" && n !== "forwarded").concat("user-agent", "accept", "cookie", "sec-websocket-key", "http2-settings").map((n) => n.length),
);

/**
 * The head the local service reads: the visitor's request line and fields
 * (case, order and framing fields as sent) without those the edge sets
 * (and, for a switch the tunnel does not allow, without what asks for it:
 * forward() took `head.upgrade` off), the tunnel's header rules applied,
 * then the edge's fields (forwardedFields). The request line carries the
 * target in origin form with its path made normal (what the routes and
 * rules judged); an absolute-form target's authority is the Host. `text` is
 * the head as it came (without its blank line): when there is nothing to
 * take out or change, the edge's fields are simply added after it.
 */
export function requestHeadText(head: RequestHead, tunnel: Tunnel, ctx: ForwardContext, text: string, conn?: HttpConnection): string {
  const added = passesAsSent(head, ctx);
  if (added !== undefined) return `${text}\r\n${added}${conn ? edgeFieldsOf(conn, ctx).text : forwardedFields(undefined, undefined, ctx)}`;
  // fields to take out or rewrite: every field, as sent (read once: the access rules may have read them already)
  const full = everyField(head, text);
  // or as the tunnel's traffic policies left them (headers added and removed, the path and query rewritten)
  const changed = ctx.policy?.request;
  const fields = changed ? changed.headers : full.fields;
  const unswitched = head.upgrade === undefined;
  let forwardedFor: string | undefined;
  let forwarded: string | undefined;
  let line = `${full.method} ${changed && full.target !== "*" ? changed.target : full.target} HTTP/1.${full.minor}\r\n`;
  const kept: [string, string][] = [];
  // absolute form (RFC 9112 §3.2.2): the target's authority replaces the Host the visitor sent, in its place
  let host = full.absolute ? full.host : undefined;
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i]!;
    // what the tunnel's header flags and a sign-in set is the edge's own word (X-Burrow-User-Email), whatever its name
    if (changed?.isEdgeField(field)) {
      kept.push(field);
      continue;
    }
    const lower = changed ? field[0].toLowerCase() : full.names[i]!;
    if (lower === "x-forwarded-for") forwardedFor = forwardedFor === undefined ? field[1] : `${forwardedFor}, ${field[1]}`;
    // a proxy's Forwarded chain is kept when the server trusts that proxy (--trusted-proxies), as its X-Forwarded-For is believed
    else if (lower === "forwarded" && ctx.trustedProxies.trusts(ctx.remoteIp)) forwarded = forwarded === undefined ? field[1] : `${forwarded}, ${field[1]}`;
    if (host !== undefined && lower === "host") {
      kept.push([field[0], host]);
      host = undefined;
      continue;
    }
    if (edgeSets(lower) || (unswitched && isUpgradeField(lower))) continue;
    if (unswitched && lower === "connection" && UPGRADE_OPTION.test(field[1])) {
      const rest = connectionWithoutUpgrade(field[1]);
      if (rest !== "") kept.push([field[0], rest]);
      continue;
    }
    kept.push(field);
  }
  if (host !== undefined) kept.unshift(["Host", host]);
  // the tunnel's own rules that matched: for its service, and its inspector, which shows the request's fields
  if (ctx.policy?.ownMatched !== undefined) kept.push([POLICY_RULES_FIELD, ctx.policy.ownMatched]);
  for (const [name, value] of kept) line += `${name}: ${value}\r\n`;
  return line + forwardedFields(forwardedFor, forwarded, ctx);
}

/**
 * Nothing in the head to take out or change: it goes on as it came, the
 * edge's fields after it. Then the fields to add after it (the ones the
 * tunnel's policies added, and the rules that matched), as text ("" for
 * none); undefined: the head is written anew.
 */
function passesAsSent(head: RequestHead, ctx: ForwardContext): string | undefined {
  if (!head.targetAsSent) return undefined;
  const dropped = head.upgrade === undefined ? EDGE_SET_UNSWITCHED : EDGE_SET;
  for (const n of head.names) if (dropped.has(n) || isBurrowField(n)) return undefined;
  return ctx.policy ? policyFields(ctx.policy, dropped) : "";
}

/** What the policies' run did to the head, when it only added fields the head may take as they are: those as text, with the rules that matched. */
function policyFields(run: LayeredRun, dropped: ReadonlySet<string>): string | undefined {
  const request = run.request;
  const added = request?.appended();
  if (added === undefined) return undefined;
  // the same fields as the request before (a policy adds the same ones, most often with the same values): the same text
  if (dropped === lastFields.dropped && run.ownMatched === lastFields.matched && sameFields(added, lastFields.added) && !request!.hasEdgeFields()) return lastFields.text;
  let text = "";
  for (let i = 0; i < added.length; i++) {
    const field = added[i]!;
    const lower = field[0].toLowerCase();
    // what the edge sets or reads to frame and switch is never a policy's to add as it is (the header flags' are the edge's own)
    if (!request!.isEdgeField(field) && (dropped.has(lower) || isBurrowField(lower) || lower === "connection" || lower === "host")) return undefined;
    text += `${field[0]}: ${field[1]}\r\n`;
  }
  if (run.ownMatched !== undefined) text += `${POLICY_RULES_FIELD}: ${run.ownMatched}\r\n`;
  if (!request!.hasEdgeFields()) lastFields = { added, dropped, matched: run.ownMatched, text };
  return text;
}

/** policyFields' last answer, and what it was made of (fields with no edge's own among them); `bytes`: its text encoded, once a head asked (addedBytes). */
let lastFields: { added: HeaderPairs; dropped: ReadonlySet<string>; matched: string | undefined; text: string; bytes?: Uint8Array } = { added: [], dropped: new Set(), matched: undefined, text: "" };

/**
 * The head as bytes for a kept stream's DATA: when it passes as sent and
 * its bytes as they came are at hand (HttpConnection.headBytes), those and
 * the edge's fields (made once per connection, Host and client), without making
 * the head a string and encoding it again.
 */
function requestHeadBytes(conn: HttpConnection, head: RequestHead, tunnel: Tunnel, ctx: ForwardContext, source: HeadSource): Uint8Array {
  const raw = conn.headBytes;
  const added = raw ? passesAsSent(head, ctx) : undefined;
  if (!raw || added === undefined) return Buffer.from(requestHeadText(head, tunnel, ctx, source.text), "latin1");
  const suffix = edgeFieldsOf(conn, ctx);
  const bytes = (suffix.bytes ??= Buffer.from(suffix.text, "latin1"));
  const kept = raw.byteLength - 2; // through the last field's CRLF, without the blank line
  const out = Buffer.allocUnsafe(kept + added.length + bytes.byteLength);
  out.set(raw, 0); // its blank line too, written over by the fields after it
  if (added !== "") out.set(addedBytes(added), kept);
  out.set(bytes, kept + added.length);
  return out;
}

/** The fields a policy added, as bytes: policyFields' last text (the same request after request) encoded once, not per request. */
function addedBytes(text: string): Uint8Array {
  return text === lastFields.text ? (lastFields.bytes ??= Buffer.from(text, "latin1")) : Buffer.from(text, "latin1");
}

/**
 * The edge's fields after a head that passes as sent, made once per
 * connection and Host and client (the requests of a connection share them;
 * the peer and the scheme are the connection's).
 */
function edgeFieldsOf(conn: HttpConnection, ctx: ForwardContext): { text: string; bytes?: Uint8Array } {
  let suffix = conn.forwardedSuffix;
  if (suffix?.host !== ctx.host || suffix.client !== ctx.client) suffix = conn.forwardedSuffix = { host: ctx.host, client: ctx.client, text: forwardedFields(undefined, undefined, ctx) };
  return suffix;
}

/**
 * The edge's fields and the blank line: X-Forwarded-For (`forwardedFor`,
 * the visitor's own list, if any, with the peer's address added), -Proto
 * and -Host; X-Real-IP, the client (a trusted proxy's client, else the
 * peer: the address the caps and IP rules count); and Forwarded (RFC 7239:
 * `forwarded`, a trusted proxy's chain, if any, with this hop added).
 */
function forwardedFields(forwardedFor: string | undefined, forwarded: string | undefined, ctx: ForwardContext): string {
  const proto = ctx.secure ? "https" : "http";
  const hop = `for=${forwardedNode(ctx.remoteIp)};proto=${proto};host=${quotedString(ctx.host)}`;
  return (
    `X-Forwarded-For: ${forwardedFor ? `${forwardedFor}, ${ctx.remoteIp}` : ctx.remoteIp}\r\nX-Forwarded-Proto: ${proto}\r\nX-Forwarded-Host: ${ctx.host}\r\n` +
    `X-Real-IP: ${ctx.client}\r\nForwarded: ${forwarded ? `${forwarded}, ${hop}` : hop}\r\n\r\n`
  );
}

/** An address as Forwarded names a node (RFC 7239 §6): an IPv6 one in brackets, quoted. */
function forwardedNode(address: string): string {
  return address.includes(":") ? `"[${address}]"` : address;
}

/** A quoted-string (RFC 9110 §5.6.4): a Host with a port is no token. Nothing to escape: a Host the edge routes by is DNS labels or an IPv6 literal, and a port. */
const quotedString = (host: string): string => `"${host}"`;

/** Where the head's text (as it came, without its blank line) is read, only when it is needed (http-door.ts HttpVisit). */
export interface HeadSource {
  readonly text: string;
}

/**
 * Serves `head` on `conn` through `tunnel`'s agent: on the stream the
 * connection's last request to it went on, when that one is kept
 * (request-stream.ts), else on a new one.
 */
export function forward(conn: HttpConnection, head: RequestHead, source: HeadSource, tunnel: Tunnel, ctx: ForwardContext): void {
  // a switch the tunnel does not serve knowingly (upgrade.ts) is taken off: the request goes on as a plain one
  if (head.upgrade !== undefined && !upgradeAllowed(head.upgrade, tunnel.allowUpgrade)) {
    head.upgrade = undefined;
    ctx.switchTakenOff = true;
  }
  const parked = conn.parked;
  if (parked) {
    conn.parked = undefined;
    // an upgrade goes on a stream of its own: after its 101 the stream is the new protocol's
    if (head.upgrade === undefined && parked.carries(tunnel)) return new Exchange(conn, head, tunnel, ctx, parked).start(requestHeadBytes(conn, head, tunnel, ctx, source));
    parked.drop();
  }
  // (a switch never goes on a parked stream: its text is read for requestHeadText anyway)
  if (head.upgrade !== undefined) {
    ctx.switchText = source.text;
  }
  const headText = requestHeadText(head, tunnel, ctx, source.text, conn);
  const agent = tunnel.agent;
  const meta: OpenMeta = { tunnel: tunnel.id, kind: "h1", remote: `${ctx.remoteIp}:${ctx.remotePort}`, head: headText };
  // another node's tunnel: its access rules are applied there, on the visitor's address as judged here
  if (tunnel.relayed) {
    (meta as RelayedMeta).client = ctx.client;
    if (ctx.warn) (meta as RelayedMeta).warn = true;
    relayedConnection(meta as RelayedMeta, conn);
  }
  const keep = agent?.keeps === true && head.keepAlive && head.upgrade === undefined;
  if (keep) meta.keep = true;
  const bodyless = !keep && head.framing === "none" && head.upgrade === undefined;
  const stream = agent?.openStream(meta, bodyless);
  if (!stream) {
    breakersEnded(ctx.policy);
    ctx.counters.request(HTTP_REQUEST, 502, ctx.startedAt);
    void conn.answer(badGatewayPage(ctx.host, "its agent is reconnecting or busy"), head, head.framing === "none");
    return;
  }
  new Exchange(conn, head, tunnel, ctx, new RequestStream(stream, tunnel, agent!, keep)).start(undefined);
}

/** Why a response is broken off when its policies' rules failed on its head (the response filter's words). */
const POLICY_FAILED = "the tunnel's traffic policy could not be applied to the response";

/** Exchange.change once a policy's answer went in the response's place: the rest of the response is dropped. */
const DROPPED: HeadChange = { src: new Uint8Array(0), from: 0, to: 0, put: "", answered: true };

/** A chunked request body's pieces: the edge passes the body on framed, and reads it only for its end. */
const ignore = (): void => {};

/**
 * Where pieces are joined for one write when they fit: written at once, and
 * what the socket did not take copied (HttpConnection.write's `copy`), so a
 * response whose head a policy changed costs no buffer of its own (a new
 * buffer a response is memory the collector must then reclaim, which costs
 * more than the copy).
 */
const scratch = Buffer.allocUnsafe(64 * 1024);

/**
 * The pieces (text as latin1) as one buffer: a view of `chunk` when they
 * are its bytes in order (a head and a body passed on as they came), else
 * in `scratch` when they fit, else made; the list is emptied.
 */
function joined(pieces: (Uint8Array | string)[], chunk: Uint8Array): Uint8Array {
  const first = pieces[0]!;
  if (pieces.length === 1 && typeof first !== "string") {
    pieces.length = 0;
    return first;
  }
  let size = 0;
  let at = chunk.byteOffset;
  let views = true;
  for (const p of pieces) {
    if (typeof p === "string") {
      size += p.length;
      views = false;
      continue;
    }
    size += p.byteLength;
    if (views && (p.buffer !== chunk.buffer || p.byteOffset !== at)) views = false;
    at += p.byteLength;
  }
  if (views) {
    pieces.length = 0;
    return new Uint8Array(chunk.buffer, chunk.byteOffset, size);
  }
  const out = size <= scratch.byteLength ? scratch.subarray(0, size) : Buffer.allocUnsafe(size);
  at = 0;
  for (const p of pieces) {
    if (typeof p === "string") at += out.write(p, at, "latin1");
    else {
      out.set(p, at);
      at += p.byteLength;
    }
  }
  pieces.length = 0;
  return out;
}

/**
 * `chunk`'s first `upTo` bytes with `[from, to)` replaced by `put` (a
 * response's head as its rules left it: response-head-rules.ts), in
 * `scratch` when they fit, else made.
 */
function spliced(chunk: Uint8Array, upTo: number, from: number, to: number, put: Uint8Array | string): Uint8Array {
  const putLength = typeof put === "string" ? put.length : put.byteLength;
  const size = from + putLength + (upTo - to);
  const out = size <= scratch.byteLength ? scratch.subarray(0, size) : Buffer.allocUnsafe(size);
  if (from > 0) out.set(chunk.subarray(0, from), 0);
  if (typeof put === "string") out.write(put, from, "latin1");
  else out.set(put, from);
  if (upTo > to) out.set(chunk.subarray(to, upTo), from + putLength);
  return out;
}

/** Whether `pieces` are `chunk`'s first `end` bytes, in order (views of it, not copies). */
function contiguousIn(chunk: Uint8Array, pieces: Uint8Array[], end: number): boolean {
  let at = chunk.byteOffset;
  for (const p of pieces) {
    if (p.buffer !== chunk.buffer || p.byteOffset !== at) return false;
    at += p.byteLength;
  }
  return at === chunk.byteOffset + end;
}

/**
 * Exchanges whose response was read to its end in this turn: done() runs
 * once its last bytes are written, after the read that completed it (one
 * microtask for all of them, not a closure each).
 */
let completing: Exchange[] = [];
function completeAll(): void {
  const now = completing;
  completing = [];
  for (const e of now) e.done();
}

class Exchange implements Occupant, ResponseSink, StreamUser {
  private readonly parser: ResponseParser;
  /** Request body still to come: bytes of a length, or the chunked decoder tracking where it ends. */
  private remaining: number;
  private readonly chunks: ChunkedDecoder | undefined;
  private requestDone: boolean;
  private responded = false;
  /** Some of the response reached the visitor: a failure now can only cut the connection. */
  private wrote = false;
  private response: ParsedHead | undefined;
  /** A final status no visitor can be given (600-999): the 502 page instead. */
  private invalidStatus: number | undefined;
  /** Why a 101 does not answer the request (it asked for no switch, or not this one), or why the policies' rules failed on the head (headRules): the 502 page instead. */
  private refusedSwitch: string | undefined;
  /** After a 101: bytes both ways as they come. */
  private piping = false;
  private visitorEnded = false;
  finished = false;
  /** The response has been read to its end (its bytes are on their way to the visitor). */
  private complete = false;
  /** Response bytes written to the visitor but not yet taken by its socket: their credit waits. */
  private owed = 0;
  /** The OPEN's bytes, counted in before the REPLY's are counted out. */
  private openBytes = 0;
  /**
   * An HTTP/1.0 visitor answered with a chunked body, which it cannot read:
   * the body goes without its framing (its chunks' data, no trailers) and
   * ends with the connection (RFC 9112 §6.1), the head without
   * Transfer-Encoding. (With a response filter, the filter does it.)
   */
  private closeDelimited = false;
  /** The tunnel's traffic policies judge the response (traffic-policy/response-filter.ts): its bytes go through this. */
  private readonly filter: ResponseFilter | undefined;
  /** Or, when their response rules only change fields (TunnelPolicy.responseInHead), their layers: the head is judged as it is read, and goes on in place. */
  private readonly headRules: TunnelPolicy | undefined;
  /** What those rules made of the head, until it is written (and, for an answer in the response's place, until the response's end: its bytes are dropped). */
  private change: HeadChange | undefined;
  /** filtered() is feeding the parser: the response's end waits for the chunk's credit, and what the filter sends waits in filteredPieces for one write. */
  private inPush = false;
  private filteredPieces: (Uint8Array | string)[] = [];
  /** ResponseSink: the response goes on as it lies in the chunks (see the constructor). */
  readonly inPlace: boolean;
  readonly readsBody: boolean;
  readonly readsHeadBytes: boolean;
  private readonly stream: Stream;
  /** The wait for the response to begin (its deadline), while it lasts. */
  private wait: ResponseWait | undefined;

  constructor(
    private readonly conn: HttpConnection,
    private readonly request: RequestHead,
    private readonly tunnel: Tunnel,
    private readonly ctx: ForwardContext,
    private readonly carrier: RequestStream,
  ) {
    // a pool member's requests in flight, for least-requests (edge/pool.ts)
    if (tunnel.pool) tunnel.inFlight++;
    this.stream = carrier.stream;
    this.remaining = request.framing === "length" ? request.length : 0;
    this.chunks = request.framing === "chunked" ? new ChunkedDecoder() : undefined;
    this.requestDone = request.framing === "none";
    const policy = ctx.policy && tunnel.policy?.response ? tunnel.policy : undefined;
    // rules that only change fields, for an HTTP/1.1 visitor that asked for no switch: judged in the head, which goes on in place
    this.headRules = policy?.responseInHead && request.minor === 1 && request.upgrade === undefined ? policy : undefined;
    this.filter = policy && !this.headRules ? new ResponseFilter(policy, ctx.policy!, request.method, request.minor, this.outlet()) : undefined;
    // the tunnel's agent is told what its policies did with the request once its response is judged (passed-notes.ts)
    if (ctx.policy) toldWhenAnswered(ctx.policy, tunnel, this.stream.id);
    // the head's fields are read only for an HTTP/1.0 visitor's framing; otherwise it goes on as it came (a
    // policy's response rules, the tunnel's header flags among them, read them when they need them:
    // response-filter.ts); one parser a stream, read by one request after another
    const fields = request.minor === 0;
    // nothing of the response changes on its way (no policy's filter, not an HTTP/1.0 visitor's, whose chunked
    // answer loses its framing): its bytes go on from the chunk as they lie, no piece or view made
    this.inPlace = !fields && this.filter === undefined;
    this.readsBody = !this.inPlace;
    // a lean head's bytes are read by the check of a 101 (upgrade.ts responseFields), and by the policies'
    // filter, which reads its fields from them when a rule asks (response-filter.ts)
    this.readsHeadBytes = request.upgrade !== undefined || this.filter !== undefined;
    const parser = carrier.parser;
    if (parser) parser.reset(request.method, this, fields);
    this.parser = parser ?? (carrier.parser = new ResponseParser(request.method, this, fields));
  }

  /** Where the response filter's bytes go: the visitor, with the agent's credit after them. */
  private outlet(): Outlet {
    return {
      write: (bytes) => {
        this.wrote = true;
        // what the filter sends while a chunk is read (a head judged at once, the body after it) goes in one write
        if (this.inPush) this.filteredPieces.push(bytes);
        else this.conn.write(typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes);
      },
      credit: (n) => {
        // once done, the stream may carry the next request: what this one owes goes back now
        if (this.finished || (this.owed === 0 && this.conn.writesPending === 0)) this.stream.consumed(n);
        else this.owed += n;
      },
      finished: () => {
        if (this.finished) return;
        completing.push(this);
        if (completing.length === 1) queueMicrotask(completeAll);
      },
      broken: (why) => this.brokenResponse(why),
    };
  }

  /** `headBytes`: the request's head, to go as DATA on a kept stream; undefined: it went in the stream's OPEN. */
  start(headBytes: Uint8Array | undefined): void {
    const { conn, stream, tunnel } = this;
    this.carrier.user = this;
    conn.occupy(this);
    if (headBytes === undefined) tunnel.countIn(stream.metaBytes);
    this.openBytes = stream.metaBytes;
    this.wait = this.carrier.awaitResponse(tunnel.responseTimeoutMs ?? this.ctx.responseTimeoutMs, this);
    if (headBytes !== undefined) this.toAgent(headBytes);
    const early = conn.takeEarly();
    if (early) this.data(early);
  }

  // the response's start (REPLY on a new stream, the first bytes on a kept one), or why there is none (replies.ts)

  replied(): void {
    if (this.finished || this.responded || !this.wait?.answered()) return;
    this.responded = true;
    this.tunnel.countOut(this.stream.metaBytes - this.openBytes);
  }

  failed(why: string): void {
    if (this.finished) return;
    log.info("tunnel request failed", { tunnel: this.ctx.host, path: this.request.target.split("?")[0], err: why });
    this.failPage(badGatewayPage(this.ctx.host, why));
  }

  timedOut(timeoutMs: number): void {
    if (this.finished) return;
    log.info("tunnel request failed", { tunnel: this.ctx.host, path: this.request.target.split("?")[0], err: new ResponseTimeout(timeoutMs).message });
    this.failPage(slowServicePage(this.ctx.host, Math.round(timeoutMs / 1000), Math.round(this.ctx.maxResponseTimeoutMs / 1000)));
  }

  /** The stream took what was queued on it: the visitor may send more. */
  streamDrained(): void {
    this.conn.resume();
  }

  // -- the visitor's bytes: the request body, then (after a 101) anything -------------------------

  data(bytes: Uint8Array): void {
    if (this.finished) return;
    if (this.piping) return this.toAgent(bytes);
    // the next request's, sent early; or, for an upgrade, the new protocol's before its 101 (taken by end())
    if (this.requestDone) return this.conn.unread(bytes);
    let end: number;
    if (this.chunks) {
      const error = this.chunks.feed(bytes, 0, ignore);
      if (error) return this.brokenRequest(error);
      end = this.chunks.done ? this.chunks.endedAt : bytes.byteLength;
      this.requestDone = this.chunks.done;
    } else {
      end = Math.min(this.remaining, bytes.byteLength);
      this.remaining -= end;
      this.requestDone = this.remaining === 0;
    }
    if (end > 0) this.toAgent(end === bytes.byteLength ? bytes : bytes.subarray(0, end));
    if (this.requestDone) {
      // an upgrade's request has no body: what follows is the new protocol's, kept until the 101;
      // a kept stream's next request follows on it
      if (this.request.upgrade === undefined && !this.carrier.keep) this.stream.end();
      if (end < bytes.byteLength) this.conn.unread(bytes.subarray(end));
    }
  }

  private toAgent(bytes: Uint8Array): void {
    this.tunnel.countIn(bytes.byteLength);
    if (!this.stream.write(bytes)) this.conn.pause();
  }

  ended(): void {
    // the visitor half-closed: in a pipe, the agent's side learns it; mid-request, the request is broken
    this.visitorEnded = true;
    if (this.piping) return this.stream.end();
    if (!this.requestDone) return this.brokenRequest("the visitor closed its side mid-request");
  }

  /** The exchange is over, whichever way: once. */
  private finish(visitorLeft?: boolean): void {
    this.finished = true;
    // no response head told the circuit breakers: none came (the edge answers 502/504), or the visitor left first
    breakersEnded(this.ctx.policy, visitorLeft);
    this.filter?.cancel();
    if (this.tunnel.pool) this.tunnel.inFlight--;
  }

  closed(): void {
    if (this.finished) return;
    this.finish(true);
    this.stream.reset(WireError.CANCELLED);
  }

  drained(): void {
    if (this.owed === 0) return;
    this.stream.consumed(this.owed);
    this.owed = 0;
  }

  // -- the agent's bytes: the response, then (after a 101) anything ---------------------------------

  fromAgent(chunk: Uint8Array): void {
    if (this.finished) return this.stream.consumed(chunk.byteLength);
    if (!this.responded) this.replied(); // a kept stream's later responses come without a REPLY
    this.tunnel.countOut(chunk.byteLength);
    if (this.piping) return this.toVisitor(chunk);
    if (this.filter) return this.filtered(chunk);
    // the parser hands the response's bytes to raw() as it reads them (or, in place, counts them):
    // heads only once whole and read (a head split over DATA frames, one that turns out malformed: nothing of it goes)
    const { parser } = this;
    const error = parser.push(chunk);
    const pieces = this.pieces;
    if (pieces.length > 0) this.pieces = [];
    if (error) return this.brokenResponse(`its local service sent a malformed response: ${error}`);
    if (this.refusedSwitch !== undefined) return this.brokenResponse(this.refusedSwitch);
    if (this.invalidStatus !== undefined) return this.brokenResponse(`its local service sent an invalid status ${this.invalidStatus}`);
    const end = parser.complete ? parser.endedAt : chunk.byteLength;
    // one write for what this chunk completed (a head and the body after it, most often): the
    // chunk's first bytes when they lie in it in order, as they do unless a head came in parts
    const inPlace = this.inPlace ? parser.inPlaceEnd : -1;
    if (inPlace > 0) {
      if (this.change !== undefined) this.changedInPlace(chunk, inPlace, end);
      else this.toVisitor(inPlace === chunk.byteLength ? chunk : chunk.subarray(0, inPlace), end);
    }
    else if (pieces.length > 0) this.toVisitor(pieces.length === 1 ? pieces[0]! : contiguousIn(chunk, pieces, end) ? (end === chunk.byteLength ? chunk : chunk.subarray(0, end)) : Buffer.concat(pieces), end);
    else this.stream.consumed(end); // held in the parser (part of a head), which bounds it
    if (end < chunk.byteLength) {
      const rest = chunk.subarray(end);
      if (this.piping) this.toVisitor(rest);
      else this.stream.consumed(rest.byteLength); // past the response's end: not the visitor's
    }
  }

  /** fromAgent() with the response through the policies' filter: it writes, and gives the credit back after. */
  private filtered(chunk: Uint8Array): void {
    this.inPush = true;
    const error = this.parser.push(chunk);
    this.inPush = false;
    if (this.filteredPieces.length > 0) {
      const bytes = joined(this.filteredPieces, chunk);
      this.conn.write(bytes, bytes.buffer === scratch.buffer);
    }
    if (error) return this.brokenResponse(`its local service sent a malformed response: ${error}`);
    if (this.refusedSwitch !== undefined) return this.brokenResponse(this.refusedSwitch);
    if (this.invalidStatus !== undefined) return this.brokenResponse(`its local service sent an invalid status ${this.invalidStatus}`);
    const end = this.parser.complete ? this.parser.endedAt : chunk.byteLength;
    this.filter!.credit(end);
    // the response's end after its credit: done() (the next request) comes after every byte of it is dealt with
    if (this.parser.complete && !this.piping) this.filter!.end();
    if (end < chunk.byteLength) {
      const rest = chunk.subarray(end);
      if (this.piping) this.toVisitor(rest); // after a 101, which the filter passed at once
      else this.stream.consumed(rest.byteLength);
    }
  }

  private toVisitor(bytes: Uint8Array, credit = bytes.byteLength, copy = false): void {
    this.wrote = true;
    if (this.conn.write(bytes, copy)) this.stream.consumed(credit);
    else this.owed += credit;
  }

  /** The chunk's first `upTo` bytes with the head as the policies' response rules left it (headRules); an answer in the response's place drops the rest. */
  private changedInPlace(chunk: Uint8Array, upTo: number, credit: number): void {
    const change = this.change!;
    // the response's later bytes, after the policy's answer: not the visitor's
    if (change === DROPPED) return this.stream.consumed(credit);
    this.change = change.answered ? DROPPED : undefined;
    const bytes = spliced(chunk, change.answered ? change.from : upTo, change.from, change.answered ? change.from : change.to, change.put);
    this.toVisitor(bytes, credit, bytes.buffer === scratch.buffer);
  }

  /** raw() with the head changed (headRules), when its bytes were gathered from several chunks: the head's pieces as they left it. */
  private rawChanged(bytes: Uint8Array, part: "head" | "body"): void {
    const change = this.change!;
    if (change.answered) {
      if (part === "head" && change !== DROPPED) this.pieces.push(typeof change.put === "string" ? Buffer.from(change.put, "latin1") : change.put);
      this.change = DROPPED;
      return;
    }
    if (part === "body") return void this.pieces.push(bytes);
    this.change = undefined;
    // `bytes` is the head's place in change.src: its offsets there
    const at = bytes.byteOffset - change.src.byteOffset;
    this.pieces.push(bytes.subarray(0, change.from - at), typeof change.put === "string" ? Buffer.from(change.put, "latin1") : change.put, bytes.subarray(change.to - at));
  }

  // ResponseSink: the parser's view of the response as it passes

  interim(): void {}

  head(head: ParsedHead, src?: Uint8Array, from?: number, to?: number): void {
    // a pipe opens only on a 101 that answers what the request asked (upgrade.ts): nothing after any other reaches the visitor
    if (head.status === 101) {
      const { request } = this;
      this.refusedSwitch =
        request.upgrade === undefined
          ? "its local service switched protocols for a request that asked for no upgrade"
          : switchRefusal(request.upgrade, request.fields, responseFields(head, request.method));
      if (this.refusedSwitch !== undefined) return this.parser.stop();
    }
    // 101 and 200-599 are answers; 600-999 fit a status line but mean nothing in HTTP
    if (head.status > 599) {
      this.invalidStatus = head.status;
      return this.parser.stop();
    }
    this.response = head;
    breakersAnswered(this.ctx.policy, head.status);
    if (this.headRules && !this.judgeHead(head, src!, from!, to!)) return;
    this.closeDelimited = !this.filter && head.framing === "chunked" && this.request.minor === 0;
    // no response rule to judge it (the filter and the head's rules tell when they have): the request's rules are told now
    if (this.ctx.policy?.noteTunnel !== undefined && !this.filter) tellPassed(this.ctx.policy, this.tunnel.policy);
    this.ctx.counters.request(this.request.upgrade === "websocket" ? WEBSOCKET_REQUEST : HTTP_REQUEST, head.status, this.ctx.startedAt);
  }

  /** The policies' response rules on the head where it lies (headRules): false when their run failed (the response is broken off, as the filter's). */
  private judgeHead(head: ParsedHead, src: Uint8Array, from: number, to: number): boolean {
    try {
      this.change = judgeHeadInPlace(this.ctx.policy!, this.headRules!, head, src, from, to, this.request.method);
      return true;
    } catch (err) {
      log.warn("traffic policy's response failed", { err: String(err) });
      this.refusedSwitch = POLICY_FAILED;
      this.parser.stop();
      return false;
    }
  }

  body(piece: Uint8Array): void {
    this.filter?.body(piece);
    // an HTTP/1.0 visitor's chunked answer: its data without the framing (raw() leaves the framed bytes out)
    if (this.closeDelimited) this.pieces.push(piece);
  }

  end(): void {
    // the response is complete (its last byte is being written): after a 101 the pipe begins
    if (this.response?.status === 101 && this.request.upgrade !== undefined) {
      this.piping = true;
      // a pipe stays: judged again when the tunnel's rules narrow (judgement/live-visits.ts)
      const exchange = this;
      const { conn, ctx, request } = this;
      const pipe: LiveVisit = {
        client: ctx.client,
        get over() {
          return exchange.finished;
        },
        end: () => exchange.cut(),
        judgedBy: () => pipeSubject({ client: ctx.client, clientPort: conn.peer.port, serverPort: serverPortOf(conn), ends: conn, openedAt: conn.openedAt, secure: ctx.secure, host: ctx.host, head: request, text: ctx.switchText }),
      };
      stays(this.tunnel, pipe);
      const early = this.conn.takeEarly();
      if (early) this.toAgent(early);
      // the operator's layers changed while the 101 was awaited: those of now judge it
      judgedSince(this.tunnel, pipe, ctx.switchJudgedWith);
      return;
    }
    // whole: nothing the agent's connection does now (a reset, its close) can take it back
    this.complete = true;
    // through the policies: done once the filter has sent it all (filtered() ends it, after the chunk's credit;
    // a body read until the connection closes ends here)
    if (this.filter) {
      if (!this.inPush) this.filter.end();
      return;
    }
    completing.push(this);
    if (completing.length === 1) queueMicrotask(completeAll);
  }

  /** Response bytes read by the parser in this chunk, to go out in one write. */
  private pieces: Uint8Array[] = [];

  raw(bytes: Uint8Array, part: "interim" | "head" | "body"): void {
    const { filter } = this;
    if (filter) {
      if (part === "interim") return filter.interim(bytes);
      if (part === "body") return filter.raw(bytes);
      // a head refused (a 101 not asked for, a status past 599) is not the filter's: fromAgent answers it
      if (this.response) filter.head(this.response, bytes);
      return;
    }
    if (this.closeDelimited) return this.rawCloseDelimited(bytes, part);
    if (this.change !== undefined && part !== "interim") return this.rawChanged(bytes, part);
    this.pieces.push(bytes);
  }

  /** The head of a chunked answer to an HTTP/1.0 visitor, without its framing fields and closing; its framed body left out (body() takes the data). */
  private rawCloseDelimited(bytes: Uint8Array, part: "interim" | "head" | "body"): void {
    if (part === "body") return;
    if (part === "interim") return void this.pieces.push(bytes);
    const response = this.response!;
    const kept = response.headers.filter(([name]) => {
      const lower = name.toLowerCase();
      return lower !== "transfer-encoding" && lower !== "connection" && lower !== "keep-alive" && lower !== "trailer";
    });
    kept.push(["Connection", "close"]);
    this.pieces.push(responseHeadBytes(response, kept));
  }

  /** The response went out whole: the connection carries the next request, if both sides allow. */
  done(): void {
    if (this.finished) return;
    this.finish();
    const keepAlive = this.request.keepAlive && (this.response?.keepAlive ?? false) && this.requestDone && !this.visitorEnded && !this.closeDelimited && !this.filter?.closes;
    const { carrier, stream } = this;
    carrier.user = undefined;
    this.wait = undefined; // the stream's, armed again by the next request on it
    // the agent's FIN may still be on its way; a request body not all sent is not wanted any more
    if (!this.requestDone) stream.reset(WireError.CANCELLED);
    else if (this.request.upgrade !== undefined) stream.end(); // an upgrade the service did not take
    if (carrier.keep) {
      // the stream lives on: the credit of bytes still queued for the visitor goes back now
      if (this.owed > 0) stream.consumed(this.owed);
      this.owed = 0;
      // the agent's FIN, if it cannot carry another request, came with the response's last byte
      if (keepAlive && carrier.carries(this.tunnel)) this.conn.parked = carrier;
      else carrier.drop();
    } else this.settleCredit();
    this.conn.release(keepAlive);
  }

  private settleCredit(): void {
    if (this.owed > 0 && this.conn.writesPending === 0) {
      this.stream.consumed(this.owed);
      this.owed = 0;
    }
  }

  agentFin(): void {
    if (this.finished || this.complete) return;
    if (!this.responded) {
      if (this.wait?.answered()) this.failed("its agent ended the request without an answer");
      return;
    }
    if (this.piping) {
      if (this.visitorEnded) this.finishPipe();
      else this.conn.close(); // the service is done with the new protocol: the visitor's connection ends with it
      return;
    }
    // a response read until the connection closes ends here; anything else is cut short
    const why = this.parser.closed();
    if (this.parser.complete) return;
    this.brokenResponse(why ?? "its agent ended the response early");
  }

  /** The pipe's rules no longer let it through: both ends are cut. */
  cut(): void {
    if (this.finished) return;
    this.finish();
    this.stream.reset(WireError.CANCELLED);
    this.conn.terminate();
  }

  private finishPipe(): void {
    this.finish();
    this.conn.close();
  }

  agentReset(code: string): void {
    // the tunnel's policy on another node closed the visitor's connection: closed here, unanswered (traffic-policy/policy-closed.ts)
    if (code === WireError.POLICY_CLOSED && !this.responded && !this.finished) {
      this.wait?.disarm();
      this.finish();
      return this.conn.terminate();
    }
    this.wait?.resetBy(code); // before the response began: the wait reports it (failed)
    if (this.finished || this.complete || !this.responded) return;
    this.brokenResponse(code.startsWith(WireError.UPSTREAM_FAILED) ? `the agent could not reach it (${code.slice(WireError.UPSTREAM_FAILED.length).trim() || "reset"})` : "the tunnel's connection closed");
  }

  // -- failures ----------------------------------------------------------------------------------------

  /** No response reached the visitor yet: it gets the edge's page; else its connection is cut. */
  private brokenResponse(why: string): void {
    if (this.finished) return;
    if (!this.wrote) return this.failPage(badGatewayPage(this.ctx.host, why));
    log.info("tunnel response broken off", { tunnel: this.ctx.host, err: why });
    this.finish();
    this.stream.reset(WireError.CANCELLED);
    this.conn.terminate();
  }

  private failPage(page: Response): void {
    if (this.finished) return;
    this.finish();
    this.stream.reset(WireError.CANCELLED);
    this.ctx.counters.request(HTTP_REQUEST, page.status, this.ctx.startedAt);
    // the rest of a request body the service never got cannot be told from a next request: close after the page;
    // and after a switch that failed (a 101 refused among them), whatever was sent with it goes nowhere
    void this.conn.answer(page, this.request, this.requestDone && this.request.upgrade === undefined && !this.ctx.switchTakenOff);
  }

  /** The visitor's body broke its own framing: nothing more can be read from this connection. */
  private brokenRequest(why: string): void {
    if (this.finished) return;
    log.info("visitor request broken off", { tunnel: this.ctx.host, err: why });
    this.finish(true);
    this.stream.reset(WireError.CANCELLED);
    if (this.wrote) return this.conn.terminate();
    this.ctx.counters.request(HTTP_REQUEST, 400, this.ctx.startedAt);
    void this.conn.answer(new Response("malformed request body\n", { status: 400 }), this.request, false);
  }
}
