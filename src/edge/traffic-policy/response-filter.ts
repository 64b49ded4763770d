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
import { STATUS_CODES } from "node:http";
import { parseHead, responseHeadBytes, type ParsedHead } from "../../http/response-head.ts";
import { log } from "../../log.ts";
import { createCompressor, ReplaceFailed, type Replacement, type ResponseCompressor } from "../../policy/index.ts";
import type { Policy, PolicyResponse, Verdict } from "../../policy/index.ts";
import type { HeaderPairs } from "../../policy/facts.ts";
import { WorkingResponse } from "../../policy/message.ts";
import type { LayeredRun } from "./layered-run.ts";
import { breakersAnswered, breakersEnded } from "./breaker-outcomes.ts";
import { tellPassed } from "./passed-notes.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";
import { DEFAULT_RESPONSE_BODY_BYTES } from "./body-reading.ts";
import { HeldBody, rewritten } from "./response-rewrite.ts";

/** Where the filtered bytes go: the visitor's connection (forward.ts), or a stream back to another node (cluster). */
export interface Outlet {
  /** Bytes for the visitor, in order; a string is text to send as latin1 (a head's fields). */
  write(bytes: Uint8Array | string): void;
  /** `n` bytes of the agent's are dealt with: their credit goes back once what was written before is taken. */
  credit(n: number): void;
  /** The response went out whole. */
  finished(): void;
  /** The run failed (a bug, a compressor's error): the visitor's connection is cut. */
  broken(why: string): void;
}

const CRLF = Buffer.from("\r\n");
const LAST_CHUNK = Buffer.from("0\r\n\r\n");

/**
 * How the body goes after the head: as it came, its pieces without their
 * chunked framing (an HTTP/1.0 visitor; a body not rewritten after all),
 * chunked anew (a chunked body not rewritten after all), compressed, not
 * at all (replaced), or held until its end to be rewritten
 * (response-body-find-replace), its head with it.
 */
type Mode = "waiting" | "pass" | "unchunk" | "rechunk" | "compress" | "replace" | "rewrite";

/** The answer when response-body-find-replace failed on the body (a rule past its steps), as a run that failed is answered. */
const REWRITE_FAILED: PolicyResponse = { status: 500, headers: [["content-type", "text/plain; charset=utf-8"]], body: "The tunnel's traffic policy could not be evaluated for this response.\n" };

