/**
 * An HTTP/2 stream's response through its tunnel's on_http_response rules
 * (those beyond its header flags'): the agent's HTTP/1.1 response is read
 * here and handed to the policies' filter (traffic-policy/response-filter.ts)
 * as any visitor's is, and what the filter leaves (HTTP/1.1 bytes: passed
 * on with a new head, compressed and chunked, or the policy's own answer)
 * goes to the exchange's Outlet, which reads it with the exchange's own
 * parser into HEADERS, DATA and trailers (exchange.ts). Only a tunnel with
 * such rules pays for this; any other's stream reads the agent's bytes
 * directly.
 *
 * Credit: the filter hands each chunk's credit to the Outlet after what it
 * made of it, and the exchange gives it back to the agent once the
 * visitor's stream has sent that, so the agent's stream window still
 * bounds what is held here, in the filter and on the HTTP/2 stream.
 */
import { ResponseParser, type ResponseSink } from "../../http/response-reader.ts";
import type { ParsedHead } from "../../http/response-head.ts";
import type { Stream } from "../../protocol/mux.ts";
import type { LayeredRun } from "../traffic-policy/layered-run.ts";
import { ResponseFilter } from "../traffic-policy/response-filter.ts";
import type { Outlet } from "../traffic-policy/response-steps.ts";
import type { TunnelPolicy } from "../traffic-policy/tunnel-policy.ts";
import type { RequestStream } from "../request-stream.ts";

export class JudgedResponse implements ResponseSink {
  private readonly filter: ResponseFilter;
  /** Reads the agent's bytes: the tunnel stream's parser, read by one request after another. */
  private readonly source: ResponseParser;
  private response: ParsedHead | undefined;
  /** push() is feeding the parser: the response's end waits for the chunk's credit. */
  private pushing = false;

  constructor(carrier: RequestStream, method: string, policy: TunnelPolicy, run: LayeredRun, out: Outlet) {
    // an HTTP/2 visitor reads what an HTTP/1.1 one does: the exchange's parser takes the chunks off
    this.filter = new ResponseFilter(policy, run, method, 1, out);
    const parser = carrier.parser;
    if (parser) parser.reset(method, this, true);
    this.source = parser ?? (carrier.parser = new ResponseParser(method, this, true));
  }

  /** The service answered in a way that lets the agent's connection carry another request. */
  get keepAlive(): boolean {
    return this.response?.keepAlive === true;
  }

  /** The agent's response was read to its end. */
  get complete(): boolean {
    return this.source.complete;
  }

  /** A chunk of the agent's: through the filter, its credit after it; returns why the response is malformed, if it is. */
  push(chunk: Uint8Array, stream: Stream): string | undefined {
    const { source } = this;
    this.pushing = true;
    const error = source.push(chunk);
    this.pushing = false;
    if (error) return error;
    const end = source.complete ? source.endedAt : chunk.byteLength;
    this.filter.credit(end);
    if (source.complete) this.filter.end();
    // past the response's end: not the visitor's
    if (end < chunk.byteLength) stream.consumed(chunk.byteLength - end);
    return undefined;
  }

  /** The agent's side ended: a body read until then ends (and the filter after it); undefined once the response is whole. */
  closed(): string | undefined {
    const why = this.source.closed();
    return this.source.complete ? undefined : (why ?? "its agent ended the response early");
  }

  /** Nothing more goes to the visitor (the exchange failed or was cut). */
  cancel(): void {
    this.filter.cancel();
    this.source.stop();
  }

  // ResponseSink: the agent's response as it is read

  head(head: ParsedHead): void {
    this.response = head;
  }

  body(piece: Uint8Array): void {
    this.filter.body(piece);
  }

  raw(bytes: Uint8Array, part: "interim" | "head" | "body"): void {
    if (part === "interim") this.filter.interim(bytes);
    else if (part === "head") this.filter.head(this.response!, bytes);
    else this.filter.raw(bytes);
  }

  end(): void {
    // during a push, after the chunk's credit (push()); else the agent's end ended a body read until then
    if (!this.pushing) this.filter.end();
  }
}
