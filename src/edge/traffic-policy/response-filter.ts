/**
 * on_http_response: a response's head judged by the tunnel's policies on
 * its way to the visitor (the tunnel's own first, the operator's last, so
 * theirs have the last word), and its bytes after it as the verdict says:
 *
 * - passed on as they came, the head written anew as the actions left it
 *   (headers added and removed);
 * - compressed (compress-response): the body as the service sent it, its
 *   framing taken off, through the compressor, each piece flushed, sent
 *   chunked (to an HTTP/1.0 visitor: until the connection closes);
 * - replaced (custom-response): the policy's answer, and the service's
 *   body read to its end and dropped.
 * - rewritten event by event (sse-find-replace, on_event_stream_message):
 *   a text/event-stream body sent on as each event ends (response-events.ts),
 *   only the event being read held, up to --policy-sse-event-limit; it
 *   takes the place of response-body-find-replace for such a body.
 * - rewritten (response-body-find-replace): the body held to its end
 *   (response-rewrite.ts: within --policy-response-body-limit and
 *   --policy-body-memory, else it goes on unchanged; its credit goes back
 *   as it is held, nothing being owed to the visitor meanwhile: those caps
 *   bound it, not the window), rewritten, and sent with its head and its
 *   new length, or compressed after.
 *
 * The run is asynchronous, so what the service sends meanwhile waits here,
 * in order; credit for it goes back to the agent only once the visitor's
 * socket took what it became (Outlet.credit), so the stream's window still
 * bounds what is held. Interim answers and a 101 pass at once: no policy
 * judges a switch's answer, and nothing is queued before a final head.
 */
import type { ParsedHead } from "../../http/response-head.ts";
import { responseHeadBytes } from "../../http/response-head.ts";
import type { Policy, Verdict } from "../../policy/index.ts";
import { WorkingResponse } from "../../policy/message.ts";
import { breakersAnswered, breakersEnded } from "./breaker-outcomes.ts";
import { DEFAULT_RESPONSE_BODY_BYTES } from "./body-reading.ts";
import { tellPassed } from "./passed-notes.ts";
import { answerBytes } from "./policy-answer.ts";
import { LAST_CHUNK } from "./response-framing.ts";
import { EventsResponse } from "./response-events.ts";
import { HeldBody } from "./response-rewrite.ts";

/**
 * One response's filter, made for it by the door that reads it (forward.ts,
 * h2/judged-response.ts, cluster/relay.ts): here, what the door hands it
 * and the verdict that decides the rest. Its other parts are classes it
 * extends, one a file, so that a response is still one object with its
 * methods on its prototype: response-rewrite.ts (a body held and
 * rewritten), response-framing.ts (the head, and the body's framing on
 * its way out) and response-steps.ts (the order its steps keep).
 */
export class ResponseFilter extends EventsResponse {
  private ended = false;

  /** Nothing more is sent (the exchange failed or was cut). */
  cancel(): void {
    this.cancelled = true;
    this.releaseHeld();
    // cut before the service's head came (a relayed response broken off): a failure to the circuit breakers
    breakersEnded(this.run);
  }

  // each step runs at once when nothing waits (the usual response: its run did not wait), without
  // a closure; else in its turn after what does (then())

  /** An interim answer (100 Continue...), or a 101's head: on at once (after what waits, if anything does). */
  interim(bytes: Uint8Array): void {
    if (this.tail === undefined && !this.cancelled) return this.out.write(bytes);
    this.then(() => this.out.write(bytes));
  }

  /**
   * The final head: `bytes` as it came, `head` as parsed (for its framing
   * only, or with its fields); `headers`: its fields as the tunnel's
   * header flags left them.
   */
  head(head: ParsedHead, bytes: Uint8Array, headers?: [string, string][]): void {
    // the service's own status, whatever the rules make of it (an HTTP/2 stream's judged response, a relayed one)
    breakersAnswered(this.run, head.status);
    // no policy judges a switch's answer, but the tunnel's header flags set their fields on it, as always
    const layers = head.status !== 101 ? this.policy.responseLayers : this.policy.flags?.has("on_http_response") ? [this.policy.flags] : undefined;
    if (!layers) return this.interim(bytes);
    if (this.tail === undefined && !this.cancelled) {
      let waits: void | Promise<void>;
      try {
        waits = this.judge(head, bytes, headers, layers);
      } catch (err) {
        return this.fail(err);
      }
      if (waits) this.wait(waits);
      return;
    }
    this.then(() => this.judge(head, bytes, headers, layers));
  }

  /** A piece of the body as it came (its framing included). */
  raw(bytes: Uint8Array): void {
    if (this.tail === undefined) {
      if (this.mode === "pass" && !this.cancelled) this.out.write(bytes);
      return;
    }
    this.then(() => {
      if (this.mode === "pass") this.out.write(bytes);
    });
  }

