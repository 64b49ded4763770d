/**
 * Length-field wrap (frp GHSA-26gq class): a length field near 2^32 (or
 * 2^53, or 2^64) must never wrap a bound check into letting a reader read
 * past its input, allocate what the field claims, or wait for bytes that can
 * never come. Every length-prefixed reader of the codebase is fed such
 * lengths here, unit by unit: the mux frame header (a message's and the
 * direct port's byte stream), WINDOW credit and DATAGRAM payloads, the PROXY
 * protocol v2 header the agent writes, DNS over TCP and DNS messages, TLS
 * records and the ClientHello's nested lengths, WebSocket frames (64-bit
 * lengths), chunk sizes and Content-Length. Each must refuse cleanly with its
 * own error value or code, or, where a large length is legal (a WebSocket
 * frame, a body of 4 GiB), follow it exactly, without wrapping it.
 *
 * A u32 field cannot hold 2^32 or more, a u16 cannot hold 2^16: those
 * readers are fed their largest values and the values whose sum with an
 * offset or a header wraps in 32 bits. The end-to-end half (the real server
 * taking such lengths and answering the next client) is in
 * length-wrap-server.test.ts.
 */
import { describe, expect, test } from "bun:test";
import type { Socket } from "bun";
import { RECURSION_DESIRED, encode } from "dns-packet";
import { ChallengeRecords } from "../../src/dns/challenge-records.ts";
import { answerQuery } from "../../src/dns/answer.ts";
import { readAnswer } from "../../src/dns/probe.ts";
import { startDnsResponder } from "../../src/dns/responder.ts";
import { MAX_QUERY_BYTES } from "../../src/dns/wire.ts";
import { ChunkedDecoder } from "../../src/http/chunked.ts";
import { RequestBodyReader } from "../../src/http/request-body.ts";
import { isRefusal, parseRequestHead, type RequestHead } from "../../src/http/request-head.ts";
import { framingOf } from "../../src/http/response-head-bytes.ts";
import { parseHead } from "../../src/http/response-head.ts";
import { ResponseParser } from "../../src/http/response-reader.ts";
import { WebSocketFrameReader, type WsMessage } from "../../src/http/ws-frame-reader.ts";
import { FrameReader } from "../../src/protocol/frame-reader.ts";
import { checkHeader, decodeFrame, decodeFrames, encodeFrame, ProtocolError, u32Payload, type Frame } from "../../src/protocol/frames.ts";
import { Mux } from "../../src/protocol/mux.ts";
import { FrameType, HEADER_LENGTH, MAX_DATAGRAM, MAX_PAYLOAD, WireError } from "../../src/protocol/wire.ts";
import { parseEndpoint, proxyV2Header } from "../../src/sockets/proxy-protocol.ts";
import { HelloError, MAX_HELLO_BYTES, parseClientHello, type HelloErrorCode } from "../../src/tls/client-hello.ts";
import { deferred, within } from "../harness/wait.ts";

/** The lengths a u32 field is attacked with: its top, the sign bit, and values that wrap once an offset or the header is added. */
const U32_LENGTHS = [0xffff_ffff, 0xffff_fffe, 0xffff_fff7 /* + HEADER_LENGTH = 2^32 */, 0xffff_fff0, 0x8000_0000, 0x7fff_ffff, 2 ** 31 + 1, MAX_PAYLOAD + 1];

/** A frame header with any length, and `body` bytes after it (fewer than it claims, as an attacker sends). */
function header(type: number, stream: number, length: number, body = 0): Uint8Array {
  const out = new Uint8Array(HEADER_LENGTH + body);
  out[0] = type;
  new DataView(out.buffer).setUint32(1, stream);
  new DataView(out.buffer).setUint32(5, length);
  return out;
}

function protocolError(run: () => unknown): string {
  try {
    run();
  } catch (err) {
    expect(err).toBeInstanceOf(ProtocolError);
    return (err as Error).message;
  }
  throw new Error("no ProtocolError");
}

