import { describe, expect, test } from "bun:test";
import {
  decodeFrame,
  decodeFrames,
  type Frame,
  describeFrame,
  encodeFrame,
  jsonPayload,
  parseJsonPayload,
  ProtocolError,
  readText,
  readU32,
  textPayload,
  u32Payload,
} from "../../src/protocol/frames.ts";
import {
  FIN_CARRIERS,
  FLAG_FIN,
  CONTROL_FRAMES,
  FRAME_NAMES,
  FrameType,
  HEADER_LENGTH,
  MAX_PAYLOAD,
  MAX_STREAM_ID,
  type FrameTypeValue,
} from "../../src/protocol/wire.ts";
import { bytes } from "./support.ts";

/** A raw message, built by hand so the decoder is not only checked against its own encoder. */
function raw(type: number, stream: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(HEADER_LENGTH + payload.byteLength);
  out[0] = type;
  out[1] = (stream >>> 24) & 0xff;
  out[2] = (stream >>> 16) & 0xff;
  out[3] = (stream >>> 8) & 0xff;
  out[4] = stream & 0xff;
  new DataView(out.buffer).setUint32(5, payload.byteLength);
  out.set(payload, HEADER_LENGTH);
  return out;
}

const roundTrips: { type: FrameTypeValue; stream: number; payload: Uint8Array }[] = [
  { type: FrameType.HELLO, stream: 0, payload: jsonPayload({ version: 1, token: "t", tunnels: [{ protocol: "http" }] }) },
  { type: FrameType.READY, stream: 0, payload: jsonPayload({ session: "s", username: "u", tunnels: [] }) },
  { type: FrameType.ERROR, stream: 0, payload: jsonPayload({ code: "PROTOCOL_ERROR", message: "bad frame" }) },
  { type: FrameType.PING, stream: 0, payload: new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8]) },
  { type: FrameType.PONG, stream: 0, payload: new Uint8Array([8, 7, 6, 5, 4, 3, 2, 1]) },
  { type: FrameType.GOAWAY, stream: 0, payload: new Uint8Array(0) },
  { type: FrameType.MOVE, stream: 0, payload: jsonPayload({ port: 4042 }) },
  { type: FrameType.DRAIN, stream: 0, payload: jsonPayload({}) },
  { type: FrameType.ROTATION, stream: 0, payload: jsonPayload({ tunnel: "web", in: false }) },
  { type: FrameType.REVOKE, stream: 0, payload: jsonPayload({ tunnel: "web", code: "PROTOCOL_DENIED", message: "no more tcp" }) },
  { type: FrameType.POLICY, stream: 0, payload: jsonPayload({ tunnel: "web", method: "GET", target: "/admin", status: 403, rules: ["no admin"], ended: { by: "tunnel", action: "deny", rule: "no admin" } }) },
  { type: FrameType.ADD, stream: 0, payload: jsonPayload({ ref: 1, name: "api", tunnel: { protocol: "http", subdomain: "api" } }) },
  { type: FrameType.ADDED, stream: 0, payload: jsonPayload({ ref: 1, refused: { code: "TUNNEL_LIMIT", message: "too many" } }) },
  { type: FrameType.REMOVE, stream: 0, payload: jsonPayload({ ref: 2, tunnel: "t1" }) },
  { type: FrameType.REMOVED, stream: 0, payload: jsonPayload({ ref: 2, tunnel: "t1" }) },
  { type: FrameType.CONFIG, stream: 0, payload: jsonPayload({ version: 3, tunnels: { web: { proto: "http", addr: 3000 } } }) },
  { type: FrameType.STATUS, stream: 0, payload: jsonPayload({ tunnels: [{ name: "web", id: "t1" }] }) },
  { type: FrameType.ASK, stream: 0, payload: jsonPayload({ ref: 3, action: "restart" }) },
  { type: FrameType.ANSWER, stream: 0, payload: jsonPayload({ ref: 3, accepted: false, message: "not allowed" }) },
  { type: FrameType.POLICY_PASSED, stream: 0, payload: jsonPayload({ tunnel: "web", stream: 2, response: { rules: [{ rule: "stamp", actions: ["add-headers"] }] } }) },
  { type: FrameType.OPEN, stream: 2, payload: jsonPayload({ tunnel: "t1", kind: "http", remote: "1.2.3.4:5" }) },
  { type: FrameType.REPLY, stream: 1, payload: jsonPayload({ status: 200, headers: [["a", "b"]] }) },
  { type: FrameType.DATA, stream: MAX_STREAM_ID, payload: new Uint8Array([0, 255, 0, 255]) },
  { type: FrameType.DATA, stream: 7, payload: new Uint8Array(MAX_PAYLOAD).fill(0xab) },
  { type: FrameType.WINDOW, stream: 0x01020304, payload: u32Payload(0xdeadbeef) },
  { type: FrameType.FIN, stream: 3, payload: new Uint8Array(0) },
  { type: FrameType.RST, stream: 4, payload: textPayload("CANCELLED") },
  { type: FrameType.DATAGRAM, stream: 6, payload: new Uint8Array(1472).fill(0x5a) },
];

