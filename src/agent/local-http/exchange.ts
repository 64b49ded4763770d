/**
 * One attempt at a visitor request: carried to the local service over one
 * connection, and its response back, as bytes both ways (an "h1" stream):
 *
 * - the head goes in one write; the body follows as the stream delivers
 *   it, exactly as the visitor framed it, and its credit returns only once
 *   the socket has taken it, so a slow service holds the visitor back
 *   instead of the agent's memory;
 * - the response goes into the stream as the service sends it: REPLY `{}`
 *   with its first bytes (corked with them: one message), one DATA write
 *   per socket read, cut where the response ends, and the FIN after its
 *   last byte; the socket is not read while the stream is out of credit.
 *   The parser only follows the bytes, to find that end (and the head that
 *   the log and the inspector show). The first bytes go once the first head
 *   (an interim one, or the final) has been read whole, so a broken head
 *   is a 502 with its reason; a head in one read, the usual case, goes at
 *   once.
 *
 * After a 101 the connection carries another protocol and leaves the pool
 * for good: switched.ts pipes it both ways.
 */
import { RequestBodyReader } from "../../http/request-body.ts";
import { responseFields, switchRefusal } from "../../http/upgrade.ts";
import type { ParsedHead } from "../../http/response-head.ts";
import type { HeaderList } from "../../protocol/messages.ts";
import type { ResponseParser, ResponseSink } from "../../http/response-reader.ts";
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import { HeadText, type ExchangeTap } from "../inspector/tap.ts";
import type { ConnectionUser, LocalConnection } from "./connection.ts";
import type { ConnectionPool } from "./pool.ts";
import type { LocalRequest } from "./request.ts";
import { pipeSwitched } from "./switched.ts";

export interface ExchangeReport {
  /** The final response head (a 101 included) went on to the edge: the moment the request log measures. */
  responded(head: ParsedHead): void;
  /** The stream was reset before a final head went on: no response, for this reason. */
  failed(why: string): void;
  /** The visitor left (or the edge gave up) before a final head went on. */
  cancelled(): void;
  /** After a 101: the switched connection is over, both ways. */
  switchedClosed?(): void;
}

/**
 * How long a request with `Expect: 100-continue` holds its body back for the
 * service's answer, as curl waits: a service that answers at once (401,
 * 413) is not sent a body it refuses, and one that ignores the expectation
 * gets the body after this.
 */
export const CONTINUE_WAIT_MS = 1_000;

/** "stale": a pooled connection the service had already closed; nothing of the request was lost, so it may go again. */
export type Outcome = "done" | "stale";

/** What the visitor's side of the stream has said, heard once across the attempts; and the stream's handlers, made once. */
export interface VisitorSide {
  /** The stream's onData while a request's body is read: it passes the bytes to the exchange under way. */
  readonly body: (chunk: Uint8Array) => void;
  /** The stream's onDrain while an exchange runs. */
  readonly drained: () => void;
  /** The exchange is over: "stale" asks for another attempt. */
  settled(outcome: Outcome): void;
  /** A connection ready for another request: true if the stream keeps it for its next one (else it goes to the pool). */
  hold(conn: LocalConnection): boolean;
  /** The stream's response parser, ready for a response to `method` told to `sink`: one a stream, not one a request. */
  parserFor(method: string, sink: ResponseSink): ResponseParser;
  /** The edge's FIN came: every byte of the request has been delivered (on a kept stream: no request follows). */
  ended: boolean;
  /** The stream was opened with `keep`: after the response it may carry the visitor connection's next request. */
  keep: boolean;
  /** REPLY went (once a stream, with its first response's first bytes). */
  replied: boolean;
  /** Nothing of a response went: answer on the stream that there is none (true), or leave it to the stream's reset (false). */
  noAnswer(why: string): boolean;
}

const REPLY = {};
/** The reader of every request without a body: it is done from the start and never changes. */
const NO_BODY = new RequestBodyReader("none", 0);

/** A stream's reset code as the inspector shows why a request ended short. */
export function resetReason(code: string): string {
  if (code.startsWith(WireError.UPSTREAM_FAILED)) return code.slice(WireError.UPSTREAM_FAILED.length).trim() || "the local service failed";
  if (code === WireError.CANCELLED) return "cancelled (the visitor left)";
  return code;
}

/** Where the request body's pieces go for the inspector. */
function tapsBody(tap: ExchangeTap): (piece: Uint8Array) => void {
  return (piece) => tap.requestChunk(piece);
}

/** How to read a response head's fields, when the inspector is asked for them. */
function fullHeaders(head: ParsedHead, method: string): HeaderList | HeadText | Uint8Array {
  // its text as read, or its bytes (the capture copies them: the buffer is the socket's); its fields when asked
  return head.text !== undefined ? new HeadText(head.text, method) : (head.bytes ?? head.headers);
}