describe("length wrap: the mux frame header (frames.ts)", () => {
  for (const length of U32_LENGTHS) {
    test(`a length of ${length} (0x${length.toString(16)}) is refused from the header alone, in a message and as a whole frame`, () => {
      for (const type of [FrameType.DATA, FrameType.OPEN, FrameType.DATAGRAM, FrameType.WINDOW]) {
        const bytes = header(type, 2, length, 16);
        expect(protocolError(() => checkHeader(bytes, 0))).toContain(`exceeds ${MAX_PAYLOAD}`);
        expect(protocolError(() => decodeFrames(bytes, () => {}))).toContain(`exceeds ${MAX_PAYLOAD}`);
        expect(protocolError(() => decodeFrame(bytes))).toContain(`exceeds ${MAX_PAYLOAD}`);
      }
    });
  }

  test("after a good frame in the same message, a wrapping length is refused before the good frame's successor is read", () => {
    const good = encodeFrame(FrameType.DATA, 2, new Uint8Array([1, 2, 3]));
    const message = new Uint8Array([...good, ...header(FrameType.DATA, 2, 0xffff_fff7, 4)]);
    const frames: Frame[] = [];
    expect(protocolError(() => decodeFrames(message, (f) => frames.push(f)))).toContain("exceeds");
    expect(frames).toHaveLength(1);
  });

  test("a length within MAX_PAYLOAD but past the message's end is refused, even when the bytes exist in the buffer behind the view", () => {
    // the message is a view of a larger buffer: a reader that bound-checked against the buffer would read the neighbour's bytes
    const backing = new Uint8Array(HEADER_LENGTH + 1000);
    backing.set(header(FrameType.DATA, 2, 100));
    const view = backing.subarray(0, HEADER_LENGTH + 10);
    expect(protocolError(() => decodeFrames(view, () => {}))).toContain("runs past the end");
    expect(protocolError(() => decodeFrame(view))).toContain("runs past the end");
    // and from an offset inside a buffer: the view's own offset is where it starts
    const inner = backing.subarray(5, 5 + HEADER_LENGTH + 10);
    inner.set(header(FrameType.DATA, 2, 200));
    expect(protocolError(() => decodeFrames(inner, () => {}))).toContain("runs past the end");
  });
});

describe("length wrap: the direct port's byte stream (frame-reader.ts)", () => {
  /** A reader with or without the DATA pieces path, recording what it delivers. */
  function reader(pieces: boolean) {
    const delivered: Uint8Array[] = [];
    const got: Frame[] = [];
    const r = new FrameReader(
      (run) => delivered.push(run),
      pieces ? (p) => got.push(p) : undefined,
    );
    return { r, delivered, got };
  }

  for (const length of U32_LENGTHS) {
    for (const pieces of [false, true]) {
      test(`a length of 0x${length.toString(16)} is refused when its header is whole, whole or one byte a read (${pieces ? "DATA passed in pieces" : "frames gathered"}); nothing is held or delivered`, () => {
        for (const type of [FrameType.DATA, FrameType.OPEN, FrameType.DATAGRAM]) {
          // whole, with a few payload bytes
          const whole = reader(pieces);
          expect(protocolError(() => whole.r.push(header(type, 2, length, 32)))).toContain("exceeds");
          expect(whole.r.buffered).toBe(0);
          expect(whole.delivered.length + whole.got.length).toBe(0);
          // one byte a read: nothing is refused before the header is whole, then it is, with at most a header held
          const split = reader(pieces);
          const bytes = header(type, 2, length, 4);
          let refusedAt = -1;
          for (let i = 0; i < bytes.length && refusedAt < 0; i++) {
            try {
              split.r.push(bytes.subarray(i, i + 1));
              expect(split.r.buffered).toBeLessThanOrEqual(HEADER_LENGTH);
            } catch (err) {
              expect(err).toBeInstanceOf(ProtocolError);
              refusedAt = i;
            }
          }
          expect(refusedAt).toBe(HEADER_LENGTH - 1);
          expect(split.delivered.length + split.got.length).toBe(0);
          // and it stays refused: no later read revives it
          expect(() => split.r.push(encodeFrame(FrameType.PING, 0, new Uint8Array(4)))).toThrow(ProtocolError);
        }
      });
    }
  }

  test("a header cut after good frames in the same read, with a wrapping length, is refused and the good frames come out first", () => {
    const { r, delivered } = reader(true);
    const good = encodeFrame(FrameType.PING, 0, new Uint8Array(4));
    const bad = header(FrameType.OPEN, 2, 0xffff_fff7);
    r.push(new Uint8Array([...good, ...bad.subarray(0, 4)]));
    expect(delivered).toHaveLength(1);
    expect(r.buffered).toBe(4);
    expect(() => r.push(bad.subarray(4))).toThrow(ProtocolError);
  });
});

