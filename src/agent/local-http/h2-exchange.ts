/**
 * One visitor request carried to a service that speaks HTTP/2
 * (--upstream-protocol h2c, or h2 over TLS) on a stream of the service's
 * one connection (h2-services.ts), and its response back into the h1
 * stream as HTTP/1.1 (h2-response.ts). What the edge reads is what an
 * HTTP/1.1 service would have sent it, so an edge of any version carries
 * it, to HTTP/1.1 visitors as to HTTP/2 ones.
 *
 * Both directions stream, for gRPC's streaming calls as for any upload or
 * download:
 *
 * - the request body goes on as the tunnel stream delivers it, its
 *   HTTP/1.1 framing taken off (request-body.ts), each piece a DATA frame
 *   as the service's windows allow; its credit returns to the edge once
 *   the pieces went to the socket, so a slow service holds the visitor
 *   back, not the agent's memory;
 * - each DATA frame of the response goes into the tunnel stream as it
 *   comes (a chunk when the body is chunked), and the service's window for
 *   the stream reopens only as the tunnel stream takes the bytes.
 *
 * A request the service never processed (REFUSED_STREAM, or past a
 * GOAWAY's last stream) goes once more, on the service's next connection,
 * when none of its body had been taken; any other end before a response is
 * a 502 with its reason, and one during a response cuts it (the stream is
 * reset), as for an HTTP/1.1 service.
 */
import { RequestBodyReader } from "../../http/request-body.ts";
import { parseHead, type BodyFraming, type ParsedHead } from "../../http/response-head.ts";
import type { Fields, H2ClientStream, H2Reset } from "../../http2/client-stream.ts";
import { ErrorCode } from "../../http2/wire.ts";
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import type { ExchangeTap } from "../inspector/tap.ts";
import { localAuthority } from "../local-target.ts";
import { CONTINUE_WAIT_MS, resetReason, type ExchangeReport, type Outcome, type VisitorSide } from "./exchange.ts";
import { h2RequestFields } from "./h2-request.ts";
import { chunkOf, framingFor, h1HeadBytes, h1HeadText, lastChunk } from "./h2-response.ts";
import type { H2Opening, H2Service } from "./h2-services.ts";
import type { LocalService } from "./pool.ts";
import type { LocalRequest } from "./request.ts";

const REPLY = {};
const EMPTY = new Uint8Array(0);
const NO_FIELDS: Fields = [];

export class H2Exchange implements H2Opening {
  readonly fields: Fields;
  readonly endStream: boolean;
  /** Why the request cannot be said in HTTP/2 (CONNECT), found before anything is sent. */
  private readonly problem: string | undefined;
  private readonly requestBody: RequestBodyReader;
  private h2: H2ClientStream | undefined;
  private finished = false;
  private settledAlready = false;
  /** The final head went on: the request's log line is written. */
  private reported = false;
  /** Some of the response went into the tunnel stream. */
  private responding = false;
  /** Something of the visitor's body was taken from the stream: the request cannot go again. */
  private bodyTaken = false;
  /** The body is held back until the service's 100 Continue, or this timer. */
  private gate: ReturnType<typeof setTimeout> | undefined;
  /** The service answered before the gate opened: the body it did not ask for is dropped. */
  private bodyRefused = false;
  /** Body bytes taken from the tunnel stream whose pieces wait for the service's windows: their credit waits. */
  private uncredited = 0;
  /** Response bytes the tunnel stream holds past its credit: the service's window reopens by these once it drains. */
  private owed = 0;
  /** The final head, read back as the edge will read it. */
  private final: ParsedHead | undefined;
  private framing: BodyFraming = "none";
  private contentLength = -1;
  private bodyBytes = 0;
  /** A final head that ends the response waits to go with the response's end, in one write. */
  private headToSend: Uint8Array | undefined;
  /** The response's last byte went without a FIN: the stream carries the visitor connection's next request. */
  keptStream = false;

  constructor(
    private readonly stream: Stream,
    private readonly service: H2Service,
    address: LocalService,
    private readonly request: LocalRequest,
    private readonly report: ExchangeReport,
    private readonly visitor: VisitorSide,
    private readonly tap: ExchangeTap | undefined,
    /** This is the request's second attempt: it does not go a third time. */
    private readonly retry: boolean,
  ) {
    const { head } = request;
    this.requestBody = new RequestBodyReader(head.framing, head.length);
    this.endStream = this.requestBody.done;
    const fields = h2RequestFields(request, address.upstreamProtocol === "h2" ? "https" : "http", localAuthority(address));
    this.fields = typeof fields === "string" ? NO_FIELDS : fields;
    this.problem = typeof fields === "string" ? fields : undefined;
  }

