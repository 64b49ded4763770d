/**
 * POLICY_PASSED's payload (wire.ts; messages.ts PolicyPassed) as both
 * sides see its bytes: `{"tunnel":"<id>","stream":<n>` and the rest of
 * the note. The edge tells a tunnel's notes from the same bytes request
 * after request (edge/traffic-policy/passed-notes.ts: the same rules
 * match), only the stream differing; the agent, told hundreds of notes a
 * second, knows such a note for the last one with another stream, and
 * parses and checks only one whose bytes differ.
 */
import * as v from "valibot";
import { parseJsonPayload, ProtocolError } from "./frames.ts";
import { PolicyPassed } from "./messages.ts";

const encoder = new TextEncoder();

/** The payload's first bytes for a tunnel's note: its stream's digits follow. */
export function passedNoteHead(tunnel: string): Uint8Array {
  return encoder.encode(`{"tunnel":${JSON.stringify(tunnel)},"stream":`);
}

/** The highest stream id a note may name (messages.ts PolicyPassed). */
const MAX_STREAM = 0xffff_ffff;
const ZERO = 0x30;
const NINE = 0x39;

/** Reads one connection's POLICY_PASSED payloads; throws ProtocolError for one that is not a note. */
export class PassedNoteReader {
  /** The last note parsed whole, and its bytes before and after its stream's digits. */
  private last: { head: Uint8Array; tail: Uint8Array; note: PolicyPassed } | undefined;

  read(payload: Uint8Array): PolicyPassed {
    const again = this.last && this.asBefore(payload, this.last);
    if (again) return again;
    const parsed = v.safeParse(PolicyPassed, parseJsonPayload(payload, "POLICY_PASSED"));
    if (!parsed.success) throw new ProtocolError(`bad POLICY_PASSED: ${parsed.issues[0]?.message}`);
    this.remember(payload, parsed.output);
    return parsed.output;
  }

  /** The last note for another stream, when `payload` is its bytes with other digits; undefined otherwise. */
  private asBefore(payload: Uint8Array, last: { head: Uint8Array; tail: Uint8Array; note: PolicyPassed }): PolicyPassed | undefined {
    const { head, tail } = last;
    const digitsEnd = payload.byteLength - tail.byteLength;
    // at least one digit, at most ten, no leading zero but for 0 itself
    if (digitsEnd <= head.byteLength || digitsEnd - head.byteLength > 10) return undefined;
    if (!startsWith(payload, head) || !endsWith(payload, tail)) return undefined;
    let stream = 0;
    for (let i = head.byteLength; i < digitsEnd; i++) {
      const c = payload[i]!;
      if (c < ZERO || c > NINE) return undefined;
      stream = stream * 10 + (c - ZERO);
    }
    if (payload[head.byteLength] === ZERO && digitsEnd - head.byteLength > 1) return undefined;
    if (stream > MAX_STREAM) return undefined;
    return { ...last.note, stream };
  }

  /** Keeps a note parsed whole whose payload is the form the edge writes (its head, its digits, the rest), to know it again. */
  private remember(payload: Uint8Array, note: PolicyPassed): void {
    const head = passedNoteHead(note.tunnel);
    const digits = String(note.stream);
    if (!startsWith(payload, head)) return;
    for (let i = 0; i < digits.length; i++) if (payload[head.byteLength + i] !== digits.charCodeAt(i)) return;
    const tailAt = head.byteLength + digits.length;
    // the rest must not go on with digits (those would be the stream's)
    const next = payload[tailAt];
    if (next === undefined || (next >= ZERO && next <= NINE)) return;
    this.last = { head, tail: payload.slice(tailAt), note };
  }
}

/** Buffer's compare of a range, on any Uint8Array: native, with no view made (a byte loop in JavaScript is several times slower for a note's 100-300 bytes). */
const compare = Buffer.prototype.compare as (this: Uint8Array, target: Uint8Array, targetStart: number, targetEnd: number, sourceStart: number, sourceEnd: number) => number;

function startsWith(a: Uint8Array, b: Uint8Array): boolean {
  return a.byteLength >= b.byteLength && compare.call(a, b, 0, b.byteLength, 0, b.byteLength) === 0;
}

function endsWith(a: Uint8Array, b: Uint8Array): boolean {
  const from = a.byteLength - b.byteLength;
  return from >= 0 && compare.call(a, b, 0, b.byteLength, from, a.byteLength) === 0;
}