describe("length wrap: WINDOW credit and DATAGRAM payloads (mux.ts)", () => {
  /** A mux (agent side) fed messages by hand after an OPEN of stream 2; the code it closed with, if it did. */
  function feed(kind: "h1" | "udp", ...messages: Uint8Array[]): string | undefined {
    let closed: string | undefined;
    const mux = new Mux({ role: "agent", send: () => "sent", onStream: () => {}, onClose: (code) => (closed = code) });
    const meta = kind === "udp" ? { tunnel: "t", kind, remote: "1.2.3.4:5" } : { tunnel: "t", kind, remote: "1.2.3.4:5", head: "GET / HTTP/1.1\r\nHost: x\r\n\r\n" };
    mux.receive(encodeFrame(FrameType.OPEN, 2, new TextEncoder().encode(JSON.stringify(meta))));
    for (const m of messages) mux.receive(m);
    return closed;
  }

  test("a WINDOW of 0xffffffff, or two that together pass 2^31, end the connection with PROTOCOL_ERROR; a window never wraps", () => {
    expect(feed("h1", encodeFrame(FrameType.WINDOW, 2, u32Payload(0xffff_ffff)))).toBe(WireError.PROTOCOL_ERROR);
    expect(feed("h1", encodeFrame(FrameType.WINDOW, 2, u32Payload(0x8000_0000)))).toBe(WireError.PROTOCOL_ERROR);
    expect(feed("h1", encodeFrame(FrameType.WINDOW, 2, u32Payload(0x3fff_0000)), encodeFrame(FrameType.WINDOW, 2, u32Payload(0x3fff_0000)))).toBe(WireError.PROTOCOL_ERROR);
    // a grant that keeps the window under 2^31 is a grant
    expect(feed("h1", encodeFrame(FrameType.WINDOW, 2, u32Payload(1024 * 1024)))).toBeUndefined();
  });

  test("a DATAGRAM over MAX_DATAGRAM is PROTOCOL_ERROR, and one whose header claims 0xffffffff is refused before its payload", () => {
    expect(feed("udp", encodeFrame(FrameType.DATAGRAM, 2, new Uint8Array(MAX_DATAGRAM + 1)))).toBe(WireError.PROTOCOL_ERROR);
    expect(feed("udp", encodeFrame(FrameType.DATAGRAM, 2, new Uint8Array(MAX_DATAGRAM)))).toBeUndefined();
    expect(feed("udp", header(FrameType.DATAGRAM, 2, 0xffff_ffff, 8))).toBe(WireError.PROTOCOL_ERROR);
  });
});

describe("length wrap: the PROXY protocol v2 header (proxy-protocol.ts)", () => {
  test("a port past 65535 is no endpoint, so no header is written with it wrapped to another port", () => {
    // 65616 = 2^16 + 80: written in two bytes it would say port 80; 2^32 + 80 likewise in four
    for (const port of ["65536", "65616", "131152", "4294967296", "4294967376", "9007199254740993", "18446744073709551696", "1e5", "0x50", "+80", "-80", "80.0"]) {
      expect(parseEndpoint(`203.0.113.7:${port}`)).toBeUndefined();
      expect(parseEndpoint(`[2001:db8::1]:${port}`)).toBeUndefined();
    }
    expect(parseEndpoint("203.0.113.7:65535")).toEqual({ address: "203.0.113.7", port: 65535 });
  });

  test("the header's length field is exactly the bytes after its 16-byte start, for both families, at the largest ports", () => {
    for (const [source, destination, family] of [
      [{ address: "203.0.113.7", port: 65535 }, { address: "198.51.100.1", port: 65535 }, 0x11],
      [{ address: "2001:db8::1", port: 65535 }, { address: "::1", port: 1 }, 0x21],
      [{ address: "10.0.0.1", port: 0 }, { address: "::", port: 65535 }, 0x21],
    ] as const) {
      const h = proxyV2Header(source, destination);
      const view = new DataView(h.buffer, h.byteOffset, h.byteLength);
      expect(h[13]).toBe(family);
      expect(view.getUint16(14)).toBe(h.byteLength - 16);
      expect(view.getUint16(h.byteLength - 4)).toBe(source.port);
      expect(view.getUint16(h.byteLength - 2)).toBe(destination.port);
    }
  });
});

