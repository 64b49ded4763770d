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
 *
 * The run is asynchronous, so what the service sends meanwhile waits here,
 * in order; credit for it goes back to the agent only once the visitor's
 * socket took what it became (Outlet.credit), so the stream's window still
 * bounds what is held. Interim answers and a 101 pass at once: no policy
 * judges a switch's answer, and nothing is queued before a final head.
 */
import { STATUS_CODES } from "node:http";
import { responseHeadBytes, type ParsedHead } from "../../http/response-head.ts";
import { log } from "../../log.ts";
import { createCompressor, type ResponseCompressor } from "../../policy/index.ts";
import type { PolicyResponse } from "../../policy/index.ts";
import type { LayeredRun } from "./layered-run.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";

/** Where the filtered bytes go: the visitor's connection (forward.ts), or a stream back to another node (cluster). */
export interface Outlet {
  /** Bytes for the visitor, in order. */
  write(bytes: Uint8Array): void;
  /** `n` bytes of the agent's are dealt with: their credit goes back once what was written before is taken. */
  credit(n: number): void;
  /** The response went out whole. */
  finished(): void;
  /** The run failed (a bug, a compressor's error): the visitor's connection is cut. */
  broken(why: string): void;
}

const CRLF = Buffer.from("\r\n");
const LAST_CHUNK = Buffer.from("0\r\n\r\n");

type Mode = "waiting" | "pass" | "compress" | "replace";

export class ResponseFilter {
  private mode: Mode = "waiting";
  private tail: Promise<void> = Promise.resolve();
  private compressor: ResponseCompressor | undefined;
  /** The visitor cannot read chunks (HTTP/1.0): a compressed body ends with the connection. */
  private closeDelimited = false;
  private cancelled = false;
  private ended = false;
  /** The final head was seen: from now on everything waits its turn. */
  private queued = false;
  /** The response goes out in a form that needs the connection closed after it. */
  closes = false;

  constructor(
    private readonly policy: TunnelPolicy,
    private readonly run: LayeredRun,
    private readonly method: string,
    /** The visitor's HTTP/1.minor. */
    private readonly minor: 0 | 1,
    private readonly out: Outlet,
  ) {}

  /** Nothing more is sent (the exchange failed or was cut). */
  cancel(): void {
    this.cancelled = true;
  }

  /** An interim answer (100 Continue...), or a 101's head: on at once. */
  interim(bytes: Uint8Array): void {
    if (this.queued) return this.then(() => this.out.write(bytes));
    this.out.write(bytes);
  }

  /** The final head, parsed with its fields; `headers`: its fields as the tunnel's header flags left them. */
  head(head: ParsedHead, bytes: Uint8Array, headers = head.headers): void {
    if (head.status === 101) return this.interim(bytes);
    this.queued = true;
    this.then(() => this.judge(head, headers));
  }

  /** A piece of the body as it came (its framing included). */
  raw(bytes: Uint8Array): void {
    this.then(() => {
      if (this.mode === "pass") this.out.write(bytes);
    });
  }

  /** A piece of the body, its framing taken off. */
  body(piece: Uint8Array): void {
    if (piece.byteLength === 0) return;
    this.then(async () => {
      if (this.mode !== "compress") return;
      const packed = await this.compressor!.push(piece);
      if (!this.cancelled) this.chunk(packed);
    });
  }

  /** `n` of the agent's bytes read; their credit after what they made. */
  credit(n: number): void {
    if (!this.queued) return this.out.credit(n);
    this.then(() => this.out.credit(n));
  }

  /** The response was read to its end (once; asked again, nothing more). */
  end(): void {
    if (this.ended) return;
    this.ended = true;
    this.then(async () => {
      if (this.mode === "compress") {
        const rest = await this.compressor!.end();
        if (this.cancelled) return;
        this.chunk(rest);
        if (!this.closeDelimited) this.out.write(LAST_CHUNK);
      }
      this.out.finished();
    });
  }

  /** Runs `step` after everything queued; a failure cuts the connection. */
  private then(step: () => void | Promise<void>): void {
    this.tail = this.tail.then(() => (this.cancelled ? undefined : step())).catch((err) => {
      if (this.cancelled) return;
      this.cancelled = true;
      log.warn("traffic policy's response failed", { err: String(err) });
      this.out.broken("the tunnel's traffic policy could not be applied to the response");
    });
  }

  private async judge(head: ParsedHead, headers: [string, string][]): Promise<void> {
    const layers = this.policy.own ? [this.policy.own, ...[...this.policy.operator].reverse()] : [...this.policy.operator].reverse();
    const verdict = await this.run.respond({ status: head.status, headers }, layers);
    if (this.cancelled) return;
    if (verdict.kind === "respond") {
      this.mode = "replace";
      return this.out.write(answerBytes(verdict.response, this.method === "HEAD", !head.keepAlive));
    }
    const res = this.run.response!;
    const coding = this.run.compression;
    if (coding === undefined) {
      this.mode = "pass";
      return this.out.write(responseHeadBytes(head, res.headers));
    }
    // compressed: no length (the action took it off), chunked unless the visitor cannot read chunks
    this.mode = "compress";
    this.compressor = createCompressor(coding);
    const compressed = res.headers.filter(([n]) => n.toLowerCase() !== "transfer-encoding");
    if (this.minor === 0) {
      // an HTTP/1.0 visitor reads no chunks: the body ends with the connection, which the head says
      this.closeDelimited = true;
      this.closes = true;
      for (let i = compressed.length - 1; i >= 0; i--) if (/^(connection|keep-alive)$/i.test(compressed[i]![0])) compressed.splice(i, 1);
      compressed.push(["connection", "close"]);
    } else compressed.push(["transfer-encoding", "chunked"]);
    this.out.write(responseHeadBytes(head, compressed));
  }

  private chunk(bytes: Uint8Array): void {
    if (bytes.byteLength === 0) return;
    if (this.closeDelimited) return this.out.write(bytes);
    this.out.write(Buffer.concat([Buffer.from(`${bytes.byteLength.toString(16)}\r\n`, "latin1"), bytes, CRLF]));
  }
}

/** A policy's answer in place of the service's: status, fields, Content-Length and body (none to a HEAD, or for a bodiless status). */
export function answerBytes(r: PolicyResponse, head: boolean, close: boolean): Uint8Array {
  const body = typeof r.body === "string" ? Buffer.from(r.body, "utf8") : Buffer.from(r.body);
  const bodiless = r.status < 200 || r.status === 204 || r.status === 304;
  let text = `HTTP/1.1 ${r.status} ${STATUS_CODES[r.status] ?? ""}\r\n`;
  for (const [name, value] of r.headers) {
    const lower = name.toLowerCase();
    // the framing is the edge's to say; a line break would be a field of the policy's making
    if (lower === "content-length" || lower === "transfer-encoding" || lower === "connection" || /[\r\n]/.test(name + value)) continue;
    text += `${name}: ${value}\r\n`;
  }
  if (!bodiless) text += `content-length: ${body.byteLength}\r\n`;
  if (close) text += "connection: close\r\n";
  const headBytes = Buffer.from(`${text}\r\n`, "latin1");
  return bodiless || head || body.byteLength === 0 ? headBytes : Buffer.concat([headBytes, body]);
}