export class Exchange implements ConnectionUser, ResponseSink {
  private readonly parser: ResponseParser;
  private readonly requestBody: RequestBodyReader;
  private finished = false;
  /** A head (interim or final) has been read whole: from here on, bytes go on as they come. */
  private headSeen = false;
  /** The first bytes of a head that came in pieces (copies: at most MAX_HEAD_BYTES and one read). */
  private held: Uint8Array[] | undefined;
  /** The final head (not an interim one) came. */
  private final: ParsedHead | undefined;
  /** The final head was reported (and went on): the request's log line is written. */
  private reported = false;
  /** The final head is a 101: the connection switches protocols after it. */
  private switching = false;
  /** Why the response, well-formed as HTTP, cannot be passed on. */
  private broken: string | undefined;
  /** Something of the visitor's body was taken from the stream: the request cannot go again. */
  private bodyTaken = false;
  /** The body is held back until the service's 100 Continue, or this timer. */
  private gate: ReturnType<typeof setTimeout> | undefined;
  /** The service answered before the gate opened: the body it did not ask for is dropped. */
  private bodyRefused = false;
  /** Asked to switch: the request's fields, read for the 101's check (http/upgrade.ts). */
  private readonly switchAsked: [string, string][] | undefined;
  /** Some of the response went into the stream. */
  private responding = false;
  /** Body bytes handed to the connection but not yet taken by the socket: their credit waits. */
  private uncredited = 0;
  /** The response's last byte went without a FIN: the stream carries the visitor connection's next request. */
  keptStream = false;
  /** ResponseSink: the inspector's tap reads the body's pieces and the head's bytes. */
  readonly readsBody: boolean;
  readonly readsHeadBytes: boolean;

  constructor(
    private readonly stream: Stream,
    private readonly conn: LocalConnection,
    private readonly request: LocalRequest,
    private readonly pool: ConnectionPool,
    private readonly report: ExchangeReport,
    private readonly visitor: VisitorSide,
    private readonly tap: ExchangeTap | undefined,
  ) {
    // the head is read for its framing; the inspector reads its fields when someone looks (it is shown
    // the head's bytes and the body's pieces: without an inspector, no view of them is made), and so
    // does the check of a 101 that answers a request to switch
    this.readsBody = tap !== undefined;
    this.readsHeadBytes = request.head.upgrade !== undefined || (tap !== undefined && tap.responseHeadIn === undefined);
    this.parser = visitor.parserFor(request.head.method, this);
    this.requestBody = request.head.framing === "none" ? NO_BODY : new RequestBodyReader(request.head.framing, request.head.length);
    // a head that asks to switch carries every field (request.ts withAllowedSwitch read them, once)
    if (request.head.upgrade !== undefined) this.switchAsked = request.head.fields;
  }

  /** Starts the exchange; the visitor side hears how it settled (VisitorSide.settled). */
  run(): void {
    const { stream, conn } = this;
    conn.user = this;
    if (conn.closed) {
      // the service closed it while we waited for the connect to finish
      this.lost(undefined);
      return;
    }
    stream.onDrain = this.visitor.drained;
    conn.write(this.request.bytes);
    if (this.request.head.expectContinue && !this.requestBody.done) this.holdBody();
    else this.openBody();
    if (this.visitor.ended) this.visitorEnded();
  }

  /** The stream took what was queued: the service's bytes may be read again. */
  streamDrained(): void {
    this.conn.resume();
  }

  private settledAlready = false;

  private settle(outcome: Outcome): void {
    if (this.settledAlready) return;
    this.settledAlready = true;
    this.visitor.settled(outcome);
  }

  /** The visitor has gone: the connection goes too, mid-request, so it is never reused. */
  abandon(code: string): void {
    if (this.finished) return;
    this.stop();
    this.conn.destroy();
    this.tap?.failed(resetReason(code));
    if (!this.reported) this.report.cancelled();
    this.settle("done");
  }

  // -- the request body, from the stream to the socket -----------------------------------------

  /** The body waits for the service's 100 Continue, at most CONTINUE_WAIT_MS. */
  private holdBody(): void {
    this.gate = setTimeout(() => this.openBody(), CONTINUE_WAIT_MS);
  }

  private openBody(): void {
    if (this.gate !== undefined) clearTimeout(this.gate);
    this.gate = undefined;
    // a request whose FIN came with it (no body, most of them) has nothing more to deliver
    if (this.finished || (this.visitor.ended && this.requestBody.done)) return;
    // a switch's request is all here: what follows waits in the stream until its answer is judged
    if (this.requestBody.done && this.switchAsked) return;
    this.stream.onData = this.visitor.body;
  }

  /** The inspector's copy of the request body, made only when there is one to take it. */
  private tapBody: ((piece: Uint8Array) => void) | undefined;