describe("length wrap: DNS messages (dns/answer.ts, dns/probe.ts)", () => {
  const ZONE = "_acme-challenge.tunnels.example.com";
  const zone = { name: ZONE, nameserver: "tunnels.example.com", hostmaster: "hostmaster.tunnels.example.com" };
  const records = new ChallengeRecords();
  const query = () => encode({ type: "query", id: 7, flags: RECURSION_DESIRED, questions: [{ name: ZONE, type: "TXT" }] });
  const withCounts = (counts: [number, number, number, number]) => {
    const q = Buffer.from(query());
    counts.forEach((c, i) => q.writeUInt16BE(c, 4 + 2 * i));
    return q;
  };

  test("a header claiming 0xffff questions, answers, authorities or additionals is FORMERR before anything is decoded", () => {
    for (const counts of [
      [0xffff, 0, 0, 0],
      [1, 0xffff, 0, 0],
      [1, 0, 0xffff, 0],
      [1, 0, 0, 0xffff],
      [0xffff, 0xffff, 0xffff, 0xffff],
    ] as [number, number, number, number][]) {
      const verdict = answerQuery(withCounts(counts), "tcp", zone, records);
      expect(verdict.kind).toBe("answer");
      if (verdict.kind === "answer") expect(verdict.bytes.readUInt16BE(2) & 0xf).toBe(1); // FORMERR
    }
  });

  test("lengths inside the message that run past its end (a label, an OPT record's rdlength, a pointer past the end or to itself) are dropped, never thrown", () => {
    const head = (ar: number) => Buffer.from([0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0, 0, 0, 0, 0, ar]);
    const cases = [
      Buffer.concat([head(0), Buffer.from([0x3f, 0x61, 0x00, 0x10, 0x00, 0x01])]), // a 63-byte label of one byte
      Buffer.concat([head(0), Buffer.from([0xc0, 0x0c, 0x00, 0x10, 0x00, 0x01])]), // a pointer to itself
      Buffer.concat([head(0), Buffer.from([0xff, 0xff, 0x00, 0x10, 0x00, 0x01])]), // a pointer past the end
      // the question, then an OPT record whose rdlength says 0xffff
      Buffer.concat([head(1), Buffer.from(query().subarray(12)), Buffer.from([0x00, 0x00, 0x29, 0x04, 0xd0, 0, 0, 0, 0, 0xff, 0xff, 0x00, 0x0c])]),
      // an OPT option whose length says 0xffff inside an rdata of 4
      Buffer.concat([head(1), Buffer.from(query().subarray(12)), Buffer.from([0x00, 0x00, 0x29, 0x04, 0xd0, 0, 0, 0, 0, 0x00, 0x04, 0x00, 0x0c, 0xff, 0xff])]),
    ];
    for (const q of cases) {
      const verdict = answerQuery(q, "tcp", zone, records);
      expect(verdict.kind).toBe("drop");
    }
    // past what any query is: dropped by its size before it is read
    expect(answerQuery(Buffer.alloc(0xffff), "tcp", zone, records).kind).toBe("drop");
    expect(answerQuery(Buffer.alloc(MAX_QUERY_BYTES + 1), "tcp", zone, records).kind).toBe("drop");
  });

  test("an answer read by dns-check whose counts claim 0xffff records in a short message is silence, not a throw", () => {
    const answer = Buffer.from(encode({ type: "response", id: 9, flags: 0, questions: [{ name: ZONE, type: "TXT" }] }));
    answer.writeUInt16BE(0xffff, 6);
    expect(readAnswer(answer, 9).kind).toBe("silent");
    answer.writeUInt16BE(0xffff, 4);
    expect(readAnswer(answer, 9).kind).toBe("silent");
  });
});

