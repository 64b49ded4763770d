/**
 * The HTTP/2 client connection (src/http2/client-connection.ts) without a
 * socket: fed a server's frames as bytes, its writes read back as frames.
 * What a client must do on its own (the preface and SETTINGS first, stream
 * ids odd and rising, PING answered), what it must refuse from a server
 * (a first frame other than SETTINGS, push, frames on streams it never
 * opened), and its clocks (the server's SETTINGS in time, an idle
 * connection closed), driven by calling the sweep's tick with a time.
 */
import { describe, expect, test } from "bun:test";
import { Http2ClientConnection, type Http2ClientOwner } from "../../src/http2/client-connection.ts";
import { DEFAULT_H2_CLIENT_LIMITS } from "../../src/http2/client-limits.ts";
import type { H2ResponseHandler } from "../../src/http2/client-stream.ts";
import { ErrorCode, Flag, frame, FrameType, headers, literalBlock, ping, PREFACE, ServerFrames, Setting, settings, u32At } from "../harness/h2-frames.ts";

const GET: [string, string][] = [[":method", "GET"], [":scheme", "http"], [":authority", "svc"], [":path", "/"]];

/** A client connection on a fake socket: what it wrote (after its preface), and what its owner was told. */
function client(limits = DEFAULT_H2_CLIENT_LIMITS) {
  const written: Uint8Array[] = [];
  const told = { slots: 0, closed: [] as { why: string; ready: boolean }[], closedSocket: false };
  const owner: Http2ClientOwner = { slots: () => void told.slots++, closed: (why, ready) => void told.closed.push({ why, ready }) };
  const conn = new Http2ClientConnection(
    { write: (b) => (written.push(Buffer.from(b)), true), close: () => void (told.closedSocket = true), terminate: () => void (told.closedSocket = true) },
    limits,
    owner,
  );
  /** What the client sent so far, its preface checked and taken off, as frames. */
  const sent = (): ServerFrames => {
    const all = Buffer.concat(written);
    expect(all.subarray(0, PREFACE.byteLength).equals(Buffer.from(PREFACE))).toBe(true);
    const frames = new ServerFrames();
    frames.push(all.subarray(PREFACE.byteLength));
    return frames;
  };
  return { conn, sent, told };
}

/** The microtasks queued so far: the client's batched writes and its owner's news go out in one. */
const turn = () => Promise.resolve();

const handler = (): H2ResponseHandler & { heads: number[]; ended: boolean; resets: string[] } => {
  const h = { heads: [] as number[], ended: false, resets: [] as string[] };
  return Object.assign(h, {
    head: (status: number) => void h.heads.push(status),
    data() {},
    end: () => void (h.ended = true),
    reset: (r: { why: string }) => void h.resets.push(r.why),
    drained() {},
  });
};

describe("what a client says first", () => {
  test("the preface, then SETTINGS with push off, its window and header list bound, and the connection's window opened", async () => {
    const { sent } = client();
    await turn();
    const frames = sent();
    const first = frames.frames[0]!;
    expect(first.type).toBe(FrameType.SETTINGS);
    const pairs = new Map<number, number>();
    for (let at = 0; at < first.payload.byteLength; at += 6) pairs.set((first.payload[at]! << 8) | first.payload[at + 1]!, u32At(first.payload, at + 2));
    expect(pairs.get(Setting.ENABLE_PUSH)).toBe(0);
    expect(pairs.get(Setting.INITIAL_WINDOW_SIZE)).toBe(DEFAULT_H2_CLIENT_LIMITS.streamWindow);
    expect(pairs.get(Setting.MAX_HEADER_LIST_SIZE)).toBe(DEFAULT_H2_CLIENT_LIMITS.maxHeaderListBytes);
    expect(frames.of(FrameType.WINDOW_UPDATE).map((f) => [f.stream, u32At(f.payload)])).toEqual([[0, DEFAULT_H2_CLIENT_LIMITS.maxStreams * DEFAULT_H2_CLIENT_LIMITS.streamWindow - 65_535]]);
  });

  test("no stream opens before the server's SETTINGS; then they open with odd, rising ids, and the SETTINGS are acknowledged", async () => {
    const { conn, sent, told } = client();
    expect(conn.available).toBe(0);
    conn.received(settings([[Setting.MAX_CONCURRENT_STREAMS, 2]]));
    await turn();
    expect(told.slots).toBe(1);
    expect(conn.available).toBe(2);
    const a = conn.open(GET, true, handler());
    const b = conn.open(GET, true, handler());
    expect([a.id, b.id]).toEqual([1, 3]);
    expect(conn.available).toBe(0);
    expect(() => conn.open(GET, true, handler())).toThrow();
    await turn();
    const frames = sent();
    expect(frames.of(FrameType.SETTINGS).filter((f) => f.flags & Flag.ACK)).toHaveLength(1);
    expect(frames.heads.map((h) => [h.stream, h.endStream])).toEqual([[1, true], [3, true]]);
    expect(frames.heads[0]!.fields).toEqual(GET);
  });

  test("a PING is answered with its own bytes", async () => {
    const { conn, sent } = client();
    conn.received(Buffer.concat([settings(), ping(false, [9, 8, 7, 6, 5, 4, 3, 2])]));
    await turn();
    const acks = sent().of(FrameType.PING);
    expect(acks.map((f) => [f.flags, [...f.payload]])).toEqual([[Flag.ACK, [9, 8, 7, 6, 5, 4, 3, 2]]]);
  });
});

