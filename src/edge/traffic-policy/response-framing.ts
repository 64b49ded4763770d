/**
 * A filtered response's head and how its body goes out after it
 * (response-filter.ts): the head as the service sent it, read whole only
 * when a rule asks for its fields, and the body as it came, without its
 * chunked framing (an HTTP/1.0 visitor), chunked anew, or compressed
 * (to an HTTP/1.0 visitor: until the connection closes).
 */
import { parseHead, responseHeadBytes, type ParsedHead } from "../../http/response-head.ts";
import { createCompressor, type ResponseCompressor } from "../../policy/index.ts";
import type { HeaderPairs } from "../../policy/facts.ts";
import type { LayeredRun } from "./layered-run.ts";
import { ResponseSteps, type Outlet } from "./response-steps.ts";

const CRLF = Buffer.from("\r\n");
export const LAST_CHUNK = Buffer.from("0\r\n\r\n");

/**
 * How the body goes after the head: as it came, its pieces without their
 * chunked framing (an HTTP/1.0 visitor; a body not rewritten after all),
 * chunked anew (a chunked body not rewritten after all), compressed, not
 * at all (replaced), or held until its end to be rewritten
 * (response-body-find-replace), its head with it, or rewritten event by
 * event as it comes (sse-find-replace: response-events.ts).
 */
type Mode = "waiting" | "pass" | "unchunk" | "rechunk" | "compress" | "replace" | "rewrite" | "sse";

export abstract class FramedResponse extends ResponseSteps {
  protected mode: Mode = "waiting";
  protected compressor: ResponseCompressor | undefined;
  /** The visitor cannot read chunks (HTTP/1.0): a compressed body ends with the connection. */
  protected closeDelimited = false;
  /** The response goes out in a form that needs the connection closed after it. */
  closes = false;
  /** The final head: as parsed, its bytes as they came, and read whole once a rule asked for its fields. */
  protected parsed: ParsedHead | undefined;
  protected headBytes: Uint8Array | undefined;
  protected whole: ParsedHead | undefined;

  constructor(
    protected readonly method: string,
    /** The visitor's HTTP/1.minor. */
    protected readonly minor: 0 | 1,
    out: Outlet,
  ) {
    super(out);
  }

  /** The response's facts (policy/facts.ts ResponseFacts): its status, and its fields, read when first asked for. */
  get status(): number {
    return this.parsed!.status;
  }

  get headers(): HeaderPairs {
    return this.full().headers;
  }

  /** The head with every field: a head read for its framing only (its bytes, the blank line included) is read again whole. */
  protected full(): ParsedHead {
    if (this.whole) return this.whole;
    const bytes = this.headBytes!;
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength - 4).toString("latin1");
    const head = parseHead(text, this.method, true);
    // it was read once already, and these are the same bytes
    if (typeof head === "string") throw new Error(`a response head read before does not read again: ${head}`);
    return (this.whole = head);
  }

  /** An HTTP/1.0 visitor reads no chunks: the body's data alone, ended by the connection's end, which the head says. */
  protected unchunked(headers: [string, string][]): void {
    this.mode = "unchunk";
    this.closes = true;
    const kept = headers.filter(([name]) => !/^(transfer-encoding|connection|keep-alive|trailer)$/i.test(name));
    kept.push(["Connection", "close"]);
    this.out.write(responseHeadBytes(this.full(), kept));
  }

  /** The head of a compressed body, and the compressor its pieces go through. */
  protected compressed(headers: [string, string][], coding: NonNullable<LayeredRun["compression"]>): void {
    // compressed: no length (the action took it off), chunked unless the visitor cannot read chunks
    this.mode = "compress";
    this.compressor = createCompressor(coding);
    this.newlyFramed(headers.filter(([n]) => n.toLowerCase() !== "transfer-encoding"));
  }

  /**
   * The head of a body whose length is not known before it ends (`fields`
   * without framing fields): chunked, unless the visitor cannot read
   * chunks (HTTP/1.0): then the body ends with the connection, which the
   * head says.
   */
  protected newlyFramed(fields: [string, string][]): void {
    if (this.minor === 0) {
      this.closeDelimited = true;
      this.closes = true;
      for (let i = fields.length - 1; i >= 0; i--) if (/^(connection|keep-alive)$/i.test(fields[i]![0])) fields.splice(i, 1);
      fields.push(["connection", "close"]);
    } else fields.push(["transfer-encoding", "chunked"]);
    this.out.write(responseHeadBytes(this.full(), fields));
  }

  /** A piece of the body as one chunk (as it is, when the body ends with the connection). */
  protected chunk(bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    if (this.closeDelimited) return this.out.write(bytes);
    this.out.write(Buffer.concat([Buffer.from(`${bytes.byteLength.toString(16)}\r\n`, "latin1"), bytes, CRLF]));
  }
}
