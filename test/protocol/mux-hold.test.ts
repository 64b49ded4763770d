/**
 * What the edge does with an agent's frames while it checks a HELLO
 * (Mux.hold/release): they wait, unhandled, and are answered in order once
 * released; past MAX_HELD_BYTES the peer is hostile and the mux closes with
 * PROTOCOL_ERROR.
 */
import { expect, test } from "bun:test";
import { decodeFrames, encodeFrame, type Frame } from "../../src/protocol/frames.ts";
import { Mux } from "../../src/protocol/mux.ts";
import { FrameType, MAX_HELD_BYTES } from "../../src/protocol/wire.ts";

function edge() {
  const sent: Frame[] = [];
  const closed: string[] = [];
  const mux = new Mux({
    role: "edge",
    send: (frames) => (decodeFrames(frames.slice(), (f) => sent.push(f)), "sent"),
    onClose: (code) => closed.push(code),
  });
  return { mux, sent, closed };
}

const ping = (n: number, size = 4) => encodeFrame(FrameType.PING, 0, new Uint8Array(size).fill(n));

test("held PINGs are not answered until release, then answered in the order they came", async () => {
  const { mux, sent } = edge();
  mux.hold();
  mux.receive(new Uint8Array([...ping(1), ...ping(2)]));
  mux.receive(ping(3));
  await Bun.sleep(0);
  expect(sent.filter((f) => f.type === FrameType.PONG)).toEqual([]);
  mux.release();
  await Bun.sleep(0);
  expect(sent.filter((f) => f.type === FrameType.PONG).map((f) => f.payload[0])).toEqual([1, 2, 3]);
  // and after release, frames are answered at once again
  mux.receive(ping(4));
  await Bun.sleep(0);
  expect(sent.filter((f) => f.type === FrameType.PONG).map((f) => f.payload[0])).toEqual([1, 2, 3, 4]);
});

test(`more than ${MAX_HELD_BYTES} bytes held: the mux closes with PROTOCOL_ERROR and answers none of them`, async () => {
  const { mux, sent, closed } = edge();
  mux.hold();
  const size = 16 * 1024;
  for (let i = 0; i * size <= MAX_HELD_BYTES + size && !mux.closed; i++) mux.receive(ping(i, size));
  await Bun.sleep(0);
  expect(closed).toEqual(["PROTOCOL_ERROR"]);
  expect(mux.closed).toBe(true);
  mux.release();
  expect(sent.filter((f) => f.type === FrameType.PONG)).toEqual([]);
});