describe("frame round trips", () => {
  test("the table covers every frame type in wire.ts", () => {
    const covered = new Set(roundTrips.map((r) => r.type));
    expect([...covered].sort()).toEqual(Object.values(FrameType).sort());
  });

  test("no two frame types share a number, and every number fits below FLAG_FIN", () => {
    const numbers = Object.values(FrameType) as number[];
    const byNumber = Object.entries(FrameType).filter(([, n]) => numbers.indexOf(n) !== numbers.lastIndexOf(n));
    expect(byNumber).toEqual([]);
    expect(Object.keys(FRAME_NAMES).length).toBe(Object.keys(FrameType).length);
    for (const n of numbers) expect(n & FLAG_FIN).toBe(0);
  });

  test("the policy notes' and the live session's control frames are all control frames", () => {
    for (const name of ["POLICY", "ADD", "ADDED", "REMOVE", "REMOVED", "CONFIG", "STATUS", "ASK", "ANSWER", "POLICY_PASSED"] as const) {
      expect(CONTROL_FRAMES.has(FrameType[name])).toBe(true);
    }
  });

  for (const { type, stream, payload } of roundTrips) {
    test(`${FRAME_NAMES[type]} on stream ${stream} with ${payload.byteLength} payload bytes survives encode and decode`, () => {
      const message = encodeFrame(type, stream, payload);
      expect(message.byteLength).toBe(HEADER_LENGTH + payload.byteLength);
      // the layout is type u8 | stream u32 big-endian | payload
      expect(message).toEqual(raw(type, stream, payload));
      const frame = decodeFrame(message);
      expect(frame.type).toBe(type);
      expect(frame.stream).toBe(stream);
      expect(frame.payload).toEqual(payload);
    });
  }

  test("encodeFrame without a payload makes a bare header", () => {
    expect(encodeFrame(FrameType.FIN, 9)).toEqual(new Uint8Array([FrameType.FIN, 0, 0, 0, 9, 0, 0, 0, 0]));
  });

  test("a message with several frames back to back decodes to each of them, in order", () => {
    const message = new Uint8Array([
      ...encodeFrame(FrameType.REPLY, 3, bytes("{}")),
      ...encodeFrame(FrameType.DATA, 3, bytes("body"), true),
      ...encodeFrame(FrameType.PONG, 0, new Uint8Array(4)),
    ]);
    const frames: Frame[] = [];
    decodeFrames(message, (f) => frames.push(f));
    expect(frames.map((f) => [f.type, f.stream, f.payload.byteLength, f.fin])).toEqual([
      [FrameType.REPLY, 3, 2, false],
      [FrameType.DATA, 3, 4, true],
      [FrameType.PONG, 0, 4, false],
    ]);
  });

  test("a frame whose length runs past the end of its message, or bytes left after the last frame, are refused", () => {
    const good = encodeFrame(FrameType.DATA, 1, bytes("abc"));
    expect(() => decodeFrames(good.subarray(0, good.byteLength - 1), () => {})).toThrow(/runs past the end/);
    expect(() => decodeFrames(new Uint8Array([...good, 1, 2]), () => {})).toThrow(/shorter than its header/);
    expect(() => decodeFrame(new Uint8Array([...good, ...good]))).toThrow(/after the frame/);
  });

  test("a message that is a view into a larger buffer decodes from its own offset", () => {
    const message = raw(FrameType.DATA, 0x01000005, bytes("payload"));
    const backing = new Uint8Array(message.byteLength + 20).fill(0xee);
    backing.set(message, 11);
    const view = backing.subarray(11, 11 + message.byteLength);
    const frame = decodeFrame(view);
    expect(frame.type).toBe(FrameType.DATA);
    expect(frame.stream).toBe(0x01000005);
    expect(frame.payload).toEqual(bytes("payload"));
  });

  test("the decoded payload is a view into the message, not a copy", () => {
    const message = raw(FrameType.DATA, 1, bytes("abc"));
    const frame = decodeFrame(message);
    message[HEADER_LENGTH] = "x".charCodeAt(0);
    expect(frame.payload[0]).toBe("x".charCodeAt(0));
  });
});

