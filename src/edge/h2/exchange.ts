/**
 * One HTTP/2 stream carried to a tunnel's agent and its response back.
 * What reaches the agent is what an HTTP/1.1 visitor's request becomes
 * (forward.ts): the head the stream makes (http2/http1.ts), with the edge's
 * X-Forwarded-* and without burrow's own fields, on an "h1" stream (with
 * RelayedMeta for another node's tunnel; one the connection kept from an
 * earlier request when it has one), so that every agent, of this version
 * or an older one, serves it as it serves any request. A body without a
 * length goes chunked, as its head says.
 *
 * The agent's HTTP/1.1 response is read (http/response-reader.ts) and sent
 * as HTTP/2: its head as HEADERS without the connection's fields
 * (http1.ts h2Response), its body as DATA, chunked bodies decoded, and a
 * chunked body's trailer fields as a trailing HEADERS frame (gRPC's
 * grpc-status is one). A 101 cannot be carried: the 502 page.
 *
 * Credit, both ways, per stream: the visitor's stream window reopens only
 * as the tunnel's stream takes its bytes, and the agent's credit returns
 * only once the visitor's stream has sent what it queued. A slow service or
 * a slow visitor holds back this stream alone; what the connection holds
 * for all of its streams is bounded by --h2-max-queued-response.
 *
 * A tunnel with response rules beyond its header flags' has the agent's
 * response judged on its way (judged-response.ts): what the policies leave
 * of it, HTTP/1.1 bytes, is what this exchange's parser reads and frames,
 * with the agent's credit back once the visitor's stream sent it. A tunnel
 * without reads the agent's bytes directly, its flags' header rules (if
 * any) applied to the head here.
 */
import { encodeChunk, LAST_CHUNK } from "../../http/chunked.ts";
import { HOP_BY_HOP } from "../../http/header-list.ts";
import { ResponseParser, type ResponseSink } from "../../http/response-reader.ts";
import { replyHeaders, type ParsedHead } from "../../http/response-head.ts";
import { h2Response } from "../../http2/http1.ts";
import type { H2Stream } from "../../http2/stream.ts";
import { ErrorCode } from "../../http2/wire.ts";
import { log } from "../../log.ts";
import { H2_REQUEST } from "../../metrics/edge-counters.ts";
import type { HeaderList } from "../../protocol/messages.ts";
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import { tellPassed, toldWhenAnswered } from "../traffic-policy/passed-notes.ts";
import { breakersAnswered, breakersEnded } from "../traffic-policy/breaker-outcomes.ts";
import type { Policy } from "../../policy/index.ts";
import { WorkingResponse } from "../../policy/message.ts";
import type { Outlet } from "../traffic-policy/response-steps.ts";
import type { ForwardContext } from "../forward.ts";
import type { HttpVisit } from "../http-door.ts";
import { badGatewayPage, slowServicePage } from "../pages.ts";
import { ResponseTimeout, type ResponseWait } from "../replies.ts";
import type { Tunnel } from "../registry.ts";
import type { RequestStream, StreamUser } from "../request-stream.ts";
import type { H2Session } from "./session.ts";
import type { H2Visit } from "./visit.ts";
import { JudgedResponse } from "./judged-response.ts";

/** Gives a visit the edge's own answer (a page), counted with its time. */
export type Answered = (v: HttpVisit, res: Response) => void;

/** Trailer fields HTTP/2 forbids or that say nothing past the body's end. */
const NOT_TRAILERS: ReadonlySet<string> = new Set([...HOP_BY_HOP, "content-length", "host", "content-encoding", "content-type", "content-range"]);

