/**
 * A response body held for response-body-find-replace (response-filter.ts):
 * its pieces kept until it ends, up to --policy-response-body-limit and
 * within what every body held for the policies may take together
 * (--policy-body-memory); then rewritten whole by the run's rules and
 * sent with its head and its new length, or compressed after. A body
 * that would pass either cap is not held: the filter sends what it held
 * and the rest as it comes, unchanged.
 */
import { responseHeadBytes } from "../../http/response-head.ts";
import { log } from "../../log.ts";
import { bodyText, replaceAll, ReplaceFailed, type PolicyResponse, type Replacement } from "../../policy/index.ts";
import { DEFAULT_RESPONSE_BODY_BYTES, type BodyMemory } from "./body-reading.ts";
import type { LayeredRun } from "./layered-run.ts";
import { answerBytes } from "./policy-answer.ts";
import { FramedResponse, LAST_CHUNK } from "./response-framing.ts";
import type { Outlet } from "./response-steps.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";

export class HeldBody {
  private pieces: Uint8Array[] = [];
  /** Bytes held. */
  bytes = 0;
  /** Bytes of the memory budget taken. */
  private taken = 0;

  constructor(
    private readonly max: number,
    private readonly memory: BodyMemory | undefined,
  ) {}

  /** Keeps a copy of `piece` (the caller's buffer is not ours); false, keeping nothing, when it would pass the cap ("limit") or the memory ("memory"). */
  take(piece: Uint8Array): true | "limit" | "memory" {
    const n = piece.byteLength;
    if (this.bytes + n > this.max) return "limit";
    if (this.memory && !this.memory.take(n)) return "memory";
    this.taken += n;
    this.pieces.push(piece.slice());
    this.bytes += n;
    return true;
  }

  /** What was held, in order; its memory given back (the bytes are on their way). */
  release(): Uint8Array[] {
    this.memory?.give(this.taken);
    this.taken = 0;
    const pieces = this.pieces;
    this.pieces = [];
    this.bytes = 0;
    return pieces;
  }
}

/**
 * The body with the rules applied (and whether they changed it), or undefined when it is not UTF-8 text
 * (it goes on as it came). Throws the policy's ReplaceFailed when a rule
 * takes more than its steps.
 */
export function rewritten(body: Uint8Array, rules: readonly Replacement[]): { body: Uint8Array; changed: boolean } | undefined {
  const text = bodyText(body);
  if (text === undefined) return undefined;
  const out = replaceAll(text, rules);
  return out === text ? { body, changed: false } : { body: Buffer.from(out, "utf8"), changed: true };
}

/** The answer when response-body-find-replace failed on the body (a rule past its steps), as a run that failed is answered. */
const REWRITE_FAILED: PolicyResponse = { status: 500, headers: [["content-type", "text/plain; charset=utf-8"]], body: "The tunnel's traffic policy could not be evaluated for this response.\n" };

/** The filter's part that holds a body to rewrite it (mode "rewrite"), and sends it rewritten, or as it came after all. */
export abstract class RewrittenResponse extends FramedResponse {
  /** The body held to be rewritten, and the rules that rewrite it (mode "rewrite"). */
  protected held: HeldBody | undefined;
  protected rewrites: Replacement[] | undefined;

  constructor(
    protected readonly policy: TunnelPolicy,
    protected readonly run: LayeredRun,
    method: string,
    minor: 0 | 1,
    out: Outlet,
  ) {
    super(method, minor, out);
  }

  protected releaseHeld(): void {
    this.held?.release();
  }

  /** A piece of a body held to be rewritten; one that would pass the cap or the memory sends what was held, and the rest as it comes, unchanged. */
  protected hold(piece: Uint8Array): void | Promise<void> {
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
  protected rewriteEnd(): void | Promise<void> {
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
}
