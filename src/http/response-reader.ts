/**
 * Reads one HTTP/1.1 response from a local connection as its bytes arrive:
 * the head (interim 1xx answers skipped), then the body by its framing.
 * Body pieces are subarrays of the input, handed on at once, so a body is
 * never held here; only an incomplete head is, up to MAX_HEAD_BYTES.
 */
import type { HeaderList } from "../protocol/messages.ts";
import { ChunkedDecoder } from "./chunked.ts";
import { readFields, type FieldVisitor } from "./field-lines.ts";
import { hasBareLf, HeadReader, headTextOf } from "./head-reader.ts";
import { MAX_HEADER_FIELDS, parseHead, type ParsedHead } from "./response-head.ts";
import { framingOf } from "./response-head-bytes.ts";

export interface ResponseSink {
  /** An interim answer (100 Continue, 103 Early Hints): the final one follows. */
  interim?(head: ParsedHead): void;
  /** The final head; read for its framing only, where its bytes lie: `src[from, to)` (the blank line included; read them during the call). */
  head(head: ParsedHead, src?: Uint8Array, from?: number, to?: number): void;
  /** A piece of the body, its framing (chunk sizes, trailers) taken off. */
  body(piece: Uint8Array): void;
  /**
   * A piece of a body by length (or read until close) as a place in the
   * input, `src[from, to)`, instead of body(): for a sink that copies it
   * without a view (read it during the call). A chunked body's pieces go
   * to body() all the same.
   */
  bodyIn?(src: Uint8Array, from: number, to: number): void;
  /**
   * A chunked body's trailer fields (names as sent), just before end():
   * only for a sink that has this method (an HTTP/2 stream sends them as
   * trailers); for the others they are read and dropped, or passed on as
   * bytes by raw().
   */
  trailers?(fields: HeaderList): void;
  /** The response is complete. */
  end(): void;
  /**
   * The response's bytes as they came, framing and interim answers
   * included, in order and nothing past its end: for a reader that passes
   * the response on as sent. Called before the head, body or end they hold.
   */
  raw?(bytes: Uint8Array, part: "interim" | "head" | "body"): void;
  /**
   * With raw(), for a sink that passes the input on itself and tells no
   * part from another: the response's bytes that lie in the input in order
   * from its start are not handed to raw() as views but counted
   * (ResponseParser.inPlaceEnd). Only when that stops being so within an
   * input (a head gathered from earlier inputs, a copy) does raw() hear of
   * this input's bytes: those counted so far as one piece, then each as it
   * comes. Read when the parser is made or reset.
   */
  inPlace?: boolean;
  /** False: body() is never called (the sink reads no body pieces; none is made). Read when the parser is made or reset. */
  readsBody?: boolean;
  /** False: a head read for its framing only gets no `bytes` (no view is made). Read when the parser is made or reset. */
  readsHeadBytes?: boolean;
}

/** Status line and header fields together; more is a broken or hostile service. */
export const MAX_HEAD_BYTES = 64 * 1024;
/** 100 Continue, 103 Early Hints...: a few are normal, an endless run is not. */
const MAX_INTERIM = 16;

type Phase = "head" | "length" | "chunked" | "close" | "done" | "failed";

export class ResponseParser {
  private phase: Phase = "head";
  private readonly heads = new HeadReader(MAX_HEAD_BYTES);
  private remaining = 0;
  private chunked: ChunkedDecoder | undefined;
  private interim = 0;
  /** Any byte of a response (even an interim one) has arrived. */
  started = false;
  /** Bytes came after the response ended: the connection is not in a state to reuse. */
  overflow = false;
  /** Where in the input that completed the response it ended: what follows is not part of it. */
  endedAt = -1;

  /** The sink passes the response on as it came (ResponseSink.raw). */
  private raw = false;
  /** ResponseSink.inPlace, readsBody and readsHeadBytes. */
  private inPlace = false;
  private bodies = true;
  private headBytes = true;
  /** The input being pushed (inPlace): its bytes of the response lie in it from 0 to `inPlaceUpTo`, unless `viewed`. */
  private input: Uint8Array | undefined;
  private inPlaceUpTo = 0;
  private viewed = false;