/** One stream's request and response, on `carrier` (new, or kept from an earlier request: start()'s `headBytes`). */
export class H2Exchange implements StreamUser, ResponseSink {
  private readonly h2: H2Stream;
  private readonly stream: Stream;
  private readonly parser: ResponseParser;
  /** The request's body goes chunked (its client gave no length). */
  private readonly chunked: boolean;
  private requestDone: boolean;
  /** REPLY came; a final head went to the visitor; the response was read to its end; the exchange is over. */
  private responded = false;
  private headSent = false;
  private complete = false;
  private finished = false;
  /** Body bytes of the visitor's the tunnel's stream has not taken yet: their window reopens when it does. */
  private owedToVisitor = 0;
  /** Response bytes the visitor's stream holds: the agent's credit for them returns once they are sent. */
  private owedToAgent = 0;
  /** The visitor's stream said false to a write of the chunk being read. */
  private held = false;
  /** The response's trailer fields (a chunked body's), sent with its end. */
  private trailing: HeaderList | undefined;
  private openBytes = 0;
  /** The service may take another request on the connection the agent used (its response did not say close). */
  private keepAlive = false;
  /** The tunnel's header flags' response rules (its flags layer), applied to each response head here: they never wait. */
  private readonly flags: Policy | undefined;
  private wait: ResponseWait | undefined;
  /** The tunnel's response rules judge the response (judged-response.ts): the agent's bytes go through them, and `parser` reads what they leave. */
  private readonly judged: JudgedResponse | undefined;

  constructor(
    private readonly v: H2Visit,
    private readonly session: H2Session,
    private readonly tunnel: Tunnel,
    private readonly ctx: ForwardContext,
    private readonly carrier: RequestStream,
    private readonly answered: Answered,
  ) {
    this.h2 = v.stream;
    this.stream = carrier.stream;
    this.requestDone = !v.stream.hasBody;
    this.chunked = v.head.framing === "chunked";
    const policy = ctx.policy ? tunnel.policy : undefined;
    // the tunnel's agent is told what its policies did with the request once the response is judged (passed-notes.ts)
    if (policy) toldWhenAnswered(ctx.policy!, tunnel, this.stream.id);
    if (policy?.responseBeyondFlags) {
      // its flags' response rules run in the filter too, first (tunnel-policy.ts responseLayers)
      this.flags = undefined;
      this.judged = new JudgedResponse(carrier, v.head.method, policy, ctx.policy!, this.outlet());
      this.parser = new ResponseParser(v.head.method, this, true);
      return;
    }
    const flags = policy?.flags;
    this.flags = flags?.has("on_http_response") ? flags : undefined;
    // the head's fields are read: they become the HEADERS frame; one parser a tunnel stream, read by one request after another
    const parser = carrier.parser;
    if (parser) parser.reset(v.head.method, this, true);
    this.parser = parser ?? (carrier.parser = new ResponseParser(v.head.method, this, true));
  }

  /** `headBytes`: the request's head, to go as DATA on a kept stream; undefined: it went in the stream's OPEN. */
  start(headBytes: Uint8Array | undefined): void {
    const { h2, stream, tunnel } = this;
    // a pool member's requests in flight, for least-requests (edge/pool.ts)
    if (tunnel.pool) tunnel.inFlight++;
    this.carrier.user = this;
    if (headBytes === undefined) tunnel.countIn(stream.metaBytes);
    this.openBytes = stream.metaBytes;
    this.wait = this.carrier.awaitResponse(tunnel.responseTimeoutMs ?? this.ctx.responseTimeoutMs, this);
    if (headBytes !== undefined) {
      tunnel.countIn(headBytes.byteLength);
      stream.write(headBytes);
    }
    h2.onReset = () => this.visitorReset();
    h2.onDrain = () => this.visitorDrained();
    if (this.requestDone) return;
    // a body read for the traffic policies (edge/traffic-policy/stream-body.ts) goes first: its bytes
    // were credited as they were read; those that came after, as any
    const read = this.v.body;
    if (read) {
      this.v.body = undefined;
      for (const chunk of read.raw) this.carry(chunk);
      for (const chunk of read.after) this.data(chunk);
      if (read.complete || read.ended) return this.requestEnd();
    }
    // a request's trailer fields are not passed on (a proxy may drop them: RFC 9110 §6.5.1)
    h2.onData = (chunk) => this.data(chunk);
    h2.onEnd = () => this.requestEnd();
  }