  /** A piece of the body, its framing taken off. */
  body(piece: Uint8Array): void {
    if (piece.byteLength === 0) return;
    if (this.tail === undefined) {
      if (this.mode === "unchunk" && !this.cancelled) this.out.write(piece);
      if (this.mode !== "compress" && this.mode !== "rewrite" && this.mode !== "rechunk" && this.mode !== "sse") return;
    }
    this.then(() => {
      if (this.mode === "unchunk") return this.out.write(piece);
      if (this.mode === "sse") return this.eventPiece(piece);
      if (this.mode === "rechunk") return this.chunk(piece);
      if (this.mode === "rewrite") return this.hold(piece);
      if (this.mode !== "compress") return;
      return this.compressor!.push(piece).then((packed) => {
        if (!this.cancelled) this.chunk(packed);
      });
    });
  }

  /** `n` of the agent's bytes read; their credit after what they made. */
  credit(n: number): void {
    if (this.tail === undefined && !this.cancelled) return this.out.credit(n);
    this.then(() => this.out.credit(n));
  }

  /** The response was read to its end (once; asked again, nothing more). */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    if (this.tail === undefined && this.mode !== "compress" && this.mode !== "rewrite" && this.mode !== "rechunk" && this.mode !== "sse" && !this.cancelled) return this.out.finished();
    this.then(async () => {
      if (this.mode === "rewrite") return this.rewriteEnd();
      if (this.mode === "sse") return this.eventsEnd();
      if (this.mode === "rechunk") this.out.write(LAST_CHUNK);
      if (this.mode === "compress") {
        const rest = await this.compressor!.end();
        if (this.cancelled) return;
        this.chunk(rest);
        if (!this.closeDelimited) this.out.write(LAST_CHUNK);
      }
      this.out.finished();
    });
  }

  /**
   * The response's run through the layers, the tunnel's own first and the
   * operator's last. The service's fields are read only if a rule or an
   * action reads them (fields()): a head read for its framing alone
   * (head.bytes) is read whole then, from its bytes.
   */
  private judge(head: ParsedHead, bytes: Uint8Array, headers: [string, string][] | undefined, layers: readonly Policy[]): void | Promise<void> {
    this.parsed = head;
    this.headBytes = bytes;
    if (head.bytes === undefined) this.whole = head;
    // the filter is the response's facts: its fields read from the head when a rule first needs them
    const response = new WorkingResponse(headers !== undefined ? { status: head.status, headers } : this);
    const verdict = this.run.respond(response, layers);
    if (verdict instanceof Promise) {
      // the bytes are a view of what the agent sent: kept while the run waits
      this.headBytes = bytes.slice();
      return verdict.then((v) => this.judged(v, headers !== undefined));
    }
    this.judged(verdict, headers !== undefined);
  }

  private judged(verdict: Verdict, rewritten: boolean): void {
    if (this.cancelled) return;
    if (this.run.noteTunnel !== undefined) tellPassed(this.run, this.policy, verdict);
    if (verdict.kind === "respond") {
      this.mode = "replace";
      return this.out.write(answerBytes(verdict.response, this.method === "HEAD", !this.parsed!.keepAlive));
    }
    const res = this.run.response!;
    const coding = this.run.compression;
    // sse-find-replace (its action ran only for an event stream the service did not encode): each event rewritten as it comes
    if (res.streamRewrites !== undefined && this.method !== "HEAD" && this.parsed!.framing !== "none") return this.streamEvents(res.headers, coding, res.streamRewrites);
    // response-body-find-replace: the body is held to its end, and the head waits with it (its length is the new body's)
    if (res.bodyRewrites !== undefined && this.method !== "HEAD" && this.parsed!.framing !== "none") {
      this.mode = "rewrite";
      this.rewrites = res.bodyRewrites;
      const reading = this.policy.reading;
      this.held = new HeldBody(reading?.responseMaxBytes ?? DEFAULT_RESPONSE_BODY_BYTES, reading?.memory);
      return;
    }
    if (coding === undefined && this.minor === 0 && this.parsed!.framing === "chunked") return this.unchunked(res.headers);
    if (coding === undefined) {
      this.mode = "pass";
      // fields only added (or none): the head as it came, those after it; else written anew
      const added = rewritten ? undefined : res.appended();
      if (added === undefined) return this.out.write(responseHeadBytes(this.full(), res.headers));
      const raw = this.headBytes!;
      if (added.length === 0) return this.out.write(raw);
      this.out.write(raw.subarray(0, raw.byteLength - 2));
      let text = "";
      for (const [name, value] of added) text += `${name}: ${value}\r\n`;
      return this.out.write(`${text}\r\n`);
    }
    this.compressed(res.headers, coding);
  }
}
