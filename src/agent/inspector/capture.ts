/**
 * One captured request: the visitor's request head and body, the local
 * service's response head and body, each body kept up to MAX_BODY_BYTES,
 * timings and how it ended; for a WebSocket, its last messages both ways,
 * read from the bytes as they pass. It is the ExchangeTap its request path
 * calls, so capturing is a few field writes and a copy per chunk; JSON and
 * base64 wait until someone asks (json.ts).
 */
import { WebSocketFrameReader, type WsMessage as ReadMessage } from "../../http/ws-frame-reader.ts";
import type { HeaderList, PolicyNote, PolicyPassed } from "../../protocol/messages.ts";
import type { TunnelView } from "../output.ts";
import { BodyCapture, headText, placedAt, placedIn, placeRange, release, type Place } from "./body.ts";
import { MAX_BODY_BYTES, WS_MESSAGE_BYTES, WS_MESSAGES_KEPT } from "./limits.ts";
import { isRefusal, parseRequestHead } from "../../http/request-head.ts";
import { parseHead } from "../../http/response-head.ts";
import { HeadText, type ExchangeTap } from "./tap.ts";

export type CaptureState = "pending" | "done" | "failed";

/** What a capture tells its store as it goes. */
export interface CaptureOwner {
  /** Something shown in the list changed (status, state, sizes). */
  changed(c: Capture): void;
  /** `n` more body bytes are held. */
  grew(n: number): void;
}

/** Header fields, or the head's text to read them from: read once, when first asked. */
export type LazyHeaders = HeaderList | HeadText;

function read(h: HeadText): HeaderList {
  if (h.of === "request") {
    const head = parseRequestHead(h.text, true);
    return isRefusal(head) ? [] : head.fields;
  }
  const head = parseHead(h.text, h.of, true);
  return typeof head === "string" ? [] : head.headers;
}

/** A request head as captured: as the visitor sent it, names' case kept. */
export class CapturedHead {
  constructor(
    readonly method: string,
    /** The request target ("/a?b"). */
    readonly path: string,
    private fields: LazyHeaders,
  ) {}

  get headers(): HeaderList {
    const f = this.fields;
    return f instanceof HeadText ? (this.fields = read(f)) : f;
  }
}

export interface WsMessage {
  from: "visitor" | "service";
  at: number;
  text: boolean;
  /** The first WS_MESSAGE_BYTES of it. */
  data: Uint8Array;
  size: number;
}

/** A WebSocket's traffic: counts both ways and its last messages. */
export class WsTraffic {
  fromVisitor = 0;
  fromService = 0;
  bytesFromVisitor = 0;
  bytesFromService = 0;
  readonly last: WsMessage[] = [];

  /** Readers of the frames each way, made with the first bytes after the 101. */
  private readers: Record<"visitor" | "service", WebSocketFrameReader> | undefined;
  /** Bytes of messages kept more (or fewer) by the read() under way. */
  private change = 0;

  /** Reads the bytes that passed from one side; returns the bytes of messages now kept more (or fewer). */
  read(from: "visitor" | "service", bytes: Uint8Array): number {
    this.readers ??= {
      visitor: new WebSocketFrameReader(WS_MESSAGE_BYTES, (m) => (this.change += this.add("visitor", m))),
      service: new WebSocketFrameReader(WS_MESSAGE_BYTES, (m) => (this.change += this.add("service", m))),
    };
    this.change = 0;
    this.readers[from].push(bytes);
    return this.change;
  }

  /** Counts one message and keeps its first bytes (the reader copied them); returns the bytes now kept more. */
  add(from: "visitor" | "service", m: ReadMessage): number {
    if (from === "visitor") {
      this.fromVisitor++;
      this.bytesFromVisitor += m.size;
    } else {
      this.fromService++;
      this.bytesFromService += m.size;
    }
    this.last.push({ from, at: Date.now(), text: m.text, data: m.data, size: m.size });
    let freed = 0;
    if (this.last.length > WS_MESSAGES_KEPT) freed = this.last.shift()!.data.byteLength;
    return m.data.byteLength - freed;
  }
}

