/**
 * A request's body read for the traffic policy actions that need it
 * (verify-webhook signs the body; jwt-validation may take its token from
 * it), and only for a tunnel whose policies have such an action: every
 * other request's body streams through the edge as before, unread.
 *
 * The body is read whole when the request's run first comes to an
 * action that needs it (a wait, as an action's: the layers and rules
 * before it, the tunnel's IP rules among them, judge the request first),
 * up to the limit (--policy-body-limit), within a time
 * (--policy-body-timeout), and with every body being read at once held
 * under one budget (--policy-body-memory). Its bytes are kept as they came
 * (a chunked body's framing included) and go on to the tunnel unchanged,
 * ahead of anything read after; the actions get its content (the chunks'
 * data). A body over the limit is not read past it: the actions that need
 * it are told so (and answer 413, or find no token), and the request goes
 * on with what was read and then the rest, as it came. A request whose run
 * comes to no such action is not read at all.
 *
 * The door says where the bytes come from: an HTTP/1.1 connection
 * (readConnectionBody), an HTTP/2 stream or a stream relayed from another
 * node (stream-body.ts).
 */
import { RequestBodyReader } from "../../http/request-body.ts";
import type { RequestFraming, RequestHead } from "../../http/request-head.ts";
import type { HttpConnection, Occupant } from "../http-connection.ts";
import { Refusal } from "../judgement/pipeline.ts";
import { page } from "../pages.ts";
import type { BodyReading } from "./body-reading.ts";

export type { BodyReading } from "./body-reading.ts";

/** A body read for the policies. */
export interface ReadBody {
  /** Its content (a chunked body's data, without the framing); undefined when it is larger than the limit. */
  content: Uint8Array | undefined;
  /** Its bytes as they came, in order: they go to the tunnel before anything read after them. */
  raw: Uint8Array[];
  /** The whole body is in `raw` (false: over the limit, the rest still to come). */
  complete: boolean;
}

/** The frame of a chunked body a visitor may add around its content while it is read: the framing of 1-byte chunks is five times its data. */
const FRAMING_ALLOWANCE = 64 * 1024;

/**
 * Follows a body as its pieces come, keeping them, until it ends or passes
 * the limit. `framing` "stream": its end is told by the carrier (HTTP/2's
 * END_STREAM), its bytes are its content; `length` is what it says it
 * will be (its content-length), 0 when it says nothing.
 */
export class BodyGatherer {
  readonly raw: Uint8Array[] = [];
  private readonly content: Uint8Array[] = [];
  private rawBytes = 0;
  private contentBytes = 0;
  private readonly reader: RequestBodyReader | undefined;
  private readonly chunked: boolean;
  /** Past the limit: nothing more is taken. */
  over: boolean;
  /** Bytes of the budget this body holds. */
  private held = 0;

  constructor(
    framing: RequestFraming | "stream",
    length: number,
    private readonly reading: BodyReading,
  ) {
    this.reader = framing === "stream" ? undefined : new RequestBodyReader(framing, length);
    this.chunked = framing === "chunked";
    // a length over the limit is known before a byte is read (a "stream" body's, when it says one)
    this.over = (framing === "length" || framing === "stream") && length > reading.maxBytes;
  }

  /** The body ended (by its framing). */
  get ended(): boolean {
    return this.reader?.done ?? false;
  }

  /** Nothing more is to be read: the body ended or is over the limit. */
  get done(): boolean {
    return this.over || this.ended;
  }

  /**
   * Takes the next bytes of the body (copied: the caller's buffer is not
   * ours to keep). Returns how many of them were the body's (the rest:
   * after its end), "busy" when the budget has no room for them, or why the
   * body is malformed.
   */
  feed(bytes: Uint8Array): number | "busy" | { malformed: string } {
    if (this.done) return 0;
    // a chunked body's data, as views of `bytes` (a body of a length is its bytes)
    const pieces: Uint8Array[] = [];
    const error = this.reader?.feed(bytes, this.chunked ? (piece) => void (piece.byteLength > 0 && pieces.push(piece)) : undefined);
    if (error) return { malformed: error };
    const taken = this.reader?.done ? this.reader.endedAt : bytes.byteLength;
    let data = 0;
    for (const p of pieces) data += p.byteLength;
    // a chunked body's content is held apart from its framed bytes
    const cost = taken + data;
    if (!this.reading.memory.take(cost)) return "busy";
    this.held += cost;
    const copy = (taken === bytes.byteLength ? bytes : bytes.subarray(0, taken)).slice();
    this.raw.push(copy);
    this.rawBytes += taken;
    if (this.chunked) {
      for (const p of pieces) this.content.push(p.slice());
      this.contentBytes += data;
    } else {
      this.content.push(copy);
      this.contentBytes += taken;
    }
    if (this.contentBytes > this.reading.maxBytes || this.rawBytes > 2 * this.reading.maxBytes + FRAMING_ALLOWANCE) this.over = true;
    return taken;
  }

