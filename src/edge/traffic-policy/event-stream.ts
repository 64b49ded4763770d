/**
 * A text/event-stream body rewritten event by event for sse-find-replace
 * (response-filter.ts, mode "sse"): its pieces, as they come, cut at the
 * blank lines that end events (CRLF, LF or CR, a line ending split
 * between two pieces included), each whole event rewritten
 * (policy/sse-event.ts) and sent on at once. Only the event being read is
 * held, up to --policy-sse-event-limit and within what every body held
 * for the policies may take together (--policy-body-memory): one that
 * would pass either is sent as it came, what was held and the rest of it
 * as it comes, with a line in the log, and the next event is read anew.
 * A stream that ends inside an event sends that part as it came (the
 * format drops an event no blank line ended).
 */
import { log } from "../../log.ts";
import { rewriteEvent, type StreamReplacement } from "../../policy/index.ts";
import type { BodyMemory } from "./body-reading.ts";
import { HeldBody } from "./response-rewrite.ts";

const CR = 0x0d;
const LF = 0x0a;

export class EventStreamRewriter {
  /** The pieces of the event being read. */
  private readonly held: HeldBody;
  /** The last byte read ended a line (or nothing was read yet): a line ending now is a blank line. */
  private atLineStart = true;
  /** The last byte was a CR: an LF now belongs to its line ending. */
  private afterCR = false;
  /** The event just ended (nothing of the next read yet): the LF of its CRLF goes straight on. */
  private justEnded = false;
  /** The event being read is past a cap: its bytes go on as they come until it ends. */
  private passing = false;

  constructor(
    private readonly rules: readonly StreamReplacement[],
    private readonly maxEventBytes: number,
    memory: BodyMemory | undefined,
    /** The tunnel, for the log. */
    private readonly tunnel: string,
  ) {
    this.held = new HeldBody(maxEventBytes, memory);
  }

  /** A piece of the body (its framing taken off): what goes to the visitor now, in order. Throws the policy's ReplaceFailed when an event's rewrite fails. */
  push(piece: Uint8Array): Uint8Array[] {
    const out: Uint8Array[] = [];
    let start = 0;
    for (let i = 0; i < piece.byteLength; i++) {
      const b = piece[i]!;
      if (this.afterCR) {
        this.afterCR = false;
        if (b === LF) {
          // the second half of a CRLF: of the event that just ended, or of a line of this one
          if (this.justEnded && i === start) {
            out.push(piece.subarray(i, i + 1));
            start = i + 1;
          }
          continue;
        }
      }
      this.justEnded = false;
      if (b !== LF && b !== CR) {
        this.atLineStart = false;
        continue;
      }
      if (b === CR) this.afterCR = true;
      if (!this.atLineStart) {
        this.atLineStart = true;
        continue;
      }
      // a blank line: the event ends with it
      this.ended(piece.subarray(start, i + 1), out);
      start = i + 1;
      this.justEnded = true;
    }
    if (start < piece.byteLength) this.keep(piece.subarray(start), out);
    return out;
  }

  /** The body ended: an event no blank line ended goes as it came. */
  end(): Uint8Array[] {
    const rest = this.held.release();
    this.passing = false;
    return rest;
  }

  /** What is held is given back, unsent (the response failed or was cut). */
  cancel(): void {
    this.held.release();
  }

  /** A part of the event being read, not its end: held, or sent on when the event is past a cap. */
  private keep(part: Uint8Array, out: Uint8Array[]): void {
    if (this.passing) return void out.push(part);
    const took = this.held.take(part);
    if (took === true) return;
    this.passing = true;
    log.info("traffic policy's event not rewritten", {
      tunnel: this.tunnel,
      why: took === "limit" ? `it is larger than ${this.maxEventBytes} bytes (--policy-sse-event-limit)` : "the bodies held for the policies are at --policy-body-memory",
    });
    out.push(...this.held.release(), part);
  }

  /** The event's last part (its blank line included) read: the whole event rewritten, or what is left of it as it came. */
  private ended(last: Uint8Array, out: Uint8Array[]): void {
    if (this.passing) {
      this.passing = false;
      return void out.push(last);
    }
    if (this.held.bytes + last.byteLength > this.maxEventBytes) {
      this.keep(last, out);
      this.passing = false;
      return;
    }
    const pieces = this.held.release();
    const event = pieces.length === 0 ? last : Buffer.concat([...pieces, last]);
    const made = rewriteEvent(event, this.rules);
    if (made === "not-utf8") log.info("traffic policy's event not rewritten", { tunnel: this.tunnel, why: "it is not UTF-8 text" });
    out.push(typeof made === "string" ? event : made);
  }
}