describe("length wrap: DNS over TCP's u16 length (dns/tcp.ts)", () => {
  /** Sends `bytes` on a new connection; resolves true when the responder closes it (within 5 s), false if it stays open. */
  async function closesOn(port: number, bytes: Uint8Array): Promise<boolean> {
    const closed = deferred<void>();
    const socket: Socket<undefined> = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {}, close: () => closed.resolve(), error() {} } });
    socket.write(bytes);
    try {
      await within(closed.promise, 5_000, "the close");
      return true;
    } catch {
      socket.terminate();
      return false;
    }
  }

  test("a length prefix of 0xffff, 0, under a header or over MAX_QUERY_BYTES closes the connection before its bytes come; the next client is answered", async () => {
    const records = new ChallengeRecords();
    const faults: string[] = [];
    using dns = await startDnsResponder({ host: "127.0.0.1", port: 0, zone: "_acme-challenge.tunnels.example.com", records, log: (m) => faults.push(m) });
    for (const length of [0xffff, 0xfffe, 0x8000, 0, 1, 11, MAX_QUERY_BYTES + 1]) {
      // only the two length bytes (and a few more): a reader waiting for `length` bytes would hang here
      expect(await closesOn(dns.tcpPort, new Uint8Array([length >> 8, length & 0xff, 0, 0, 0]))).toBe(true);
    }
    expect(faults.filter((f) => f === "dns tcp message refused")).toHaveLength(7);
    // the next client: a well-formed query is answered
    const q = encode({ type: "query", id: 77, flags: RECURSION_DESIRED, questions: [{ name: "_acme-challenge.tunnels.example.com", type: "TXT" }] });
    const answered = deferred<Buffer>();
    const socket = await Bun.connect({ hostname: "127.0.0.1", port: dns.tcpPort, socket: { data: (_s, d) => answered.resolve(Buffer.from(d)), error() {} } });
    socket.write(Buffer.concat([Buffer.from([q.length >> 8, q.length & 0xff]), q]));
    const got = await within(answered.promise, 5_000, "the answer");
    expect(got.readUInt16BE(2)).toBe(77);
    socket.end();
  });
});