  takeBody(body: Uint8Array): void {
    let chunk = body;
    // the response is over, or the service refused the body: the rest of it has nowhere to go
    if (this.finished || this.bodyRefused) return this.stream.consumed(chunk.byteLength);
    this.bodyTaken = true;
    let pastAt = 0; // where in the chunk the bytes past the request's end begin
    if (!this.requestBody.done) {
      if (this.tap) this.tapBody ??= tapsBody(this.tap);
      const error = this.requestBody.feed(chunk, this.tapBody);
      if (error) return this.fail(`the request body is malformed: ${error}`);
      pastAt = this.requestBody.done ? this.requestBody.endedAt : chunk.byteLength;
    }
    if (pastAt < chunk.byteLength) {
      // past the request's end: anything but a switch's would be read by the service as a request of its own
      if (!this.switchAsked) return this.fail("the request went on past its end");
      // the new protocol's first bytes, sent before the 101: never the service's before the 101 is
      // judged; they wait in the stream (its window bounds them), for the pipe (switched.ts) or, after
      // any other answer, as the next request's
      this.stream.onData = undefined;
      this.stream.unread(chunk.subarray(pastAt));
      if (pastAt === 0) return;
      chunk = chunk.subarray(0, pastAt);
    }
    this.uncredited += chunk.byteLength;
    if (this.conn.write(chunk)) this.credit();
  }

  /** The edge's FIN: the request is all here. */
  visitorEnded(): void {
    if (this.finished || this.bodyRefused || this.requestBody.done) return;
    this.fail("the request ended before its body did");
  }

  private credit(): void {
    if (this.uncredited === 0) return;
    this.stream.consumed(this.uncredited);
    this.uncredited = 0;
  }

  // -- connection events -------------------------------------------------------------------------

  received(bytes: Uint8Array): void {
    if (this.finished) return;
    const error = this.parser.push(bytes);
    if (this.finished) return; // the push opened the body's gate, and the body failed
    if (error ?? this.broken) return this.fail(error ?? this.broken!);
    // the log's line for the final head, once it is sure to go on (a read that failed is not passed on)
    if (this.final && !this.reported) {
      this.reported = true;
      this.report.responded(this.final);
    }
    let piece = bytes;
    let offset = 0;
    if (!this.headSeen) {
      // a head that comes in pieces goes on whole, once read: the edge is given well-formed heads
      // only, and one that is not (or too long) is a 502 that says why, not a response cut short
      (this.held ??= []).push(new Uint8Array(bytes)); // a copy: Buffer's slice() is a view
      return;
    }
    if (this.held) {
      offset = this.held.reduce((n, b) => n + b.byteLength, 0);
      piece = Buffer.concat([...this.held, bytes]);
      this.held = undefined;
    }
    if (this.switching) {
      // the 101 head and whatever followed it in this read: the new protocol's first bytes
      this.forward(piece, false);
      const after = offset + this.parser.endedAt;
      if (after < piece.byteLength) this.tap?.switchedBytes("service", piece.subarray(after));
      return this.switchOver();
    }
    if (!this.parser.complete) return this.forward(piece, false);
    const end = offset + this.parser.endedAt;
    this.forward(end === piece.byteLength ? piece : piece.subarray(0, end), true);
    this.complete();
  }

  drained(): void {
    this.credit();
  }

  lost(error: Error | undefined): void {
    if (this.finished) return;
    const why = this.parser.closed(); // a body read until close ends here
    if (this.parser.complete) {
      this.stream.end();
      return this.complete();
    }
    if (!this.parser.started && this.conn.served > 0 && !this.bodyTaken) {
      // the service closed this kept-alive connection just as we reused it: it saw nothing it would answer
      this.stop();
      this.stream.onData = undefined; // whatever arrives meanwhile waits in the stream for the next attempt
      return this.settle("stale");
    }
    this.fail((error as { code?: string } | undefined)?.code === "ECONNRESET" ? "the local service reset the connection" : (why ?? "the local service closed the connection"));
  }

  // -- the response, from the socket to the stream -----------------------------------------------

  /** Bytes of the response into the stream; the stream's first ones with REPLY, in one message; `end`: its last. */
  private forward(piece: Uint8Array, end: boolean): void {
    this.responding = true;
    if (this.visitor.replied) return this.write(piece, end);
    this.visitor.replied = true;
    this.replyWith(piece, end);
  }

  /** REPLY and the first bytes, corked (a function of its own: a closure in forward() would cost every call a scope). */
  private replyWith(piece: Uint8Array, end: boolean): void {
    const stream = this.stream;
    stream.cork(() => {
      stream.reply(REPLY);
      this.write(piece, end);
    });
  }