  /** The body as read: its content unless over the limit. The budget is given back: the bytes are handed on. */
  finish(): ReadBody {
    this.reading.memory.give(this.held);
    this.held = 0;
    const complete = !this.over && (this.reader === undefined || this.reader.done);
    const content = this.over ? undefined : this.content.length === 1 ? this.content[0]! : Buffer.concat(this.content);
    return { content, raw: this.raw, complete };
  }

  /** Nothing of it goes on (the request is refused): the budget is given back. */
  drop(): void {
    this.reading.memory.give(this.held);
    this.held = 0;
  }
}

/**
 * How a door reads a request's body, for the run to read it when an
 * action first needs it (http-request.ts judgeRequest): its limits, and
 * the read, which gives the body or the refusal that answers the request.
 */
export interface BodySource {
  reading: BodyReading;
  read(): Promise<ReadBody | Refusal>;
}

/** The request given the body: its content for the actions, or the limit it passed. */
export function withBody(request: { body?: Uint8Array; bodyLimit?: number }, read: ReadBody, reading: BodyReading): void {
  if (read.content !== undefined) request.body = read.content;
  else request.bodyLimit = reading.maxBytes;
}

/** Why a body could not be read: the answer the visitor gets (none when it left). */
export type BodyFailure = "timeout" | "busy" | "gone" | { malformed: string };

export function bodyRefusal(failure: BodyFailure): Refusal {
  if (failure === "gone") return GONE;
  if (failure === "timeout") return new Refusal("access", "BODY_TIMEOUT", undefined, page(408, "Request timeout", `<div class="status">408</div><h1>Request timeout</h1><p>The request's body did not arrive in time.</p>`, { Connection: "close" }));
  if (failure === "busy") return new Refusal("access", "BODY_BUSY", undefined, page(503, "Busy", `<div class="status">503</div><h1>Busy</h1><p>The server is reading too many request bodies at once. Try again in a moment.</p>`, { "Retry-After": "1", Connection: "close" }));
  return new Refusal("access", "BAD_REQUEST", failure.malformed, page(400, "Bad request", `<div class="status">400</div><h1>Bad request</h1><p>The request's body is malformed.</p>`, { Connection: "close" }));
}

/** The visitor left while its body was read: nobody to answer. */
const GONE = new Refusal("access", "BODY_GONE");

const CONTINUE = Buffer.from("HTTP/1.1 100 Continue\r\n\r\n", "latin1");

/**
 * Reads an HTTP/1.1 request's body from its connection, which holds the
 * bytes read with the head (conn.takeEarly): the connection is occupied
 * while it is read, then let go with the body's bytes (and whatever came
 * after them) put back in front of what it reads next, for forward() to
 * take as it takes any body. A client that waits for `100 Continue` gets it
 * first.
 */
export function readConnectionBody(conn: HttpConnection, head: RequestHead, reading: BodyReading): Promise<ReadBody | BodyFailure> {
  const gatherer = new BodyGatherer(head.framing, head.length, reading);
  if (gatherer.done) return Promise.resolve(gatherer.finish());
  return new Promise((resolve) => {
    let after: Uint8Array | undefined;
    let settled = false;
    const settle = (out: ReadBody | BodyFailure) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (out === "gone") return resolve(out);
      conn.vacate();
      if (typeof out === "object" && "raw" in out) {
        // the body's bytes first, then what came after them: read on as if never taken
        if (out.raw.length > 0) conn.unread(out.raw.length === 1 ? out.raw[0]! : Buffer.concat(out.raw));
        if (after) conn.unread(after);
      }
      resolve(out);
    };
    const fail = (why: BodyFailure) => {
      gatherer.drop();
      settle(why);
    };
    const occupant: Occupant = {
      data(bytes) {
        if (settled) return conn.unread(bytes);
        if (gatherer.done) {
          after = after ? Buffer.concat([after, bytes]) : bytes.slice();
          return;
        }
        const taken = gatherer.feed(bytes);
        if (taken === "busy") return fail("busy");
        if (typeof taken === "object") return fail(taken);
        if (taken < bytes.byteLength) after = bytes.slice(taken);
        if (gatherer.done) settle(gatherer.finish());
      },
      ended() {
        if (!gatherer.done) fail({ malformed: "the visitor closed its side mid-request" });
      },
      closed() {
        fail("gone");
      },
    };
    const timer = setTimeout(() => fail("timeout"), reading.timeoutMs);
    if (head.expectContinue) conn.write(CONTINUE);
    conn.occupy(occupant);
    const early = conn.takeEarly();
    if (early) occupant.data(early);
  });
}
