/**
 * The edge's event-stream rewriter (event-stream.ts) on its own: a stream
 * cut into pieces every way (each byte alone, at random, a CRLF split
 * between two pieces) reads as the same events; an event is sent as soon
 * as its blank line is read; an event past the cap goes as it came, and
 * the next is rewritten again; the held bytes count against the memory
 * shared by the policies' bodies, and are given back.
 */
import { describe, expect, test } from "bun:test";
import { BodyMemory } from "../../src/edge/traffic-policy/body-reading.ts";
import { EventStreamRewriter } from "../../src/edge/traffic-policy/event-stream.ts";
import { PolicyChain } from "../../src/policy/index.ts";
import { policyOf, requestInput } from "../policy/policy-harness.ts";

async function rules() {
  const p = policyOf("on_event_stream_message:\n  - actions:\n      - type: sse-find-replace\n        config: { replacements: [{ from: 'secret', to: '[redacted]' }] }\n");
  const out = await new PolicyChain([p]).eventStream(requestInput({ response: { status: 200, headers: [["Content-Type", "text/event-stream"]] } }));
  return out.response!.streamRewrites!;
}

const text = (pieces: Uint8Array[]) => Buffer.concat(pieces).toString("utf8");

function through(r: EventStreamRewriter, pieces: string[]): string {
  let out = "";
  for (const p of pieces) out += text(r.push(Buffer.from(p)));
  return out + text(r.end());
}

const STREAM = ": hello\r\n\r\nevent: a\r\ndata: one secret\r\n\r\ndata: two\rdata: secret\r\rid: 3\n\nretry: 10\n\ndata: last secret\n\ndata: unended secret";
const EXPECTED = ": hello\r\n\r\nevent: a\r\ndata: one [redacted]\r\n\r\ndata: two\rdata: [redacted]\r\rid: 3\n\nretry: 10\n\ndata: last [redacted]\n\ndata: unended secret";

describe("the event-stream rewriter", () => {
  test("whole, byte by byte, and cut at random: the same events, CRLF, CR and LF alike", async () => {
    const r = await rules();
    expect(through(new EventStreamRewriter(r, 1 << 20, undefined, "t"), [STREAM])).toBe(EXPECTED);
    expect(through(new EventStreamRewriter(r, 1 << 20, undefined, "t"), [...STREAM])).toBe(EXPECTED);
    for (let seed = 1; seed <= 50; seed++) {
      const pieces: string[] = [];
      let x = seed;
      for (let at = 0; at < STREAM.length; ) {
        x = (x * 1103515245 + 12345) % 2147483648;
        const n = 1 + (x % 9);
        pieces.push(STREAM.slice(at, at + n));
        at += n;
      }
      expect(through(new EventStreamRewriter(r, 1 << 20, undefined, "t"), pieces)).toBe(EXPECTED);
    }
  });

  test("an event goes on as soon as its blank line is read, and not before", async () => {
    const w = new EventStreamRewriter(await rules(), 1 << 20, undefined, "t");
    expect(text(w.push(Buffer.from("data: a secret\n")))).toBe("");
    expect(text(w.push(Buffer.from("\ndata: b")))).toBe("data: a [redacted]\n\n");
    // an event ended by CRLF CR: sent at the CR; the LF after it, in the next piece, goes on at once too (not held with the next event)
    const crlf = new EventStreamRewriter(await rules(), 1 << 20, undefined, "t");
    expect(text(crlf.push(Buffer.from("data: secret\r\n\r")))).toBe("data: [redacted]\r\n\r");
    expect(text(crlf.push(Buffer.from("\n")))).toBe("\n");
  });

  test("an event past the cap goes as it came, what was held first; the next one is rewritten again", async () => {
    const w = new EventStreamRewriter(await rules(), 64, undefined, "t");
    const big = `data: secret ${"x".repeat(100)}`;
    let out = text(w.push(Buffer.from(big.slice(0, 30))));
    expect(out).toBe("");
    out += text(w.push(Buffer.from(big.slice(30))));
    expect(out).toBe(big);
    out += text(w.push(Buffer.from(" secret\n\ndata: secret\n\n")));
    expect(out).toBe(`${big} secret\n\ndata: [redacted]\n\n`);
  });

  test("the held event counts against the policies' body memory, given back when it ends or is cut; none left: it goes as it came", async () => {
    const memory = new BodyMemory(16);
    const w = new EventStreamRewriter(await rules(), 1 << 20, memory, "t");
    w.push(Buffer.from("data: secret"));
    expect(memory.held).toBe(12);
    expect(text(w.push(Buffer.from("\n\n")))).toBe("data: [redacted]\n\n");
    expect(memory.held).toBe(0);
    w.push(Buffer.from("data: 1"));
    w.cancel();
    expect(memory.held).toBe(0);
    const over = new EventStreamRewriter(await rules(), 1 << 20, memory, "t");
    expect(text(over.push(Buffer.from("data: a long secret")))).toBe("data: a long secret");
    expect(memory.held).toBe(0);
  });
});