  private write(piece: Uint8Array, end: boolean): void {
    if (!end) {
      if (!this.stream.write(piece)) this.conn.pause(); // out of credit: the service waits, not our memory
      return;
    }
    // the last byte: the FIN goes with it unless the stream carries another request, so the
    // edge knows which, at the response's end, before it sends another
    this.keptStream = this.mayCarryAnother();
    if (!this.keptStream) return this.stream.end(piece);
    this.stream.write(piece);
    this.stream.onData = undefined; // what comes next is the next request's, read by forward.ts
  }

  /** Whether a kept stream can carry the visitor connection's next request after this response. */
  private mayCarryAnother(): boolean {
    return (
      this.visitor.keep &&
      !this.visitor.ended &&
      this.request.head.keepAlive &&
      this.final !== undefined &&
      this.final.keepAlive &&
      !this.switching &&
      this.requestBody.done &&
      !this.bodyRefused
    );
  }

  interim(head: ParsedHead): void {
    this.headSeen = true;
    if (head.status === 100 && this.gate !== undefined) this.openBody();
  }

  head(head: ParsedHead, src?: Uint8Array, from?: number, to?: number): void {
    this.headSeen = true;
    // the connection is piped only after a 101 that answers what the request asked (http/upgrade.ts)
    if (head.status === 101) {
      const asked = this.request.head.upgrade;
      const why =
        asked === undefined || !this.switchAsked
          ? "101 Switching Protocols to a request that asked for no upgrade"
          : switchRefusal(asked, this.switchAsked, responseFields(head, this.request.head.method));
      if (why !== undefined) {
        this.parser.stop();
        this.broken = why;
        return;
      }
    }
    if (head.status > 599) {
      // fits a status line, means nothing in HTTP: no visitor can be given it
      this.parser.stop();
      this.broken = `invalid status ${head.status}`;
      return;
    }
    this.final = head;
    if (this.gate !== undefined) {
      // answered without a 100 Continue: the service does not want the body (RFC 9110 §10.1.1)
      clearTimeout(this.gate);
      this.gate = undefined;
      this.bodyRefused = true;
      this.stream.onData = this.visitor.body;
    }
    this.switching = head.status === 101;
    const tap = this.tap;
    if (!tap) return;
    // a head read for its framing: the inspector copies its bytes from where they lie (no view made)
    if (tap.responseHeadIn && head.text === undefined && head.bytes === undefined && src !== undefined) tap.responseHeadIn(head.status, src, from!, to!);
    else tap.response(head.status, fullHeaders(head, this.request.head.method));
  }

  body(piece: Uint8Array): void {
    this.tap?.responseChunk(piece);
  }

  bodyIn(src: Uint8Array, from: number, to: number): void {
    const tap = this.tap;
    if (!tap) return;
    if (tap.responseChunkIn) tap.responseChunkIn(src, from, to);
    else tap.responseChunk(src.subarray(from, to));
  }

  end(): void {
    if (!this.switching) this.tap?.done();
  }

  // -- the end -----------------------------------------------------------------------------------

  /** The response is complete: the connection goes back to the pool if it can carry another request. */
  private complete(): void {
    this.stop();
    const conn = this.conn;
    const reusable =
      this.final!.keepAlive &&
      this.request.head.keepAlive &&
      this.requestBody.done &&
      !this.bodyRefused &&
      !this.parser.overflow &&
      conn.flushed &&
      !conn.closed;
    if (reusable) {
      conn.served++;
      // a kept stream's next request goes on the same connection, as the visitor's goes on the same one to the edge
      if (!this.keptStream || !this.visitor.hold(conn)) this.pool.put(conn);
    } else {
      conn.close();
    }
    this.settle("done");
  }

  /** The response ends here: the stream is reset with why (before any byte, the edge answers 502 with it). */
  private fail(why: string): void {
    if (this.finished) return;
    this.stop();
    this.conn.destroy();
    if (this.responding || !this.visitor.noAnswer(why)) this.stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
    this.tap?.failed(why);
    if (!this.reported) this.report.failed(why);
    this.settle("done");
  }

  /** 101: from here on the connection and the stream are piped to each other. */
  private switchOver(): void {
    this.stop();
    pipeSwitched(this.stream, this.conn, {
      visitorEnded: this.visitor.ended,
      tap: this.tap,
      onClosed: () => {
        this.tap?.done();
        this.report.switchedClosed?.();
      },
    });
    this.settle("done");
  }

  private stop(): void {
    this.finished = true;
    if (this.gate !== undefined) clearTimeout(this.gate);
    this.gate = undefined;
    this.parser.stop();
    this.stream.onDrain = undefined;
    if (this.conn.user === this) this.conn.user = undefined;
    // body bytes the socket never took are as good as discarded: their credit must not go missing, or the edge waits for it forever
    this.credit();
  }
}
