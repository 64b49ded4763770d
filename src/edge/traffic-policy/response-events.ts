/**
 * A filtered response whose body is an event stream sse-find-replace
 * rewrites (response-filter.ts, mode "sse"): its head goes at once,
 * without a length (the events' sizes change) and chunked (to an HTTP/1.0
 * visitor: until the connection closes), and its body event by event as
 * it comes (event-stream.ts), compressed after when compress-response
 * chose a coding. Nothing waits for the stream's end: an event is sent as
 * soon as its blank line is read.
 */
import type { Coding, StreamReplacement } from "../../policy/index.ts";
import { DEFAULT_SSE_EVENT_BYTES } from "./body-reading.ts";
import { EventStreamRewriter } from "./event-stream.ts";
import { LAST_CHUNK } from "./response-framing.ts";
import { RewrittenResponse } from "./response-rewrite.ts";

export abstract class EventsResponse extends RewrittenResponse {
  /** The events' rewriter (mode "sse"). */
  private events: EventStreamRewriter | undefined;

  protected override releaseHeld(): void {
    super.releaseHeld();
    this.events?.cancel();
  }

  /** The head of a body rewritten event by event, and the rewriter its pieces go through. */
  protected streamEvents(headers: [string, string][], coding: Coding | undefined, rules: readonly StreamReplacement[]): void {
    const reading = this.policy.reading;
    this.events = new EventStreamRewriter(rules, reading?.sseEventMaxBytes ?? DEFAULT_SSE_EVENT_BYTES, reading?.memory, this.run.facts.tunnel.name);
    const fields: [string, string][] = [];
    for (const field of headers) {
      const lower = field[0].toLowerCase();
      if (lower === "transfer-encoding" || lower === "content-length" || lower === "trailer") continue;
      // another body than the service's, maybe: its strong validator no longer names it byte for byte
      if (lower === "etag" && !field[1].startsWith("W/")) fields.push([field[0], `W/${field[1]}`]);
      else fields.push(field);
    }
    if (coding !== undefined) this.compressed(fields, coding);
    else this.newlyFramed(fields);
    this.mode = "sse";
  }

  /** A piece of the body (its framing taken off): the events it ends, rewritten, on their way. */
  protected eventPiece(piece: Uint8Array): void | Promise<void> {
    return this.send(this.events!.push(piece));
  }

  /** The body ended: what is left of it, and the body's end. */
  protected eventsEnd(): void | Promise<void> {
    const rest = this.events!.end();
    this.events = undefined;
    const sent = this.send(rest);
    const compressor = this.compressor;
    const finish = async () => {
      if (this.cancelled) return;
      if (compressor) {
        const tail = await compressor.end();
        if (this.cancelled) return;
        this.chunk(tail);
      }
      if (!this.closeDelimited) this.out.write(LAST_CHUNK);
      this.out.finished();
    };
    if (sent instanceof Promise || compressor) return Promise.resolve(sent).then(finish);
    return void finish();
  }

  private send(made: Uint8Array[]): void | Promise<void> {
    if (made.length === 0) return;
    const bytes = made.length === 1 ? made[0]! : Buffer.concat(made);
    if (!this.compressor) return this.chunk(bytes);
    return this.compressor.push(bytes).then((packed) => {
      if (!this.cancelled) this.chunk(packed);
    });
  }
}