/** What a capture without a body shows: nothing is ever added to it. */
const NO_BODY = new BodyCapture(0);

export class Capture implements ExchangeTap {
  /** performance.now() when it began; wall time is worked out when asked (startedAt). */
  private readonly started: number;
  /** Made with the first byte (most requests have no body): one object less per request to collect. */
  private request: BodyCapture | undefined;
  private reply: BodyCapture | undefined;
  status: number | undefined;
  private replyHeaders: LazyHeaders | undefined;
  /**
   * The response head's bytes as the service sent them (blank line
   * included), where they are kept (body.ts: a place, no object of its
   * own), read into replyHeaders when asked; likewise the request head's.
   */
  private replyHeadIn: Place | undefined;
  private replyHeadAt = 0;
  private replyHeadLength = 0;
  private requestHeadIn: Place | undefined;
  private requestHeadAt = 0;
  private requestHeadLength = 0;
  state: CaptureState = "pending";
  /** Why it failed, for state "failed". */
  error: string | undefined;
  durationMs: number | undefined;
  /** For a WebSocket upgrade: its messages. */
  readonly ws: WsTraffic | undefined;
  /** Gone from the store (evicted or cleared): whatever still passes is no longer copied. */
  evicted = false;
  /** The live stream has told its clients about it once: later news of it is an update. */
  announced = false;
  /** Bytes of bodies and messages it holds: its share of the store's budget. */
  private kept = 0;
  /** Answered by the server's traffic policies, never reaching this agent (a POLICY note): what they said. */
  answeredAtEdge: PolicyNote | undefined;
  /** Let through by the server's traffic policies, with something to tell (a POLICY_PASSED note): what they did in each phase. */
  passedNote: PolicyPassed | undefined;

  private requestHead: CapturedHead | undefined;
  /** The request's fields, or how to read them; undefined: its head's bytes are kept (requestHeadIn). */
  private readonly requestFields: LazyHeaders | undefined;

  constructor(
    readonly id: number,
    readonly tunnel: TunnelView,
    private readonly method: string,
    private readonly path: string,
    requestFields: LazyHeaders | Uint8Array,
    readonly remote: string,
    readonly kind: "http" | "ws",
    private readonly owner: CaptureOwner,
    /** The capture this one replays. */
    readonly replayOf?: number,
    /** The path route that served it. */
    readonly route?: string,
    started = performance.now(),
  ) {
    this.started = started;
    this.ws = kind === "ws" ? new WsTraffic() : undefined;
    if (requestFields instanceof Uint8Array) {
      // the stream's bytes: copied into the slabs at once, read when someone asks
      placeRange(requestFields, 0, requestFields.byteLength);
      this.requestHeadIn = placedIn;
      this.requestHeadAt = placedAt;
      this.requestHeadLength = requestFields.byteLength;
      this.requestFields = undefined;
    } else this.requestFields = requestFields;
  }

  get responseHeaders(): HeaderList | undefined {
    const where = this.replyHeadIn;
    if (where !== undefined) {
      const text = headText(where, this.replyHeadAt, this.replyHeadLength);
      this.replyHeadIn = undefined;
      release(where);
      return (this.replyHeaders = read(new HeadText(text, this.method)));
    }
    const h = this.replyHeaders;
    if (h instanceof HeadText) return (this.replyHeaders = read(h));
    return h;
  }

  /** The request's head, made when first asked. */
  get head(): CapturedHead {
    if (this.requestHead) return this.requestHead;
    let fields = this.requestFields;
    const where = this.requestHeadIn;
    if (where !== undefined) {
      fields = new HeadText(headText(where, this.requestHeadAt, this.requestHeadLength), "request");
      this.requestHeadIn = undefined;
      release(where);
    }
    return (this.requestHead = new CapturedHead(this.method, this.path, fields ?? []));
  }