  /** `fields` false: heads are read for their framing only (parseHead), for a reader that does not show them. */
  constructor(
    private requestMethod: string,
    private sink: ResponseSink,
    private fields = true,
  ) {
    this.take(sink);
  }

  private take(sink: ResponseSink): void {
    this.raw = sink.raw !== undefined;
    this.inPlace = this.raw && sink.inPlace === true;
    this.bodies = sink.readsBody !== false;
    this.headBytes = sink.readsHeadBytes !== false;
  }

  /**
   * For an inPlace sink, after a push: the response's bytes in that input
   * are its first inPlaceEnd bytes (0: none); -1 when raw() was handed them
   * instead.
   */
  get inPlaceEnd(): number {
    return this.viewed ? -1 : this.inPlaceUpTo;
  }

  /** Ready for the next response on the same connection: one parser a connection, not one a request. */
  reset(requestMethod: string, sink: ResponseSink, fields = true): void {
    this.requestMethod = requestMethod;
    this.sink = sink;
    this.fields = fields;
    this.take(sink);
    this.phase = "head";
    this.heads.reset();
    this.remaining = 0;
    this.chunked = undefined;
    this.interim = 0;
    this.started = false;
    this.overflow = false;
    this.endedAt = -1;
  }

  get complete(): boolean {
    return this.phase === "done";
  }

  /** Made with the first chunked body: most responses have a length. */
  private deliverChunk: ((piece: Uint8Array) => void) | undefined;

  /** Stops handing anything to the sink (its consumer has gone). */
  stop(): void {
    if (this.phase !== "done") this.phase = "failed";
  }

  /** The response's bytes `src[from, to)`, as they came, to an inPlace sink's count or to raw(). */
  private rawBytes(src: Uint8Array, from: number, to: number, part: "interim" | "head" | "body"): void {
    if (this.inPlace && !this.viewed) {
      if (src === this.input && from === this.inPlaceUpTo) {
        this.inPlaceUpTo = to;
        return;
      }
      // not where the count is (a head gathered from earlier inputs): this input's bytes go to raw() from here on
      this.viewed = true;
      if (this.inPlaceUpTo > 0) this.sink.raw!(this.input!.subarray(0, this.inPlaceUpTo), "body");
    }
    this.sink.raw!(from === 0 && to === src.byteLength ? src : src.subarray(from, to), part);
  }

  /** A piece of the body, src[from, to), to the sink: as a place in the input when it takes one. */
  private bodyPiece(src: Uint8Array, from: number, to: number): void {
    const sink = this.sink;
    if (sink.bodyIn) sink.bodyIn(src, from, to);
    else sink.body(from === 0 && to === src.byteLength ? src : src.subarray(from, to));
  }

  /** Feeds received bytes; returns why the response is malformed, if it is. */
  push(bytes: Uint8Array): string | undefined {
    if (!this.inPlace) return this.read(bytes);
    this.input = bytes;
    this.inPlaceUpTo = 0;
    this.viewed = false;
    try {
      return this.read(bytes);
    } finally {
      this.input = undefined;
    }
  }

