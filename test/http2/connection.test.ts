/**
 * The HTTP/2 server connection's state machine (src/http2/connection.ts and
 * its parts), fed raw bytes: the preface and SETTINGS, requests on streams,
 * header blocks in pieces, flow control both ways with credit, backpressure,
 * trailers, stream states and the errors each wrong frame is.
 */
import { describe, expect, test } from "bun:test";
import { H2_STREAM_WINDOW } from "../../src/http2/limits.ts";
import type { H2Stream } from "../../src/http2/stream.ts";
import {
  data,
  dataFrames,
  ErrorCode,
  Flag,
  frame,
  FrameType,
  getFields,
  goaway,
  headers,
  literalBlock,
  ping,
  PREFACE,
  rstStream,
  Setting,
  settings,
  settingsAck,
  u32,
  u32At,
  windowUpdate,
} from "../harness/h2-frames.ts";
import { engine } from "./engine.ts";

const text = (s: string) => new TextEncoder().encode(s);

/** Answers each request 200 with "ok" at once. */
const answer = (s: H2Stream) => {
  s.respond(200, [["content-type", "text/plain"]]);
  s.write(text("ok"));
  s.end();
};

describe("preface and SETTINGS", () => {
  test("the server's SETTINGS say its limits, it opens the connection window, and it acknowledges the client's", () => {
    using e = engine({ limits: { maxConcurrentStreams: 7, maxHeaderListBytes: 9000 } });
    const [first, second, third] = e.frames.frames;
    expect(first!.type).toBe(FrameType.SETTINGS);
    const pairs = new Map<number, number>();
    for (let at = 0; at < first!.payload.byteLength; at += 6) pairs.set((first!.payload[at]! << 8) | first!.payload[at + 1]!, u32At(first!.payload, at + 2));
    expect(pairs.get(Setting.MAX_CONCURRENT_STREAMS)).toBe(7);
    expect(pairs.get(Setting.MAX_HEADER_LIST_SIZE)).toBe(9000);
    expect(pairs.get(Setting.INITIAL_WINDOW_SIZE)).toBe(H2_STREAM_WINDOW);
    expect(second!.type).toBe(FrameType.WINDOW_UPDATE);
    expect(third!.type).toBe(FrameType.SETTINGS);
    expect(third!.flags).toBe(Flag.ACK);
  });

  test("a preface cut anywhere is read whole", () => {
    using e = engine({ preface: false, onRequest: answer });
    const bytes = Buffer.concat([PREFACE, settings(), headers(1, getFields())]);
    for (const b of bytes) e.send(new Uint8Array([b]));
    expect(e.streams.length).toBe(1);
  });

  test("bytes that are not the preface: GOAWAY PROTOCOL_ERROR and the connection closes", () => {
    using e = engine({ preface: false });
    e.send(text("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
    expect(e.frames.goawayCode).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(e.closedBy).toBe("close");
  });

  test("a first frame other than SETTINGS is a PROTOCOL_ERROR", () => {
    using e = engine({ preface: false });
    e.send(PREFACE, ping());
    expect(e.frames.goawayCode).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  test("PING is answered with its payload; a PING ACK is not answered", () => {
    using e = engine();
    e.send(ping(false, [9, 8, 7, 6, 5, 4, 3, 2]), ping(true));
    const acks = e.frames.of(FrameType.PING);
    expect(acks.length).toBe(1);
    expect([...acks[0]!.payload]).toEqual([9, 8, 7, 6, 5, 4, 3, 2]);
    expect(acks[0]!.flags).toBe(Flag.ACK);
  });

  test("bad SETTINGS: a length not a multiple of 6, an ACK with a payload, MAX_FRAME_SIZE out of range, ENABLE_PUSH 2", () => {
    for (const [bytes, code] of [
      [frame(FrameType.SETTINGS, 0, 0, [0, 1, 0, 0, 0]), ErrorCode.FRAME_SIZE_ERROR],
      [frame(FrameType.SETTINGS, Flag.ACK, 0, [0, 0, 0, 0, 0, 0]), ErrorCode.FRAME_SIZE_ERROR],
      [settings([[Setting.MAX_FRAME_SIZE, 100]]), ErrorCode.PROTOCOL_ERROR],
      [settings([[Setting.ENABLE_PUSH, 2]]), ErrorCode.PROTOCOL_ERROR],
      [settings([[Setting.INITIAL_WINDOW_SIZE, 2 ** 31]]), ErrorCode.FLOW_CONTROL_ERROR],
    ] as const) {
      using e = engine();
      e.send(bytes);
      expect(e.frames.goawayCode).toBe(code);
    }
  });
});

describe("requests and responses", () => {
  test("a request's stream carries method, scheme, authority, path, its fields in order and its peer; the response comes back", async () => {
    using e = engine({ onRequest: answer });
    e.send(headers(1, getFields("/a?b=1", [["accept", "*/*"], ["cookie", "a=1"], ["cookie", "b=2"]])));
    const s = e.streams[0]!;
    expect(s.request).toEqual({ method: "GET", scheme: "http", authority: "h2.localhost", path: "/a?b=1", fields: [["accept", "*/*"], ["cookie", "a=1"], ["cookie", "b=2"]], contentLength: -1 });
    expect(s.peer.address).toBe("192.0.2.7");
    expect(s.hasBody).toBe(false);
    await e.settle();
    expect(e.frames.status(1)).toBe("200");
    expect(e.frames.body(1)).toBe("ok");
    expect(e.frames.of(FrameType.DATA).at(-1)!.flags & Flag.END_STREAM).toBe(Flag.END_STREAM);
    expect(e.conn.streams.size).toBe(0);
  });

  test("a header block in HEADERS and CONTINUATION frames is one request", () => {
    using e = engine();
    const block = literalBlock(getFields("/continued", [["x-long", "y".repeat(300)]]));
    e.send(
      frame(FrameType.HEADERS, Flag.END_STREAM, 1, block.subarray(0, 10)),
      frame(FrameType.CONTINUATION, 0, 1, block.subarray(10, 100)),
      frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, block.subarray(100)),
    );
    expect(e.streams[0]!.request.path).toBe("/continued");
    expect(e.streams[0]!.request.fields).toEqual([["x-long", "y".repeat(300)]]);
  });

  test("a frame of any other kind inside a header block is a PROTOCOL_ERROR", () => {
    using e = engine();
    const block = literalBlock(getFields());
    e.send(frame(FrameType.HEADERS, Flag.END_STREAM, 1, block.subarray(0, 5)), ping());
    expect(e.frames.goawayCode).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  test("a large response head goes out in HEADERS and CONTINUATION frames of the client's frame size", async () => {
    using e = engine({ onRequest: (s) => s.respond(200, [["x-big", "z".repeat(40_000)]], true) });
    e.send(headers(1, getFields()));
    await e.settle();
    const head = e.frames.frames.filter((f) => f.type === FrameType.HEADERS || f.type === FrameType.CONTINUATION);
    expect(head.length).toBeGreaterThan(1);
    for (const f of head) expect(f.payload.byteLength).toBeLessThanOrEqual(16_384);
    expect(e.frames.heads[0]!.fields.find(([n]) => n === "x-big")![1].length).toBe(40_000);
  });

  test("a request body arrives with its END_STREAM; bytes before a handler is set wait for it", async () => {
    using e = engine();
    e.send(headers(1, getFields("/up", [["content-length", "11"]]), false), data(1, "hello "), data(1, "world", true));
    const s = e.streams[0]!;
    expect(s.hasBody).toBe(true);
    let got = "";
    let ended = false;
    s.onData = (c) => (got += Buffer.from(c).toString());
    s.onEnd = () => (ended = true);
    expect(got).toBe("hello world");
    expect(ended).toBe(true);
  });

  test("request trailers come before the end; response trailers end the stream after its body", async () => {
    const order: string[] = [];
    using e = engine({
      onRequest: (s) => {
        s.onData = (c) => order.push(`data ${Buffer.from(c)}`);
        s.onTrailers = (f) => order.push(`trailers ${f.map(([n, v]) => `${n}=${v}`)}`);
        s.onEnd = () => {
          order.push("end");
          s.respond(200, []);
          s.write(text("body"));
          s.end([["grpc-status", "0"]]);
        };
      },
    });
    e.send(headers(1, getFields("/t"), false), data(1, "x"), headers(1, [["x-sum", "1"]]));
    await e.settle();
    expect(order).toEqual(["data x", "trailers x-sum=1", "end"]);
    const last = e.frames.heads.at(-1)!;
    expect(last.fields).toEqual([["grpc-status", "0"]]);
    expect(last.endStream).toBe(true);
  });

  test("a second HEADERS without END_STREAM is malformed: RST_STREAM PROTOCOL_ERROR", () => {
    using e = engine();
    e.send(headers(1, getFields(), false), headers(1, [["x-a", "1"]], false));
    expect(e.frames.resets().get(1)).toBe(ErrorCode.PROTOCOL_ERROR);
  });

  test("a body before the head, or a 101, resets the stream INTERNAL_ERROR (the caller's mistake)", async () => {
    using e = engine({ onRequest: (s) => (s.request.path === "/a" ? s.write(text("x")) : s.respond(101, [])) });
    e.send(headers(1, getFields("/a")), headers(3, getFields("/b")));
    await e.settle();
    expect(e.frames.resets().get(1)).toBe(ErrorCode.INTERNAL_ERROR);
    expect(e.frames.resets().get(3)).toBe(ErrorCode.INTERNAL_ERROR);
  });

  test("a whole response while the request's body still comes, with nobody reading it: RST_STREAM NO_ERROR, its bytes not kept", async () => {
    using e = engine({ onRequest: (s) => s.respond(413, [], true) });
    e.send(headers(1, getFields("/up"), false), data(1, "unread"));
    await e.settle();
    expect(e.frames.status(1)).toBe("413");
    expect(e.frames.resets().get(1)).toBe(ErrorCode.NO_ERROR);
    expect(e.conn.streams.size).toBe(0);
    expect(e.frames.goawayCode).toBeUndefined();
  });

  test("informational heads before the final one", async () => {
    using e = engine({
      onRequest: (s) => {
        s.respond(100, []);
        s.respond(200, [], true);
      },
    });
    e.send(headers(1, getFields()));
    await e.settle();
    expect(e.frames.heads.map((h) => h.fields[0]![1])).toEqual(["100", "200"]);
  });
});

describe("malformed requests are stream errors (RFC 9113 §8.1.1), and the connection goes on", () => {
  const cases: [string, [string, string][]][] = [
    ["an upper-case field name", getFields("/", [["X-Up", "1"]])],
    ["a connection-specific field", getFields("/", [["connection", "keep-alive"]])],
    ["Transfer-Encoding", getFields("/", [["transfer-encoding", "chunked"]])],
    ["TE other than trailers", getFields("/", [["te", "gzip"]])],
    ["a CR LF in a value", getFields("/", [["x-a", "1\r\nx-injected: 2"]])],
    ["a NUL in a value", getFields("/", [["x-a", "1\0"]])],
    ["whitespace at a value's end", getFields("/", [["x-a", "1 "]])],
    ["no :path", [[":method", "GET"], [":scheme", "http"], [":authority", "a"]]],
    ["an empty :path", getFields("")],
    ["a :path with a space", getFields("/a b")],
    ["two :method", [[":method", "GET"], ...getFields()]],
    ["a pseudo-header after a regular field", [[":method", "GET"], [":scheme", "http"], ["x-a", "1"], [":path", "/"]]],
    ["an unknown pseudo-header", getFields("/", [[":protocol", "websocket"]]).sort((a) => (a[0].startsWith(":") ? -1 : 1))],
    [":status in a request", [[":status", "200"], ...getFields()]],
    ["userinfo in :authority", [[":method", "GET"], [":scheme", "http"], [":authority", "u@h"], [":path", "/"]]],
    ["a Host that differs from :authority", getFields("/", [["host", "other.localhost"]])],
    ["a :scheme other than http(s)", [[":method", "GET"], [":scheme", "ftp"], [":authority", "a"], [":path", "/"]]],
    ["END_STREAM with a content-length above 0", getFields("/", [["content-length", "5"]])],
  ];
  for (const [what, fields] of cases) {
    test(what, () => {
      using e = engine({ onRequest: answer });
      e.send(headers(1, fields), headers(3, getFields("/next")));
      expect(e.frames.resets().get(1)).toBe(ErrorCode.PROTOCOL_ERROR);
      expect(e.streams.map((s) => s.id)).toEqual([3]);
      expect(e.frames.goawayCode).toBeUndefined();
    });
  }

  test("a body longer or shorter than its content-length", () => {
    using e = engine();
    e.send(headers(1, getFields("/", [["content-length", "3"]]), false), data(1, "abcd", true));
    e.send(headers(3, getFields("/", [["content-length", "3"]]), false), data(3, "ab", true));
    expect(e.frames.resets().get(1)).toBe(ErrorCode.PROTOCOL_ERROR);
    expect(e.frames.resets().get(3)).toBe(ErrorCode.PROTOCOL_ERROR);
  });
});

describe("stream states (RFC 9113 §5.1)", () => {
  test("DATA after the client's END_STREAM: RST_STREAM STREAM_CLOSED", () => {
    using e = engine();
    e.send(headers(1, getFields("/hold")), data(1, "late"));
    expect(e.frames.resets().get(1)).toBe(ErrorCode.STREAM_CLOSED);
  });

  test("DATA on a stream never opened, HEADERS on an even stream, PUSH_PROMISE, CONTINUATION without HEADERS: PROTOCOL_ERROR", () => {
    for (const bytes of [data(5, "x"), headers(2, getFields()), frame(FrameType.PUSH_PROMISE, Flag.END_HEADERS, 1, [0, 0, 0, 2]), frame(FrameType.CONTINUATION, Flag.END_HEADERS, 1, [])]) {
      using e = engine();
      e.send(bytes);
      expect(e.frames.goawayCode).toBe(ErrorCode.PROTOCOL_ERROR);
    }
  });

  test("HEADERS reusing a closed stream's id: STREAM_CLOSED; a lower new id: likewise", async () => {
    using e = engine({ onRequest: answer });
    e.send(headers(5, getFields()));
    await e.settle();
    e.send(headers(3, getFields()));
    expect(e.frames.goawayCode).toBe(ErrorCode.STREAM_CLOSED);
  });

  test("the client's RST_STREAM tells the stream's onReset, and late frames for it are dropped", () => {
    const resets: string[] = [];
    using e = engine({ onRequest: (s) => (s.onReset = (code) => resets.push(code)) });
    e.send(headers(1, getFields(), false), rstStream(1, ErrorCode.CANCEL), windowUpdate(1, 100));
    expect(resets).toEqual(["CANCEL"]);
    expect(e.conn.streams.size).toBe(0);
    expect(e.frames.goawayCode).toBeUndefined();
  });

  test("PRIORITY is read and dropped; one naming its own stream is a PROTOCOL_ERROR stream error", () => {
    using e = engine();
    e.send(frame(FrameType.PRIORITY, 0, 3, [0, 0, 0, 1, 16]), frame(FrameType.PRIORITY, 0, 5, [0, 0, 0, 5, 16]));
    expect([...e.frames.resets()]).toEqual([[5, ErrorCode.PROTOCOL_ERROR]]);
    expect(e.frames.goawayCode).toBeUndefined();
  });

  test("frames of unknown types are ignored", () => {
    using e = engine({ onRequest: answer });
    e.send(frame(0xbb, 0, 0, [1, 2]), headers(1, getFields()));
    expect(e.streams.length).toBe(1);
  });
});

describe("flow control, receiving: credit", () => {
  test("a stream's window reopens only as its consumer takes the bytes", () => {
    using e = engine();
    e.send(headers(1, getFields("/up"), false), dataFrames(1, new Uint8Array(200_000)));
    const s = e.streams[0]!;
    let taken = 0;
    s.onData = (c) => (taken += c.byteLength);
    const streamUpdates = () => e.frames.of(FrameType.WINDOW_UPDATE).filter((f) => f.stream === 1);
    expect(taken).toBe(200_000);
    expect(streamUpdates().length).toBe(0);
    s.consumed(100_000);
    e.send(ping()); // a read flushes what the consumer's credit made
    expect(streamUpdates().length).toBe(0); // below half a window
    s.consumed(100_000);
    e.send(ping());
    expect(u32At(streamUpdates()[0]!.payload)).toBe(200_000);
  });

  test("a slow consumer holds back its stream only: the connection's window reopens as bytes arrive", () => {
    using e = engine({ limits: { maxConcurrentStreams: 4 } });
    for (const id of [1, 3, 5]) e.send(headers(id, getFields("/slow"), false), dataFrames(id, new Uint8Array(H2_STREAM_WINDOW)));
    // no stream consumed a byte, yet the connection is open: a fourth stream may send
    const connectionUpdates = e.frames.of(FrameType.WINDOW_UPDATE).filter((f) => f.stream === 0);
    expect(connectionUpdates.length).toBeGreaterThan(1);
    e.send(headers(7, getFields("/fast"), false), data(7, "still flowing", true));
    let got = "";
    e.streams[3]!.onData = (c) => (got += Buffer.from(c));
    expect(got).toBe("still flowing");
  });

  test("a stream overrunning its window is reset FLOW_CONTROL_ERROR; the others go on", () => {
    using e = engine({ onRequest: (s) => (s.onData = () => {}) });
    e.send(headers(1, getFields(), false), headers(3, getFields(), false));
    for (let i = 0; i < 16; i++) e.send(data(1, new Uint8Array(16_384)));
    e.send(data(1, new Uint8Array(1)), data(3, "fine", true));
    expect(e.frames.resets().get(1)).toBe(ErrorCode.FLOW_CONTROL_ERROR);
    expect(e.frames.resets().has(3)).toBe(false);
  });
});

describe("flow control, sending", () => {
  test("DATA stays within the client's stream window; write says false, and its WINDOW_UPDATE sends the rest and onDrain", async () => {
    let s!: H2Stream;
    let drained = false;
    using e = engine({ settings: [[Setting.INITIAL_WINDOW_SIZE, 100]], onRequest: (x) => (s = x) });
    e.send(headers(1, getFields()));
    s.respond(200, []);
    s.onDrain = () => (drained = true);
    expect(s.write(new Uint8Array(1000))).toBe(false);
    s.end();
    await e.settle();
    expect(e.frames.body(1).length).toBe(100);
    e.send(windowUpdate(1, 900));
    expect(e.frames.body(1).length).toBe(1000);
    expect(drained).toBe(true);
    expect(e.frames.of(FrameType.DATA).at(-1)!.flags & Flag.END_STREAM).toBe(Flag.END_STREAM);
  });

  test("a raised SETTINGS_INITIAL_WINDOW_SIZE opens every stream's window", async () => {
    let s!: H2Stream;
    using e = engine({ settings: [[Setting.INITIAL_WINDOW_SIZE, 0]], onRequest: (x) => (s = x) });
    e.send(headers(1, getFields()));
    s.respond(200, []);
    s.write(new Uint8Array(500));
    await e.settle();
    expect(e.frames.body(1).length).toBe(0);
    e.send(settings([[Setting.INITIAL_WINDOW_SIZE, 1000]]));
    expect(e.frames.body(1).length).toBe(500);
  });

  test("DATA frames are no larger than the client's SETTINGS_MAX_FRAME_SIZE", async () => {
    using e = engine({ onRequest: (s) => (s.respond(200, []), s.write(new Uint8Array(50_000)), s.end()) });
    e.send(headers(1, getFields()));
    await e.settle();
    const sizes = e.frames.of(FrameType.DATA).map((f) => f.payload.byteLength);
    expect(Math.max(...sizes)).toBe(16_384);
    expect(sizes.reduce((a, b) => a + b)).toBe(50_000);
  });

  test("a client's larger SETTINGS_MAX_FRAME_SIZE is followed up to 64 KiB, never to its 16 MB", async () => {
    using e = engine({ settings: [[Setting.MAX_FRAME_SIZE, 16_777_215], [Setting.INITIAL_WINDOW_SIZE, 1 << 24]], onRequest: (s) => (s.respond(200, []), s.write(new Uint8Array(1_000_000)), s.end()) });
    e.send(windowUpdate(0, 1 << 24), headers(1, getFields()));
    await e.settle();
    const sizes = e.frames.of(FrameType.DATA).map((f) => f.payload.byteLength);
    expect(Math.max(...sizes)).toBe(64 * 1024);
    expect(sizes.reduce((a, b) => a + b)).toBe(1_000_000);
  });

  test("a full socket: writes say false and nothing more is framed until drained()", async () => {
    let s!: H2Stream;
    using e = engine({ settings: [[Setting.INITIAL_WINDOW_SIZE, 1 << 20]], onRequest: (x) => (s = x) });
    e.send(windowUpdate(0, 1 << 20), headers(1, getFields()));
    e.full = true;
    s.respond(200, []);
    s.write(new Uint8Array(100_000)); // fills a batch: it goes to the socket, which says it is full
    await e.settle();
    const framed = e.frames.body(1).length;
    expect(s.write(new Uint8Array(10))).toBe(false);
    await e.settle();
    expect(e.frames.body(1).length).toBe(framed);
    let drained = false;
    s.onDrain = () => (drained = true);
    e.full = false;
    e.conn.drained();
    await e.settle();
    expect(e.frames.body(1).length).toBe(100_010);
    expect(drained).toBe(true);
  });
});

describe("the connection's end", () => {
  test("the client's GOAWAY: streams in flight finish, then the connection closes", async () => {
    let s!: H2Stream;
    using e = engine({ onRequest: (x) => (s = x) });
    e.send(headers(1, getFields()), goaway(1, ErrorCode.NO_ERROR));
    expect(e.closedBy).toBeUndefined();
    answer(s);
    await e.settle();
    expect(e.closedBy).toBe("close");
  });

  test("goAway(): GOAWAY with the last stream, later streams not served, closed once the last is done", async () => {
    let first!: H2Stream;
    using e = engine({ onRequest: (x) => (first ??= x) });
    e.send(headers(1, getFields()));
    e.conn.goAway();
    e.send(headers(3, getFields()));
    expect(e.streams.length).toBe(1);
    const g = e.frames.of(FrameType.GOAWAY)[0]!;
    expect(u32At(g.payload)).toBe(1);
    answer(first);
    await e.settle();
    expect(e.closedBy).toBe("close");
  });

  test("idle past the idle timeout: GOAWAY NO_ERROR and closed; a stream in flight keeps it open", () => {
    using e = engine({ limits: { idleTimeoutMs: 1000 } });
    e.send(settingsAck(), headers(1, getFields("/hold"), false));
    e.conn.tick(performance.now() + 5_000);
    expect(e.closedBy).toBeUndefined();
    e.send(rstStream(1, ErrorCode.CANCEL));
    e.conn.tick(performance.now() + 5_000);
    expect(e.frames.goawayCode).toBe(ErrorCode.NO_ERROR);
    expect(e.closedBy).toBe("close");
  });

  test("our SETTINGS never acknowledged: SETTINGS_TIMEOUT", () => {
    using e = engine({ limits: { idleTimeoutMs: 1000 } });
    e.send(headers(1, getFields("/hold"), false));
    e.conn.tick(performance.now() + 5_000);
    expect(e.frames.goawayCode).toBe(ErrorCode.SETTINGS_TIMEOUT);
  });

  test("a half-closed client: requests not yet whole are reset, the connection closes", () => {
    const resets: string[] = [];
    using e = engine({ onRequest: (s) => (s.onReset = (c) => resets.push(c)) });
    e.send(headers(1, getFields(), false));
    e.conn.ended();
    expect(resets).toEqual(["CANCEL"]);
    expect(e.closedBy).toBe("close");
  });

  test("the socket gone: every stream is told", () => {
    const resets: string[] = [];
    const e = engine({ onRequest: (s) => (s.onReset = (c) => resets.push(c)) });
    e.send(headers(1, getFields(), false), headers(3, getFields(), false));
    e.conn.closed();
    expect(resets).toEqual(["CANCEL", "CANCEL"]);
  });

  test("a handler that throws resets its stream INTERNAL_ERROR; the connection goes on", () => {
    using e = engine({
      onRequest: (s) => {
        if (s.id === 1) throw new Error("a bug");
        answer(s);
      },
    });
    e.send(headers(1, getFields()), headers(3, getFields()));
    expect(e.frames.resets().get(1)).toBe(ErrorCode.INTERNAL_ERROR);
    expect(e.frames.goawayCode).toBeUndefined();
  });
});

test("window update frames carry 31 bits (the reserved bit is ignored)", () => {
  using e = engine();
  e.send(frame(FrameType.WINDOW_UPDATE, 0, 0, u32(0x80000001)));
  expect(e.frames.goawayCode).toBeUndefined();
});