  /** Starts the exchange; the visitor side hears how it settled (VisitorSide.settled). */
  run(): void {
    if (this.problem !== undefined) return this.fail(this.problem);
    this.stream.onDrain = this.visitor.drained;
    this.service.open(this);
    if (this.visitor.ended) this.visitorEnded();
  }

  // -- the stream to the service ---------------------------------------------------------------------

  opened(h2: H2ClientStream): void {
    if (this.finished) return h2.reset(ErrorCode.CANCEL);
    this.h2 = h2;
    if (this.request.head.expectContinue && !this.requestBody.done) this.gate = setTimeout(() => this.openBody(), CONTINUE_WAIT_MS);
    else this.openBody();
  }

  failed(why: string): void {
    this.fail(why);
  }

  // -- the request body, from the tunnel stream to the service --------------------------------------------

  private openBody(): void {
    clearTimeout(this.gate);
    this.gate = undefined;
    // a request whose FIN came with it (no body, most of them) has nothing more to deliver
    if (this.finished || (this.visitor.ended && this.requestBody.done)) return;
    this.stream.onData = this.visitor.body;
  }

  takeBody(chunk: Uint8Array): void {
    // the response is over, or the service refused the body: the rest of it has nowhere to go
    if (this.finished || this.bodyRefused) return this.stream.consumed(chunk.byteLength);
    this.bodyTaken = true;
    if (this.requestBody.done) return this.fail("the request went on past its end");
    const error = this.requestBody.feed(chunk, this.sendPiece);
    if (error) return this.fail(`the request body is malformed: ${error}`);
    // anything past the body would be read by the service as a request of its own
    if (this.requestBody.done && this.requestBody.endedAt < chunk.byteLength) return this.fail("the request went on past its end");
    this.uncredited += chunk.byteLength;
    if (this.requestBody.done) this.h2!.end();
    // credit only once nothing of the body waits: a chunk of framing alone must not return an earlier chunk's
    if (this.h2!.pendingBytes === 0) this.credit();
  }

  private readonly sendPiece = (piece: Uint8Array): void => {
    this.tap?.requestChunk(piece);
    this.h2!.write(piece);
  };

  /** The edge's FIN: the request is all here. */
  visitorEnded(): void {
    if (this.finished || this.bodyRefused || this.requestBody.done) return;
    this.fail("the request ended before its body did");
  }

  /** The request body's pieces that waited all went out: their credit returns. */
  drained(): void {
    this.credit();
  }

  private credit(): void {
    if (this.uncredited === 0) return;
    this.stream.consumed(this.uncredited);
    this.uncredited = 0;
  }

  // -- the response, from the service to the tunnel stream ---------------------------------------------

  head(status: number, fields: [string, string][], endStream: boolean): void {
    if (this.finished) return;
    if (status < 200) {
      if (status === 100 && this.gate !== undefined) this.openBody();
      // informational answers go on as HTTP/1.1's (a 103's links with it)
      this.forward(h1HeadBytes(h1HeadText(status, fields, "none", -1)), false);
      return;
    }
    const { method, minor } = this.request.head;
    const length = contentLengthOf(fields);
    const framing = framingFor(method, status, length, endStream, minor === 0);
    const text = h1HeadText(status, fields, framing, length);
    // read back as the edge reads it: what it would refuse (too many fields, a name too long) is a 502 that says why
    const head = parseHead(text, method, false);
    if (typeof head === "string") return this.fail(`the service's response cannot be said in HTTP/1.1: ${head}`);
    this.final = head;
    this.framing = framing;
    this.contentLength = length < 0 ? 0 : length;
    if (this.gate !== undefined) {
      // answered without a 100 Continue: the service does not want the body (RFC 9110 §10.1.1)
      clearTimeout(this.gate);
      this.gate = undefined;
      this.bodyRefused = true;
      this.stream.onData = this.visitor.body;
    }
    this.reported = true;
    this.report.responded(head);
    this.tap?.response(status, fields);
    const bytes = h1HeadBytes(text);
    if (endStream) this.headToSend = bytes;
    else this.forward(bytes, false);
  }