describe("decodeFrame refusals", () => {
  const rejects = (message: Uint8Array, pattern: RegExp) => {
    expect(() => decodeFrame(message)).toThrow(ProtocolError);
    expect(() => decodeFrame(message)).toThrow(pattern);
  };

  test("messages shorter than the header are refused, including the empty message", () => {
    for (let n = 0; n < HEADER_LENGTH; n++) rejects(new Uint8Array(n).fill(FrameType.DATA), /shorter than its header/);
  });

  test("a bare header is accepted", () => {
    expect(decodeFrame(raw(FrameType.FIN, 1)).payload.byteLength).toBe(0);
  });

  test("every byte that is not a frame type, or a FIN on a frame that cannot carry one, is refused", () => {
    const known = new Set<number>(Object.values(FrameType));
    let refused = 0;
    for (let t = 0; t < 256; t++) {
      const base = t & ~FLAG_FIN;
      if (known.has(t)) continue;
      if (t & FLAG_FIN && FIN_CARRIERS.has(base)) continue; // OPEN, REPLY, DATA with FIN
      const why = known.has(base) ? /cannot carry FIN/ : /unknown frame type/;
      rejects(raw(t, 1), why);
      rejects(raw(t, 0), why);
      refused++;
    }
    expect(refused).toBe(256 - known.size - FIN_CARRIERS.size);
  });

  test("FIN rides on OPEN, REPLY and DATA and round-trips", () => {
    for (const type of [FrameType.OPEN, FrameType.REPLY, FrameType.DATA]) {
      const f = decodeFrame(encodeFrame(type, 7, new Uint8Array([1, 2]), true));
      expect(f).toEqual({ type, stream: 7, payload: new Uint8Array([1, 2]), fin: true });
      expect(decodeFrame(encodeFrame(type, 7, new Uint8Array([1]))).fin).toBe(false);
    }
    expect(describeFrame(decodeFrame(encodeFrame(FrameType.DATA, 3, new Uint8Array(4), true)))).toBe("DATA+FIN stream=3 bytes=4");
  });

  test("control frames on a stream other than 0 are refused", () => {
    for (const type of CONTROL_FRAMES) {
      rejects(raw(type, 1), new RegExp(`${FRAME_NAMES[type]} frame on stream 1`));
      rejects(raw(type, MAX_STREAM_ID), /frame on stream/);
    }
  });

  test("stream frames on stream 0 are refused", () => {
    const streamFrames = Object.values(FrameType).filter((t) => !CONTROL_FRAMES.has(t));
    expect(streamFrames.length).toBe(7);
    for (const type of streamFrames) rejects(raw(type, 0), new RegExp(`${FRAME_NAMES[type]} frame on stream 0`));
  });

  test("a payload of exactly MAX_PAYLOAD bytes is accepted and one more byte is refused", () => {
    expect(decodeFrame(raw(FrameType.DATA, 1, new Uint8Array(MAX_PAYLOAD))).payload.byteLength).toBe(MAX_PAYLOAD);
    rejects(raw(FrameType.DATA, 1, new Uint8Array(MAX_PAYLOAD + 1)), new RegExp(`${MAX_PAYLOAD + 1} bytes exceeds ${MAX_PAYLOAD}`));
  });

  test("the length is checked before the payload is looked at", () => {
    // a message whose payload bytes cannot be read: any access past the header throws
    const message = raw(FrameType.DATA, 1, new Uint8Array(MAX_PAYLOAD + 1));
    const guarded = new Proxy(message, {
      get(target, key, receiver) {
        if (typeof key === "string" && /^\d+$/.test(key) && Number(key) >= HEADER_LENGTH) {
          throw new Error(`payload byte ${key} was read`);
        }
        if (key === "subarray" || key === "slice") throw new Error(`payload was taken with ${String(key)}`);
        const value = Reflect.get(target, key, target);
        return typeof value === "function" ? value.bind(target) : value;
      },
    });
    expect(() => decodeFrame(guarded)).toThrow(ProtocolError);
  });
});