export class ResponseFilter {
  private mode: Mode = "waiting";
  /** The last step that waits (a run's action, a compressor), while one does: the steps after it wait their turn. */
  private tail: Promise<void> | undefined;
  /** Steps queued behind it and not done yet. */
  private behind = 0;
  private compressor: ResponseCompressor | undefined;
  /** The visitor cannot read chunks (HTTP/1.0): a compressed body ends with the connection. */
  private closeDelimited = false;
  private cancelled = false;
  private ended = false;
  /** The response goes out in a form that needs the connection closed after it. */
  closes = false;
  /** The final head: as parsed, its bytes as they came, and read whole once a rule asked for its fields. */
  private parsed: ParsedHead | undefined;
  private headBytes: Uint8Array | undefined;
  private whole: ParsedHead | undefined;
  /** The body held to be rewritten, and the rules that rewrite it (mode "rewrite"). */
  private held: HeldBody | undefined;
  private rewrites: Replacement[] | undefined;

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
    this.held?.release();
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
      if (this.mode !== "compress" && this.mode !== "rewrite" && this.mode !== "rechunk") return;
    }
    this.then(() => {
      if (this.mode === "unchunk") return this.out.write(piece);
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
    if (this.tail === undefined && this.mode !== "compress" && this.mode !== "rewrite" && this.mode !== "rechunk" && !this.cancelled) return this.out.finished();
    this.then(async () => {
      if (this.mode === "rewrite") return this.rewriteEnd();
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

  /** Runs `step` after everything before it (at once when nothing waits); a failure cuts the connection. */
  private then(step: () => void | Promise<void>): void {
    if (this.cancelled) return;
    if (this.tail === undefined) {
      let out: void | Promise<void>;
      try {
        out = step();
      } catch (err) {
        return this.fail(err);
      }
      if (out instanceof Promise) this.wait(out);
      return;
    }
    this.wait(this.tail.then(() => (this.cancelled ? undefined : step())));
  }

  /** `step` waits: what comes after it waits for it; once all that waited is done, steps run at once again. */
  private wait(step: Promise<void>): void {
    this.behind++;
    const tail = step.then(
      () => {
        if (--this.behind === 0 && this.tail === tail) this.tail = undefined;
      },
      (err) => {
        if (--this.behind === 0 && this.tail === tail) this.tail = undefined;
        this.fail(err);
      },
    );
    this.tail = tail;
  }

  private fail(err: unknown): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.held?.release();
    log.warn("traffic policy's response failed", { err: String(err) });
    this.out.broken("the tunnel's traffic policy could not be applied to the response");
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

  /** The response's facts (policy/facts.ts ResponseFacts): its status, and its fields, read when first asked for. */
  get status(): number {
    return this.parsed!.status;
  }

  get headers(): HeaderPairs {
    return this.full().headers;
  }

  /** The head with every field: a head read for its framing only (its bytes, the blank line included) is read again whole. */
  private full(): ParsedHead {
    if (this.whole) return this.whole;
    const bytes = this.headBytes!;
    const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength - 4).toString("latin1");
    const head = parseHead(text, this.method, true);
    // it was read once already, and these are the same bytes
    if (typeof head === "string") throw new Error(`a response head read before does not read again: ${head}`);
    return (this.whole = head);
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

  /** An HTTP/1.0 visitor reads no chunks: the body's data alone, ended by the connection's end, which the head says. */
  private unchunked(headers: [string, string][]): void {
    this.mode = "unchunk";
    this.closes = true;
    const kept = headers.filter(([name]) => !/^(transfer-encoding|connection|keep-alive|trailer)$/i.test(name));
    kept.push(["Connection", "close"]);
    this.out.write(responseHeadBytes(this.full(), kept));
  }

  /** The head of a compressed body, and the compressor its pieces go through. */
  private compressed(headers: [string, string][], coding: NonNullable<LayeredRun["compression"]>): void {
    // compressed: no length (the action took it off), chunked unless the visitor cannot read chunks
    this.mode = "compress";
    this.compressor = createCompressor(coding);
    const compressed = headers.filter(([n]) => n.toLowerCase() !== "transfer-encoding");
    if (this.minor === 0) {
      // an HTTP/1.0 visitor reads no chunks: the body ends with the connection, which the head says
      this.closeDelimited = true;
      this.closes = true;
      for (let i = compressed.length - 1; i >= 0; i--) if (/^(connection|keep-alive)$/i.test(compressed[i]![0])) compressed.splice(i, 1);
      compressed.push(["connection", "close"]);
    } else compressed.push(["transfer-encoding", "chunked"]);
    this.out.write(responseHeadBytes(this.full(), compressed));
  }

  /** A piece of a body held to be rewritten; one that would pass the cap or the memory sends what was held, and the rest as it comes, unchanged. */
  private hold(piece: Uint8Array): void | Promise<void> {
    const took = this.held!.take(piece);
    if (took === true) return;
    const max = this.policy.reading?.responseMaxBytes ?? DEFAULT_RESPONSE_BODY_BYTES;
    log.info("traffic policy's response body not rewritten", {
      tunnel: this.run.facts.tunnel.name,
      why: took === "limit" ? `it is larger than ${max} bytes (--policy-response-body-limit)` : "the bodies held for the policies are at --policy-body-memory",
    });
    const pieces = this.held!.release();
    pieces.push(piece);
    return this.unchanged(pieces);
  }

  /** A body held to be rewritten goes on as it came after all: its head, what was held, then the rest as it comes (compressed when the run says so). */
  private unchanged(pieces: Uint8Array[]): void | Promise<void> {
    this.held = undefined;
    this.rewrites = undefined;
    const res = this.run.response!;
    const coding = this.run.compression;
    if (coding !== undefined) {
      this.compressed(res.headers, coding);
      return this.compressor!.push(pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces)).then((packed) => {
        if (!this.cancelled) this.chunk(packed);
      });
    }
    if (this.parsed!.framing === "chunked") {
      if (this.minor === 0) this.unchunked(res.headers);
      else {
        // chunked anew: the pieces are the chunks' data
        this.mode = "rechunk";
        const fields = res.headers.filter(([name]) => !/^(transfer-encoding|content-length|trailer)$/i.test(name));
        fields.push(["transfer-encoding", "chunked"]);
        this.out.write(responseHeadBytes(this.full(), fields));
        for (const p of pieces) this.chunk(p);
        return;
      }
    } else {
      // a length, or to the connection's end: the pieces are the body as it came, under its own head
      this.mode = "unchunk";
      this.out.write(responseHeadBytes(this.full(), res.headers));
    }
    for (const p of pieces) this.out.write(p);
  }

  /**
   * The body held to its end: rewritten, and sent with its head and its
   * new length (compressed and chunked, when the run chose a coding: the
   * rewrite first). One that is not UTF-8 goes as it came; a rule past its
   * steps answers 500 in the response's place.
   */
  private rewriteEnd(): void | Promise<void> {
    const pieces = this.held!.release();
    const rules = this.rewrites!;
    this.held = undefined;
    this.rewrites = undefined;
    let body = pieces.length === 1 ? pieces[0]! : Buffer.concat(pieces);
    let changed = false;
    try {
      const out = rewritten(body, rules);
      if (out) ({ body, changed } = out);
      else log.info("traffic policy's response body not rewritten", { tunnel: this.run.facts.tunnel.name, why: "it is not UTF-8 text" });
    } catch (err) {
      if (!(err instanceof ReplaceFailed)) throw err;
      log.warn("traffic policy's response body could not be rewritten", { tunnel: this.run.facts.tunnel.name, err: err.message });
      this.mode = "replace";
      this.out.write(answerBytes(REWRITE_FAILED, false, !this.parsed!.keepAlive));
      return this.out.finished();
    }
    const res = this.run.response!;
    const coding = this.run.compression;
    if (coding !== undefined) {
      this.compressed(res.headers, coding);
      const compressor = this.compressor!;
      return compressor.push(body).then(async (packed) => {
        if (this.cancelled) return;
        this.chunk(packed);
        const rest = await compressor.end();
        if (this.cancelled) return;
        this.chunk(rest);
        if (!this.closeDelimited) this.out.write(LAST_CHUNK);
        this.out.finished();
      });
    }
    this.mode = "pass";
    const fields: [string, string][] = [];
    for (const field of res.headers) {
      const lower = field[0].toLowerCase();
      if (lower === "transfer-encoding" || lower === "content-length" || lower === "trailer") continue;
      // another body than the service's: its strong validator no longer names it byte for byte (as compress-response does)
      if (changed && lower === "etag" && !field[1].startsWith("W/")) fields.push([field[0], `W/${field[1]}`]);
      else fields.push(field);
    }
    fields.push(["content-length", String(body.byteLength)]);
    this.out.write(responseHeadBytes(this.full(), fields));
    if (body.byteLength > 0) this.out.write(body);
    this.out.finished();
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