  // -- the visitor's request body -----------------------------------------------------------------------

  private data(chunk: Uint8Array): void {
    if (this.finished || chunk.byteLength === 0) return;
    const bytes = this.chunked ? encodeChunk(chunk) : chunk;
    this.tunnel.countIn(bytes.byteLength);
    if (this.stream.write(bytes)) this.h2.consumed(chunk.byteLength);
    else this.owedToVisitor += chunk.byteLength;
  }

  /** Body bytes the visitor was credited for already: on to the tunnel's stream, nothing owed back. */
  private carry(chunk: Uint8Array): void {
    if (this.finished || chunk.byteLength === 0) return;
    const bytes = this.chunked ? encodeChunk(chunk) : chunk;
    this.tunnel.countIn(bytes.byteLength);
    this.stream.write(bytes);
  }

  private requestEnd(): void {
    this.requestDone = true;
    if (this.finished) return;
    // a kept stream's next request follows on it: only a stream of its own ends with its request
    const keep = this.carrier.keep;
    if (!this.chunked) return keep ? undefined : this.stream.end();
    this.tunnel.countIn(LAST_CHUNK.byteLength);
    if (keep) this.stream.write(LAST_CHUNK);
    else this.stream.end(LAST_CHUNK);
  }

  /** The tunnel's stream took what waited: the visitor may send more. */
  streamDrained(): void {
    if (this.owedToVisitor === 0) return;
    this.h2.consumed(this.owedToVisitor);
    this.owedToVisitor = 0;
  }

  /** The visitor reset the stream, or its connection went. */
  private visitorReset(): void {
    if (this.finished) return;
    this.finish(true);
    this.stream.reset(WireError.CANCELLED);
  }

  // -- the response's start (replies.ts) ----------------------------------------------------------------

  replied(): void {
    if (this.finished || this.responded || !this.wait?.answered()) return;
    this.responded = true;
    this.tunnel.countOut(this.stream.metaBytes - this.openBytes);
  }

  failed(why: string): void {
    if (this.finished) return;
    log.info("tunnel request failed", { tunnel: this.ctx.host, path: this.v.head.target.split("?")[0], err: why });
    this.failPage(badGatewayPage(this.ctx.host, why));
  }

  timedOut(timeoutMs: number): void {
    if (this.finished) return;
    log.info("tunnel request failed", { tunnel: this.ctx.host, path: this.v.head.target.split("?")[0], err: new ResponseTimeout(timeoutMs).message });
    this.failPage(slowServicePage(this.ctx.host, Math.round(timeoutMs / 1000), Math.round(this.ctx.maxResponseTimeoutMs / 1000)));
  }

  // -- the agent's bytes: an HTTP/1.1 response -------------------------------------------------------

  fromAgent(chunk: Uint8Array): void {
    if (this.finished) return this.stream.consumed(chunk.byteLength);
    if (!this.responded) this.replied();
    this.tunnel.countOut(chunk.byteLength);
    if (this.judged) {
      const error = this.judged.push(chunk, this.stream);
      if (error) this.broken(`its local service sent a malformed response: ${error}`);
      return;
    }
    this.held = false;
    const error = this.parser.push(chunk);
    if (error) return this.broken(`its local service sent a malformed response: ${error}`);
    // a head that could not be carried: the stream was reset, its credit goes nowhere
    if (this.finished && !this.complete) return;
    // what the visitor's stream holds of it is the agent's again once sent (visitorDrained); a whole
    // response's last chunk, at once: a kept stream carries the next request's answer
    if (this.held && !this.complete) this.owedToAgent += chunk.byteLength;
    else this.stream.consumed(chunk.byteLength);
  }