  get requestBody(): BodyCapture {
    return this.request ?? NO_BODY;
  }

  get responseBody(): BodyCapture {
    return this.reply ?? NO_BODY;
  }

  /** When it began, in ms since the epoch. */
  get startedAt(): number {
    return performance.timeOrigin + this.started;
  }

  /** Bytes of bodies and messages this capture holds (its share of the store's budget). */
  get heldBytes(): number {
    return this.kept;
  }

  private keep(n: number): void {
    if (n === 0) return;
    this.kept += n;
    this.owner.grew(n);
  }

  /** It left the store: the bytes it kept go back to the slabs, and nothing more is copied. */
  release(): void {
    this.evicted = true;
    if (this.requestHeadIn !== undefined) release(this.requestHeadIn);
    this.requestHeadIn = undefined;
    this.request?.release();
    this.reply?.release();
    if (this.replyHeadIn !== undefined) release(this.replyHeadIn);
    this.replyHeadIn = undefined;
  }

  /** Keeps a copy of the response head's bytes, src[start, end), in place of any before. */
  private keepReplyHead(src: Uint8Array, start: number, end: number): void {
    this.replyHeaders = undefined;
    if (this.replyHeadIn !== undefined) release(this.replyHeadIn);
    this.replyHeadIn = undefined;
    if (this.evicted) return;
    placeRange(src, start, end);
    this.replyHeadIn = placedIn;
    this.replyHeadAt = placedAt;
    this.replyHeadLength = end - start;
  }

  // -- ExchangeTap --------------------------------------------------------------------------------

  requestChunk(chunk: Uint8Array): void {
    if (this.evicted) return;
    this.keep((this.request ??= new BodyCapture(MAX_BODY_BYTES)).add(chunk));
  }

  response(status: number, headers: LazyHeaders | Uint8Array): void {
    if (this.state !== "pending") return;
    this.status = status;
    // bytes of the socket's read: copied into the slabs, read when someone asks
    if (headers instanceof Uint8Array) this.keepReplyHead(headers, 0, headers.byteLength);
    else this.replyHeaders = headers;
    this.owner.changed(this);
  }

  responseHeadIn(status: number, src: Uint8Array, start: number, end: number): void {
    if (this.state !== "pending") return;
    this.status = status;
    this.keepReplyHead(src, start, end);
    this.owner.changed(this);
  }

  responseChunk(chunk: Uint8Array): void {
    if (this.evicted) return;
    this.keep((this.reply ??= new BodyCapture(MAX_BODY_BYTES)).add(chunk));
  }

  /** The server's traffic policies answered it (a POLICY note): its status, and what matched and ended it. */
  edgeAnswer(note: PolicyNote): void {
    this.answeredAtEdge = note;
    this.response(note.status, []);
    this.done();
  }

  responseChunkIn(src: Uint8Array, start: number, end: number): void {
    if (this.evicted) return;
    this.keep((this.reply ??= new BodyCapture(MAX_BODY_BYTES)).addRange(src, start, end));
  }

  done(): void {
    if (this.state !== "pending") return;
    this.state = "done";
    this.durationMs = performance.now() - this.started;
    this.owner.changed(this);
  }

  failed(why: string): void {
    if (this.state !== "pending") return;
    this.state = "failed";
    this.error = why;
    this.durationMs = performance.now() - this.started;
    this.owner.changed(this);
  }

  switchedBytes(from: "visitor" | "service", bytes: Uint8Array): void {
    if (!this.ws || this.evicted) return;
    const before = from === "visitor" ? this.ws.fromVisitor : this.ws.fromService;
    this.keep(this.ws.read(from, bytes));
    if ((from === "visitor" ? this.ws.fromVisitor : this.ws.fromService) !== before) this.owner.changed(this);
  }
}