describe("what a client refuses from a server", () => {
  const refusals: [string, () => Uint8Array, RegExp][] = [
    ["a first frame other than SETTINGS", () => ping(), /PROTOCOL_ERROR: the server's first frame must be SETTINGS/],
    ["push, which it turned off", () => Buffer.concat([settings(), frame(FrameType.PUSH_PROMISE, Flag.END_HEADERS, 1, [0, 0, 0, 2])]), /PROTOCOL_ERROR: PUSH_PROMISE though push is off/],
    ["SETTINGS_ENABLE_PUSH set by a server", () => settings([[Setting.ENABLE_PUSH, 1]]), /PROTOCOL_ERROR: SETTINGS_ENABLE_PUSH from a server/],
    ["HEADERS on a stream it never opened", () => Buffer.concat([settings(), headers(5, [[":status", "200"]])]), /PROTOCOL_ERROR: HEADERS on stream 5, which this side did not open/],
    ["a stream of the server's own (an even id)", () => Buffer.concat([settings(), headers(2, [[":status", "200"]])]), /PROTOCOL_ERROR: HEADERS on stream 2/],
    ["a frame larger than its SETTINGS_MAX_FRAME_SIZE", () => Buffer.concat([settings(), frame(FrameType.PING, 0, 0, new Uint8Array(20_000))]), /FRAME_SIZE_ERROR/],
  ];
  for (const [what, bytes, why] of refusals) {
    test(`${what}: GOAWAY with the code, the owner told why`, async () => {
      const { conn, sent, told } = client();
      conn.received(bytes());
      await turn();
      expect(told.closed).toEqual([{ why: expect.stringMatching(why), ready: expect.any(Boolean) }]);
      expect(sent().goawayCode).toBeGreaterThan(0);
      expect(told.closedSocket).toBe(true);
      expect(conn.available).toBe(0);
    });
  }

  test("an HTTP/1.1 answer to the preface is told as such, not as a broken frame", async () => {
    const { conn, told } = client();
    conn.received(Buffer.from("HTTP/1.1 400 Bad Request\r\n\r\n", "latin1"));
    expect(told.closed).toEqual([{ why: "the service answered in HTTP/1.1: it does not speak HTTP/2 with prior knowledge (h2c)", ready: false }]);
  });

  test("a stream open when the connection fails is told why", async () => {
    const { conn } = client();
    conn.received(settings());
    await turn();
    const h = handler();
    conn.open(GET, true, h);
    conn.received(frame(FrameType.WINDOW_UPDATE, 0, 0, [0, 0, 0, 0]));
    expect(h.resets).toEqual(["the service broke HTTP/2 (PROTOCOL_ERROR: a WINDOW_UPDATE of 0)"]);
  });
});

describe("the clocks", () => {
  test("no SETTINGS from the server in time: closed, the owner told it never spoke HTTP/2", () => {
    const limits = { ...DEFAULT_H2_CLIENT_LIMITS, settingsTimeoutMs: 1_000 };
    const { conn, sent, told } = client(limits);
    conn.tick(performance.now() + 500);
    expect(told.closed).toEqual([]);
    conn.tick(performance.now() + 1_000);
    expect(told.closed).toEqual([{ why: "no HTTP/2 SETTINGS from the service within 1 s: does it speak HTTP/2?", ready: false }]);
    expect(sent().goawayCode).toBe(ErrorCode.SETTINGS_TIMEOUT);
  });

  test("an idle connection closes politely (GOAWAY NO_ERROR); one with a stream open does not", async () => {
    const limits = { ...DEFAULT_H2_CLIENT_LIMITS, idleTimeoutMs: 1_000 };
    const { conn, sent, told } = client(limits);
    conn.received(settings());
    await turn();
    const s = conn.open(GET, true, handler());
    conn.tick(performance.now() + 5_000);
    expect(told.closed).toEqual([]);
    conn.received(headers(s.id, literalBlock([[":status", "204"]]), true));
    expect(s.isClosed).toBe(true);
    conn.tick(performance.now() + 5_000);
    expect(told.closed).toEqual([{ why: "idle", ready: true }]);
    expect(sent().goawayCode).toBe(ErrorCode.NO_ERROR);
  });
});