  private read(bytes: Uint8Array): string | undefined {
    if (bytes.byteLength > 0) this.started = true;
    const { raw, sink, bodies } = this;
    let at = 0;
    while (at < bytes.byteLength) {
      switch (this.phase) {
        case "head": {
          const next = this.readHead(bytes, at);
          if (typeof next === "string") return this.fail(next);
          if (next < 0) return undefined; // the head continues in the next piece
          at = next;
          if (this.complete) this.endedAt = at;
          break;
        }
        case "length": {
          const take = Math.min(this.remaining, bytes.byteLength - at);
          this.remaining -= take;
          if (raw) this.rawBytes(bytes, at, at + take, "body");
          if (bodies) this.bodyPiece(bytes, at, at + take);
          at += take;
          if (this.remaining === 0) {
            this.endedAt = at;
            this.finish();
          }
          break;
        }
        case "chunked": {
          const decoder = this.chunked!;
          const error = decoder.feed(bytes, at, this.deliverChunk!);
          if (error) return this.fail(error);
          const end = decoder.done ? decoder.endedAt : bytes.byteLength;
          if (raw) this.rawBytes(bytes, at, end, "body");
          if (!decoder.done) return undefined;
          at = end;
          this.endedAt = at;
          if (decoder.trailerText) {
            const trailers = trailerFields(decoder.trailerText);
            if (typeof trailers === "string") return this.fail(trailers);
            sink.trailers!(trailers);
          }
          this.finish();
          break;
        }
        case "close": {
          if (raw) this.rawBytes(bytes, at, bytes.byteLength, "body");
          if (bodies) this.bodyPiece(bytes, at, bytes.byteLength);
          return undefined;
        }
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
    const { raw, sink } = this;
    // read for its framing only: from its bytes, without a string, when it is the common well-formed kind,
    // where they lie in the input (no view of them is made unless someone reads them)
    const lean = !this.fields;
    const read = this.heads.read(bytes, at, raw, !lean, true);
    if (read === "incomplete") return -1;
    if (read === "too-large") return `response head larger than ${MAX_HEAD_BYTES / 1024} KiB`;
    if (read === "bare-lf") return "response head lines not ended by CRLF";
    // the head's bytes: gathered from several inputs (a copy), or where they lie in this one
    const src = read.raw ?? bytes;
    const from = read.raw ? 0 : at;
    const to = read.raw ? read.raw.byteLength : read.next;
    // framingOf reads only heads whose every LF follows a CR; any other is searched for a bare one first
    let head: ParsedHead | string | undefined = lean ? framingOf(src, this.requestMethod, from, to) : undefined;
    if (head === undefined) {
      let text = read.text;
      if (lean) {
        const whole = viewOf(src, from, to);
        if (hasBareLf(whole)) return "response head lines not ended by CRLF";
        text = headTextOf(whole);
      }
      head = parseHead(text, this.requestMethod, this.fields);
    }
    if (typeof head === "string") return head;
    if (lean && this.headBytes) head.bytes = viewOf(src, from, to);
    if (head.status < 200 && head.status !== 101) {
      if (++this.interim > MAX_INTERIM) return `more than ${MAX_INTERIM} interim responses`;
      // 100 Continue and friends: the real answer follows
      sink.interim?.(head);
      if (raw) this.rawBytes(src, from, to, "interim");
      return read.next;
    }
    this.begin(head, raw, src, from, to);
    return read.next;
  }

  /** Where a chunked body's pieces go (made here, not in begin(): a closure there would cost every head a scope). */
  private chunkSink(): (piece: Uint8Array) => void {
    return (piece) => {
      if (this.phase === "chunked" && this.bodies) this.sink.body(piece);
    };
  }

  private begin(head: ParsedHead, raw: boolean, src: Uint8Array, from: number, to: number): void {
    // a bodiless answer reads as a body of length 0
    this.phase = head.framing === "none" ? "length" : head.framing;
    this.remaining = head.length;
    if (head.framing === "chunked") {
      this.chunked = new ChunkedDecoder(this.sink.trailers !== undefined);
      this.deliverChunk ??= this.chunkSink();
    }
    this.sink.head(head, src, from, to);
    if (raw) this.rawBytes(src, from, to, "head");
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


/** `src[from, to)`, `src` itself when that is all of it. */
function viewOf(src: Uint8Array, from: number, to: number): Uint8Array {
  return from === 0 && to === src.byteLength ? src : src.subarray(from, to);
}

/** Gathers a trailer section's fields. */
class TrailerList implements FieldVisitor {
  readonly fields: HeaderList = [];
  field(name: string, _lower: string, value: string): void {
    this.fields.push([name, value]);
  }
}

/** A trailer section's lines (each ended by CRLF) as fields, read as a head's are; or why they cannot be. */
function trailerFields(text: string): HeaderList | string {
  const list = new TrailerList();
  return readFields(text, 0, MAX_HEADER_FIELDS, 256, list) === undefined ? list.fields : "malformed trailer section";
}