  data(chunk: Uint8Array): void {
    if (this.finished) return;
    if (this.framing === "none") return this.fail("the service sent a body where HTTP/1.1 has none (HEAD, 204, 304)");
    if (this.framing === "length" && (this.bodyBytes += chunk.byteLength) > this.contentLength) return this.fail("the service sent more body than its content-length");
    this.tap?.responseChunk(chunk);
    if (this.forward(this.framing === "chunked" ? chunkOf(chunk) : chunk, false)) this.h2!.consumed(chunk.byteLength);
    else this.owed += chunk.byteLength;
  }

  end(trailers: [string, string][] | undefined): void {
    if (this.finished) return;
    if (this.framing === "length" && this.bodyBytes !== this.contentLength) return this.fail("the service's body is shorter than its content-length");
    let last = this.framing === "chunked" ? lastChunk(trailers) : EMPTY;
    if (this.headToSend) last = last.byteLength === 0 ? this.headToSend : Buffer.concat([this.headToSend, last]);
    this.headToSend = undefined;
    this.forward(last, true);
    this.tap?.done();
    this.complete();
  }

  reset(reset: H2Reset): void {
    if (this.finished) return;
    // never processed: nothing of it was lost, so it may go again (once), on the service's next connection
    if (reset.unprocessed && !this.retry && !this.bodyTaken && !this.responding) {
      this.stop();
      this.stream.onData = undefined; // whatever arrives meanwhile waits in the stream for the next attempt
      return this.settle("stale");
    }
    this.fail(reset.why);
  }

  /** The tunnel stream took what was queued: the service may send the stream more. */
  streamDrained(): void {
    if (this.owed === 0 || !this.h2) return;
    this.h2.consumed(this.owed);
    this.owed = 0;
  }

  /** Bytes of the response into the tunnel stream, its first ones with REPLY in one message; `end`: its last. False when the stream holds them past its credit. */
  private forward(piece: Uint8Array, end: boolean): boolean {
    this.responding = true;
    if (this.visitor.replied) return this.write(piece, end);
    this.visitor.replied = true;
    const stream = this.stream;
    return stream.cork(() => {
      stream.reply(REPLY);
      return this.write(piece, end);
    });
  }

  private write(piece: Uint8Array, end: boolean): boolean {
    const stream = this.stream;
    if (!end) return stream.write(piece);
    // the last byte: the FIN goes with it unless the stream carries another request
    this.keptStream = this.mayCarryAnother();
    if (!this.keptStream) {
      if (piece.byteLength > 0) stream.end(piece);
      else stream.end();
      return true;
    }
    if (piece.byteLength > 0) stream.write(piece);
    stream.onData = undefined; // what comes next is the next request's, read by forward.ts
    return true;
  }

  /** Whether a kept stream can carry the visitor connection's next request after this response. */
  private mayCarryAnother(): boolean {
    return this.visitor.keep && !this.visitor.ended && this.request.head.keepAlive && this.final !== undefined && this.final.keepAlive && this.requestBody.done && !this.bodyRefused;
  }

  // -- the end ---------------------------------------------------------------------------------------

  /** The visitor has gone: the stream to the service goes too. */
  abandon(code: string): void {
    if (this.finished) return;
    this.stop();
    this.tap?.failed(resetReason(code));
    if (!this.reported) this.report.cancelled();
    this.settle("done");
  }

  /** The response is whole: what is left of the request (a body the service answered before it ended) is not sent. */
  private complete(): void {
    this.stop();
    this.settle("done");
  }

  /** The response ends here: the tunnel stream is reset with why (before any byte, the edge answers 502 with it). */
  private fail(why: string): void {
    if (this.finished) return;
    this.stop();
    if (this.responding || !this.visitor.noAnswer(why)) this.stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
    this.tap?.failed(why);
    if (!this.reported) this.report.failed(why);
    this.settle("done");
  }

  private settle(outcome: Outcome): void {
    if (this.settledAlready) return;
    this.settledAlready = true;
    this.visitor.settled(outcome);
  }

  private stop(): void {
    this.finished = true;
    clearTimeout(this.gate);
    this.gate = undefined;
    this.stream.onDrain = undefined;
    // the service's stream ends with the exchange (a no-op once both sides ended); one not opened yet stops waiting
    if (this.h2) this.h2.reset(ErrorCode.CANCEL);
    else this.service.cancel(this);
    // body bytes that never went: their credit must not go missing, or the edge waits for it forever
    this.credit();
  }
}

/** The response's Content-Length (one value: response-fields.ts checked that they agree), or -1. */
function contentLengthOf(fields: readonly (readonly [string, string])[]): number {
  for (const [name, value] of fields) if (name === "content-length") return Number(value);
  return -1;
}
