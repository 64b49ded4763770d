/**
 * Reads one HTTP/1.1 response from a local connection as its bytes arrive:
 * the head (interim 1xx answers skipped), then the body by its framing.
 * Body pieces are subarrays of the input, handed on at once, so a body is
 * never held here; only an incomplete head is, up to MAX_HEAD_BYTES.
 */
import { ChunkedDecoder } from "./chunked.ts";
import { parseHead, type ParsedHead } from "./head.ts";

export interface ResponseSink {
  head(head: ParsedHead): void;
  body(piece: Uint8Array): void;
  /** The response is complete. */
  end(): void;
}

/** Status line and header fields together; more is a broken or hostile service. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** 100 Continue, 103 Early Hints...: a few are normal, an endless run is not. */
const MAX_INTERIM = 16;
const HEAD_END = Buffer.from("\r\n\r\n");

type Phase = "head" | "length" | "chunked" | "close" | "done" | "failed";

export class ResponseParser {
  private phase: Phase = "head";
  /** Bytes of a head that came in pieces; undefined while none is pending. */
  private partial: Uint8Array | undefined;
  private partialLength = 0;
  private remaining = 0;
  private chunked: ChunkedDecoder | undefined;
  private interim = 0;
  /** Any byte of a response (even an interim one) has arrived. */
  started = false;
  /** Bytes came after the response ended: the connection is not in a state to reuse. */
  overflow = false;

  constructor(
    private readonly requestMethod: string,
    private readonly sink: ResponseSink,
  ) {}

  get complete(): boolean {
    return this.phase === "done";
  }

  private readonly deliverChunk = (piece: Uint8Array): void => {
    if (this.phase === "chunked") this.sink.body(piece);
  };

  /** Stops handing anything to the sink (its consumer has gone). */
  stop(): void {
    if (this.phase !== "done") this.phase = "failed";
  }

  /** Feeds received bytes; returns why the response is malformed, if it is. */
  push(bytes: Uint8Array): string | undefined {
    if (bytes.byteLength > 0) this.started = true;
    let at = 0;
    while (at < bytes.byteLength) {
      switch (this.phase) {
        case "head": {
          const next = this.readHead(bytes, at);
          if (typeof next === "string") return this.fail(next);
          if (next < 0) return undefined; // the head continues in the next piece
          at = next;
          break;
        }
        case "length": {
          const take = Math.min(this.remaining, bytes.byteLength - at);
          this.remaining -= take;
          this.sink.body(at === 0 && take === bytes.byteLength ? bytes : bytes.subarray(at, at + take));
          at += take;
          if (this.remaining === 0) this.finish();
          break;
        }
        case "chunked": {
          const decoder = this.chunked!;
          const error = decoder.feed(bytes, at, this.deliverChunk);
          if (error) return this.fail(error);
          if (!decoder.done) return undefined;
          at = decoder.endedAt;
          this.finish();
          break;
        }
        case "close":
          this.sink.body(at === 0 ? bytes : bytes.subarray(at));
          return undefined;
        case "done":
          this.overflow = true;
          return undefined;
        case "failed":
          return undefined;
      }
    }
    return undefined;
  }

  /**
   * The connection delivered its last byte. Ends a body read until close;
   * otherwise returns why the response is incomplete (undefined if it was
   * already complete, or given up).
   */
  closed(): string | undefined {
    switch (this.phase) {
      case "close":
        this.finish();
        return undefined;
      case "head":
        this.phase = "failed";
        return this.started ? "the local service closed the connection in the middle of its response head" : "the local service closed the connection without answering";
      case "length":
      case "chunked":
        this.phase = "failed";
        return "the local service broke off its response";
      default:
        return undefined;
    }
  }

  /** Returns the offset after the head, -1 if incomplete, or an error reason. */
  private readHead(bytes: Uint8Array, at: number): number | string {
    const view = Buffer.isBuffer(bytes) ? bytes : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    let text: string;
    let next: number;
    if (this.partial === undefined) {
      // the usual case: the whole head in one piece, read where it lies
      const end = view.indexOf(HEAD_END, at);
      if (end < 0 || end + 4 - at > MAX_HEAD_BYTES) return this.keepPartial(view, at);
      text = view.toString("latin1", at, end);
      next = end + 4;
    } else {
      const searchFrom = Math.max(0, this.partialLength - 3);
      const room = MAX_HEAD_BYTES - this.partialLength;
      const take = Math.min(room, view.byteLength - at);
      this.append(view.subarray(at, at + take));
      const buffered = Buffer.from(this.partial.buffer, 0, this.partialLength);
      const end = buffered.indexOf(HEAD_END, searchFrom);
      if (end < 0) return take < view.byteLength - at || this.partialLength >= MAX_HEAD_BYTES ? tooLarge() : -1;
      text = buffered.toString("latin1", 0, end);
      // the bytes after the head in this piece: those not taken into the buffer beyond the end mark
      next = at + take - (this.partialLength - (end + 4));
      this.partial = undefined;
      this.partialLength = 0;
    }
    const head = parseHead(text, this.requestMethod);
    if (typeof head === "string") return head;
    if (head.status < 200 && head.status !== 101) {
      if (++this.interim > MAX_INTERIM) return `more than ${MAX_INTERIM} interim responses`;
      return next; // 100 Continue and friends: the real answer follows
    }
    this.begin(head);
    return next;
  }

  private keepPartial(view: Buffer, at: number): number | string {
    if (view.byteLength - at >= MAX_HEAD_BYTES) return tooLarge();
    this.append(view.subarray(at));
    return -1;
  }

  private append(piece: Uint8Array): void {
    const needed = this.partialLength + piece.byteLength;
    if (!this.partial || this.partial.byteLength < needed) {
      // grows by doubling: a head trickling in byte by byte costs linear time, not quadratic
      const grown = new Uint8Array(Math.min(MAX_HEAD_BYTES, Math.max(needed, (this.partial?.byteLength ?? 512) * 2)));
      if (this.partial) grown.set(this.partial.subarray(0, this.partialLength));
      this.partial = grown;
    }
    this.partial.set(piece, this.partialLength);
    this.partialLength = needed;
  }

  private begin(head: ParsedHead): void {
    // a bodiless answer reads as a body of length 0
    this.phase = head.framing === "none" ? "length" : head.framing;
    this.remaining = head.length;
    if (head.framing === "chunked") this.chunked = new ChunkedDecoder();
    this.sink.head(head);
    if (this.phase === "length" && this.remaining === 0) this.finish();
  }

  private finish(): void {
    if (this.phase === "failed") return;
    this.phase = "done";
    this.sink.end();
  }

  private fail(reason: string): string {
    this.phase = "failed";
    return reason;
  }
}

const tooLarge = () => `response head larger than ${MAX_HEAD_BYTES / 1024} KiB`;
