/**
 * A response body held for response-body-find-replace (response-filter.ts):
 * its pieces kept until it ends, up to --policy-response-body-limit and
 * within what every body held for the policies may take together
 * (--policy-body-memory); then rewritten whole by the run's rules. A body
 * that would pass either is not held: the filter sends what it held and
 * the rest as it comes, unchanged.
 */
import { bodyText, replaceAll, type Replacement } from "../../policy/index.ts";
import type { BodyMemory } from "./body-reading.ts";

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