  /** The visitor's stream sent everything it held. */
  private visitorDrained(): void {
    this.held = false;
    if (this.owedToAgent === 0) return;
    this.stream.consumed(this.owedToAgent);
    this.owedToAgent = 0;
  }

  interim(head: ParsedHead): void {
    // 100 Continue, 103 Early Hints: an informational HEADERS frame
    this.h2.respond(head.status, replyHeaders(head));
  }

  head(head: ParsedHead): void {
    // a judged response's is the service's own, whatever the policy answered
    this.keepAlive = this.judged ? this.judged.keepAlive : head.keepAlive;
    if (head.status > 599) return this.refuseHead(`its local service sent an invalid status ${head.status}`);
    breakersAnswered(this.ctx.policy, head.status);
    if (this.ctx.policy?.noteTunnel !== undefined) tellPassed(this.ctx.policy, this.tunnel.policy);
    // with header flags, the fields are as their rules leave them before they become HTTP/2's
    const flagged = this.flags ? this.flagged(head) : head.headers;
    if (!flagged) return this.refuseHead("the tunnel's header rules could not be applied to its response");
    const response = h2Response(this.flags ? { ...head, headers: flagged } : head);
    if (typeof response === "string") return this.refuseHead(`its local service switched protocols for a request that asked for no upgrade`);
    this.ctx.counters.request(H2_REQUEST, head.status, this.ctx.startedAt);
    this.headSent = true;
    // a bodiless answer (HEAD, 204, 304, a length of 0) ends with its HEADERS
    this.h2.respond(response.status, response.fields, head.framing === "none" || (head.framing === "length" && head.length === 0));
  }

  /** The head's fields after the tunnel's flags layer's response rules (when no other layer has response rules: else the filter runs them). */
  private flagged(head: ParsedHead): HeaderList | undefined {
    const run = this.ctx.policy!;
    const verdict = run.respond(new WorkingResponse({ status: head.status, headers: head.headers }), [this.flags!]);
    // the flags' actions never wait, and their response rules only set fields: anything else is a bug, answered 502
    if (verdict instanceof Promise || verdict.kind !== "continue") return undefined;
    return run.response!.headers;
  }

  body(piece: Uint8Array): void {
    if (!this.h2.write(piece)) this.held = true;
  }

  trailers(fields: HeaderList): void {
    const kept: HeaderList = [];
    for (const [name, value] of fields) {
      const lower = name.toLowerCase();
      if (!NOT_TRAILERS.has(lower)) kept.push([lower, value]);
    }
    this.trailing = kept;
  }

  end(): void {
    this.complete = true;
    this.h2.end(this.trailing);
    // a judged response is done once the agent's is read to its end (a policy's answer may come first: judgedEnd)
    if (!this.judged) this.done();
  }

  // -- a response the tunnel's policies judge (judged-response.ts) -------------------------------------

  /** Where the policies' filter sends what it leaves of the response: this exchange's parser, as if the agent had sent it. */
  private outlet(): Outlet {
    return {
      write: (bytes) => {
        if (this.finished) return;
        const error = this.parser.push(typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes);
        if (error) this.broken(`the tunnel's traffic policy made a response that cannot be read: ${error}`);
      },
      credit: (n) => {
        // what the visitor's stream holds of it is the agent's again once sent (visitorDrained); once the
        // response is whole, nothing more goes to the visitor: at once
        if (this.finished || this.complete || (!this.held && this.owedToAgent === 0)) this.stream.consumed(n);
        else this.owedToAgent += n;
      },
      finished: () => this.judgedEnd(),
      broken: (why) => this.broken(why),
    };
  }

  /** The filter sent all it will: a body read until the agent's end ends here too; then the exchange is over. */
  private judgedEnd(): void {
    if (this.finished) return;
    if (!this.parser.complete) {
      const why = this.parser.closed();
      if (!this.parser.complete) return this.broken(why ?? "the tunnel's traffic policy left the response unfinished");
    }
    this.done();
  }