describe("payload helpers", () => {
  test("readU32 reads a 4-byte big-endian count", () => {
    expect(readU32(new Uint8Array([0x00, 0x01, 0x00, 0x00]), "WINDOW")).toBe(65536);
    expect(readU32(u32Payload(0xffffffff), "WINDOW")).toBe(0xffffffff);
    expect(readU32(u32Payload(0), "WINDOW")).toBe(0);
  });

  test("readU32 reads from the payload's own offset", () => {
    const backing = new Uint8Array([9, 9, 9, 0, 0, 1, 2, 9]);
    expect(readU32(backing.subarray(3, 7), "WINDOW")).toBe(258);
  });

  test("readU32 refuses payloads that are not exactly 4 bytes, naming the frame", () => {
    for (const n of [0, 1, 3, 5, 8]) {
      expect(() => readU32(new Uint8Array(n), "WINDOW")).toThrow(ProtocolError);
      expect(() => readU32(new Uint8Array(n), "WINDOW")).toThrow(`WINDOW payload must be 4 bytes, got ${n}`);
    }
  });

  test("parseJsonPayload returns the value that jsonPayload encoded", () => {
    const value = { tunnel: "t", kind: "tcp", n: [1, 2, { x: "ü €" }] };
    expect(parseJsonPayload(jsonPayload(value), "OPEN")).toEqual(value);
  });

  test("parseJsonPayload refuses invalid JSON, invalid UTF-8 and the empty payload with a ProtocolError", () => {
    const bad = [bytes("{not json"), new Uint8Array([0x7b, 0xff, 0xfe, 0x7d]), new Uint8Array(0), bytes('"unterminated')];
    for (const payload of bad) {
      expect(() => parseJsonPayload(payload, "OPEN")).toThrow(ProtocolError);
      expect(() => parseJsonPayload(payload, "OPEN")).toThrow("OPEN payload is not valid JSON");
    }
  });

  test("readText decodes UTF-8 and turns invalid UTF-8 into the empty string", () => {
    expect(readText(textPayload("UPSTREAM_FAILED"))).toBe("UPSTREAM_FAILED");
    expect(readText(new Uint8Array([0xc3, 0x28]))).toBe("");
  });

  test("ProtocolError is an Error with its own name", () => {
    const err = new ProtocolError("x");
    expect(err).toBeInstanceOf(Error);
    expect(err.name).toBe("ProtocolError");
  });
});

describe("describeFrame", () => {
  test("names the type, the stream and the payload size", () => {
    expect(describeFrame(decodeFrame(encodeFrame(FrameType.DATA, 42, new Uint8Array(1000))))).toBe("DATA stream=42 bytes=1000");
    expect(describeFrame(decodeFrame(encodeFrame(FrameType.PING, 0, new Uint8Array(8))))).toBe("PING stream=0 bytes=8");
  });

  test("falls back to the number for a type it does not know", () => {
    expect(describeFrame({ type: 0x7f as FrameTypeValue, stream: 1, payload: new Uint8Array(2), fin: false })).toBe("127 stream=1 bytes=2");
  });
});
