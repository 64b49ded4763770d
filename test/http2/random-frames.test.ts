/**
 * Whatever a client sends, the connection answers with a protocol's error
 * or goes on: random frames (of every type, with random flags, streams and
 * payloads, some well-formed requests among them) never make it throw, and
 * never end it with INTERNAL_ERROR, which is what an exception of our own
 * code (not a ConnectionError) becomes.
 */
import { expect, test } from "bun:test";
import fc from "fast-check";
import { ErrorCode, frame, getFields, headers, literalBlock, ping, settingsAck } from "../harness/h2-frames.ts";
import { engine } from "./engine.ts";

const anyFrame = fc.oneof(
  fc.record({ type: fc.integer({ min: 0, max: 12 }), flags: fc.integer({ min: 0, max: 255 }), stream: fc.integer({ min: 0, max: 9 }), payload: fc.uint8Array({ maxLength: 40 }) }).map((f) => frame(f.type, f.flags, f.stream, f.payload)),
  fc.integer({ min: 0, max: 4 }).map((i) => headers(2 * i + 1, getFields(`/r${i}`), i % 2 === 0)),
  fc.integer({ min: 0, max: 4 }).map((i) => frame(1, 0, 2 * i + 1, literalBlock(getFields("/cut")).subarray(0, 7))),
  fc.constant(ping()),
  fc.constant(settingsAck()),
);

test("random frames never throw out of received() nor end the connection with INTERNAL_ERROR", () => {
  fc.assert(
    fc.property(fc.array(anyFrame, { maxLength: 30 }), fc.array(fc.integer({ min: 1, max: 50 }), { maxLength: 5 }), (frames, cuts) => {
      using e = engine({
        onRequest: (s) => {
          s.onData = (c) => s.consumed(c.byteLength);
          s.onEnd = () => {
            s.respond(200, [["x-path", s.request.path ?? ""]]);
            s.write(new Uint8Array(10));
            s.end();
          };
        },
      });
      const bytes = Buffer.concat(frames);
      // cut into reads at random places
      let at = 0;
      for (const n of cuts) {
        e.send(bytes.subarray(at, at + n));
        at += n;
      }
      e.send(bytes.subarray(at));
      expect(e.frames.goawayCode).not.toBe(ErrorCode.INTERNAL_ERROR);
    }),
    { numRuns: 2_000 },
  );
});