  /** The response is whole on its way to the visitor: the exchange is over, and a kept stream may carry the next request. */
  private done(): void {
    if (this.finished) return;
    this.finish();
    const { carrier, stream } = this;
    carrier.user = undefined;
    this.wait = undefined;
    if (!this.requestDone) {
      // a body still coming that nobody wants now: the agent's side is cancelled, and the client is asked
      // to stop sending (RST_STREAM NO_ERROR, RFC 9113 §8.1) once the response is out
      stream.reset(WireError.CANCELLED);
      if (this.h2.localEnded) this.h2.reset(ErrorCode.NO_ERROR);
      else this.h2.onData = undefined;
      return;
    }
    if (!carrier.keep) return;
    // the stream lives on: the credit of bytes still queued for the visitor goes back now (the engine bounds them)
    if (this.owedToAgent > 0) stream.consumed(this.owedToAgent);
    this.owedToAgent = 0;
    // the agent's FIN, if it cannot carry another request, came with the response's last byte
    if (this.keepAlive && carrier.carries(this.tunnel)) this.session.park(carrier);
    else carrier.drop();
  }

  agentFin(): void {
    if (this.finished || (this.complete && !this.judged)) return;
    if (!this.responded) {
      if (this.wait?.answered()) this.failed("its agent ended the request without an answer");
      return;
    }
    if (this.judged) {
      // the filter ends the exchange once it sent everything (judgedEnd)
      const cut = this.judged.closed();
      if (cut !== undefined) this.broken(cut);
      return;
    }
    // a response read until the connection closes ends here; anything else is cut short
    const why = this.parser.closed();
    if (this.parser.complete) return;
    this.broken(why ?? "its agent ended the response early");
  }

  agentReset(code: string): void {
    // the tunnel's policy on another node closed the visitor's connection: this stream's part of it here (traffic-policy/policy-closed.ts)
    if (code === WireError.POLICY_CLOSED && !this.responded && !this.finished) {
      this.wait?.disarm();
      this.finish();
      return this.v.closedByPolicy();
    }
    this.wait?.resetBy(code); // before the response began: the wait reports it (failed)
    if (this.finished || (this.complete && !this.judged) || !this.responded) return;
    this.broken(code.startsWith(WireError.UPSTREAM_FAILED) ? `the agent could not reach it (${code.slice(WireError.UPSTREAM_FAILED.length).trim() || "reset"})` : "the tunnel's connection closed");
  }

  // -- failures ----------------------------------------------------------------------------------------

  private finish(visitorLeft?: boolean): void {
    this.finished = true;
    // no response head told the circuit breakers: none came (the edge answers 502/504), or the visitor left first
    breakersEnded(this.ctx.policy, visitorLeft);
    this.judged?.cancel();
    if (this.tunnel.pool) this.tunnel.inFlight--;
  }

  /** A response head that cannot be carried: nothing of the response reaches the visitor. */
  private refuseHead(why: string): void {
    this.parser.stop();
    this.broken(why);
  }

  /** Before the response's head reached the visitor: the 502 page; after: the stream is reset. */
  private broken(why: string): void {
    if (this.finished) return;
    if (!this.headSent) return this.failPage(badGatewayPage(this.ctx.host, why));
    log.info("tunnel response broken off", { tunnel: this.ctx.host, err: why });
    this.finish();
    this.stream.reset(WireError.CANCELLED);
    this.h2.reset(ErrorCode.INTERNAL_ERROR);
  }

  private failPage(page: Response): void {
    if (this.finished) return;
    this.finish();
    this.stream.reset(WireError.CANCELLED);
    // a body still coming goes nowhere: the engine asks the client to stop once the page is out
    if (!this.requestDone) this.h2.onData = undefined;
    this.answered(this.v, page);
  }
}