describe("length wrap: TLS records and the ClientHello (tls/client-hello.ts)", () => {
  const u16 = (n: number) => [(n >> 8) & 0xff, n & 0xff];
  const u24 = (n: number) => [(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  /** A hello body with a server name (the lengths around it overridable), and ALPN. */
  function hello(o: { sessionLength?: number; suitesLength?: number; extensionsLength?: number; extensionLength?: number; listLength?: number; nameLength?: number; alpnListLength?: number } = {}) {
    const name = [...Buffer.from("app.tunnels.example.com")];
    const entry = [0, ...u16(o.nameLength ?? name.length), ...name];
    const sni = [...u16(o.listLength ?? entry.length), ...entry];
    const alpnList = [2, ...Buffer.from("h2")];
    const alpn = [...u16(o.alpnListLength ?? alpnList.length), ...alpnList];
    const extensions = [0, 0, ...u16(o.extensionLength ?? sni.length), ...sni, 0, 16, ...u16(alpn.length), ...alpn];
    const body = [3, 3, ...new Array(32).fill(1), o.sessionLength ?? 0, ...u16(o.suitesLength ?? 2), 0x13, 0x01, 1, 0, ...u16(o.extensionsLength ?? extensions.length), ...extensions];
    return body;
  }
  function record(body: number[], o: { handshakeLength?: number; recordLength?: number } = {}) {
    const message = [1, ...u24(o.handshakeLength ?? body.length), ...body];
    return new Uint8Array([22, 3, 1, ...u16(o.recordLength ?? message.length), ...message]);
  }
  function expectCode(bytes: Uint8Array, code: HelloErrorCode) {
    const answer = parseClientHello(bytes);
    expect(answer).toBeInstanceOf(HelloError);
    expect((answer as HelloError).code).toBe(code);
  }

  test("the well-formed hello the cases below corrupt is read", () => {
    expect(parseClientHello(record(hello()))).toEqual({ serverName: "app.tunnels.example.com", alpn: ["h2"] });
  });

  test("a record length of 0xffff, 0x4001 (past 2^14) or 0 is MALFORMED at once, not waited for", () => {
    for (const length of [0xffff, 0xfffe, 0x8000, 16_385, 0]) expectCode(record(hello(), { recordLength: length }), "MALFORMED");
  });

  test("a handshake length of 0xffffff (24 bits), or one past the hello's bound, is TOO_LONG at once, not waited for", () => {
    for (const length of [0xff_ffff, 0xff_fffc, 0x80_0000, MAX_HELLO_BYTES]) expectCode(record(hello(), { handshakeLength: length }), "TOO_LONG");
  });

  test("nested lengths that claim more than their parent holds (session id, suites, extensions, one extension, the SNI list, a name, ALPN) are MALFORMED, never read past", () => {
    for (const o of [
      { sessionLength: 0xff },
      { sessionLength: 33 },
      { suitesLength: 0xffff },
      { suitesLength: 0xfffe },
      { extensionsLength: 0xffff },
      { extensionLength: 0xffff },
      { extensionLength: 0xfffc },
      { listLength: 0xffff },
      { nameLength: 0xffff },
      { nameLength: 0xfffd },
      { alpnListLength: 0xffff },
    ]) {
      const bytes = record(hello(o));
      // with the bytes past the hello in the same buffer (a view), an unbounded read would find them
      const backing = new Uint8Array(bytes.length + 70_000).fill(0x61);
      backing.set(bytes);
      expectCode(backing.subarray(0, bytes.length), "MALFORMED");
      expectCode(bytes, "MALFORMED");
    }
  });

  test("a record that claims more than has come is incomplete only while under the hello's bound; bytes past the bound are TOO_LONG", () => {
    const bytes = record(hello(), { recordLength: 16_000, handshakeLength: 15_996 });
    expect(parseClientHello(bytes)).toBe("incomplete");
    // many records of a handshake whose length is under the bound, but whose records add up past it
    const many: number[] = [];
    const message = [1, ...u24(MAX_HELLO_BYTES - 4)];
    many.push(22, 3, 1, ...u16(message.length), ...message);
    while (many.length < MAX_HELLO_BYTES + 16) many.push(22, 3, 1, ...u16(1000), ...new Array(1000).fill(0));
    expectCode(new Uint8Array(many), "TOO_LONG");
  });
});

describe("length wrap: WebSocket frames' 64-bit length (ws-frame-reader.ts)", () => {
  /** A server frame header (unmasked) with a 64-bit length of high * 2^32 + low. */
  const header64 = (opcode: number, high: number, low: number) => {
    const h = new Uint8Array(10);
    h[0] = 0x80 | opcode;
    h[1] = 127;
    new DataView(h.buffer).setUint32(2, high);
    new DataView(h.buffer).setUint32(6, low);
    return h;
  };
  const small = (text: string) => new Uint8Array([0x81, text.length, ...Buffer.from(text)]);
  function reader(keep = 64) {
    const messages: WsMessage[] = [];
    const r = new WebSocketFrameReader(keep, (m) => messages.push(m));
    return { r, messages };
  }

  test("a length past 2^53, up to 2^64-1 (the top bit RFC 6455 forbids), makes it give up quietly", () => {
    for (const [high, low] of [
      [0x20_0000, 0], // 2^53
      [0x20_0000, 1], // 2^53 + 1
      [0x7fff_ffff, 0xffff_ffff],
      [0x8000_0000, 0], // 2^63
      [0xffff_ffff, 0xffff_ffff], // 2^64 - 1
    ]) {
      const { r, messages } = reader();
      r.push(header64(2, high!, low!));
      r.push(small("after"));
      expect(r.gaveUp).toBe(true);
      expect(messages).toHaveLength(0);
    }
  });

  test("lengths of 2^31, 2^32 - 1, 2^32 and 2^32 + 5 are followed exactly: what comes next is payload, not a new frame; at most `keep` bytes are held", () => {
    for (const [high, low] of [
      [0, 0x8000_0000],
      [0, 0xffff_ffff],
      [1, 0],
      [1, 5],
      [0x1f_ffff, 0xffff_ffff], // 2^53 - 1, the last length followed
    ]) {
      const { r, messages } = reader(64);
      r.push(header64(2, high!, low!));
      // 5 bytes, then what would be a whole frame if the length had wrapped to 5
      r.push(new Uint8Array(5).fill(0x41));
      r.push(small("smuggled"));
      expect(r.gaveUp).toBe(false);
      expect(messages).toHaveLength(0);
    }
  });

  test("a control frame (close, ping) with a 64-bit length makes it give up: control frames are 125 bytes at most", () => {
    for (const opcode of [8, 9, 10]) {
      const { r } = reader();
      r.push(header64(opcode, 1, 0));
      expect(r.gaveUp).toBe(true);
    }
  });
});

describe("length wrap: chunk sizes (chunked.ts)", () => {
  const bytes = (s: string) => new Uint8Array(Buffer.from(s, "latin1"));

  test("sizes past 12 hex digits are refused however they are spelt: 'ffffffffffffffffff', 2^53 + 1, 2^64, leading zeros", () => {
    for (const size of ["ffffffffffffffffff", "fffffffffffff", "20000000000001", "10000000000000000", "FFFFFFFFFFFFFFFF", "0000000000001", "00000000000000000000000001"]) {
      const d = new ChunkedDecoder();
      expect(d.feed(bytes(`${size}\r\n`), 0, () => {})).toBe("chunk size too large");
      expect(d.done).toBe(false);
    }
  });

  test("sizes of 2^31, 2^32 - 1, 2^32, 2^32 + 1 and 2^48 - 1 are followed exactly: a body's end inside the chunk is data", () => {
    for (const size of ["80000000", "ffffffff", "100000000", "100000001", "ffffffffffff"]) {
      const d = new ChunkedDecoder();
      const pieces: Uint8Array[] = [];
      const input = bytes(`${size}\r\nabcde\r\n0\r\n\r\n`);
      expect(d.feed(input, 0, (p) => pieces.push(p))).toBeUndefined();
      expect(d.done).toBe(false);
      // the data are views of the input, not a buffer of the size claimed
      expect(pieces.reduce((n, p) => n + p.byteLength, 0)).toBe(input.length - size.length - 2);
      for (const p of pieces) expect(p.buffer).toBe(input.buffer);
    }
  });

  test("a request body read by its chunks takes the same refusals (request-body.ts)", () => {
    const reader = new RequestBodyReader("chunked", 0);
    expect(reader.feed(bytes("ffffffffffffffffff\r\n"))).toBe("chunk size too large");
  });
});

describe("length wrap: Content-Length (request-head.ts, response-head.ts, response-head-bytes.ts)", () => {
  const request = (value: string) => parseRequestHead(`POST / HTTP/1.1\r\nHost: a.example\r\nContent-Length: ${value}`);
  const response = (value: string) => `HTTP/1.1 200 OK\r\nContent-Length: ${value}\r\n\r\n`;
  const EXACT = ["2147483648", "4294967295", "4294967296", "4294967301", "999999999999999"];
  // 2^53 - 1 and up take 16 digits or more: past what a double holds exactly, refused
  const REFUSED = ["9007199254740991", "9007199254740992", "9007199254740993", "18446744073709551615", "18446744073709551616", "18446744073709551621", "0000000000000004294967296", "4294967296.0", "0x100000000", "4e9", "+4294967296", "-1", "4294967296 4294967296", "4294967296, 5"];

  test("values near 2^31 and 2^32 are read exactly, never wrapped to 32 bits", () => {
    for (const v of EXACT) {
      const head = request(v);
      expect(isRefusal(head)).toBe(false);
      expect((head as RequestHead).framing).toBe("length");
      expect((head as RequestHead).length).toBe(Number(v));
      const parsed = parseHead(response(v).slice(0, -4), "GET");
      expect(typeof parsed === "string" ? parsed : parsed.length).toBe(Number(v));
      const lean = framingOf(new Uint8Array(Buffer.from(response(v), "latin1")), "GET");
      expect(lean?.length).toBe(Number(v));
    }
  });

  test("values of 2^53 and up (2^64 and past it), and anything but digits, are refused: 400 for a request, an error for a response", () => {
    for (const v of REFUSED) {
      const head = request(v);
      expect(isRefusal(head) ? head.status : head).toBe(400);
      expect(typeof parseHead(response(v).slice(0, -4), "GET")).toBe("string");
      // the lean reader leaves what it does not fully understand to parseHead
      expect(framingOf(new Uint8Array(Buffer.from(response(v), "latin1")), "GET")).toBeUndefined();
    }
  });

  test("a response of 2^32 + 5 bytes is not over after 5 bytes, and one of 2^64 fails; both on the lean path and the full one", () => {
    for (const fields of [false, true]) {
      let ended = false;
      const parser = new ResponseParser("GET", { head() {}, body() {}, end: () => (ended = true) }, fields);
      expect(parser.push(new Uint8Array(Buffer.from(`${response("4294967301")}abcde`, "latin1")))).toBeUndefined();
      expect(ended).toBe(false);
      expect(parser.complete).toBe(false);
      const huge = new ResponseParser("GET", { head() {}, body() {}, end() {} }, fields);
      expect(huge.push(new Uint8Array(Buffer.from(response("18446744073709551616"), "latin1")))).toContain("content-length");
    }
  });

  test("a request body of 2^32 + 5 bytes is not over after 5 bytes (request-body.ts)", () => {
    const reader = new RequestBodyReader("length", 2 ** 32 + 5);
    expect(reader.feed(new Uint8Array(5))).toBeUndefined();
    expect(reader.done).toBe(false);
    reader.feed(new Uint8Array(10));
    expect(reader.done).toBe(false);
  });
});
