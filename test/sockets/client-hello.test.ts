/**
 * parseClientHello on real hellos (captured here from Bun's TLS client and
 * from openssl s_client, on a plain socket) and on hellos built by hand:
 * every prefix is "incomplete", a hello re-cut into records of any size
 * reads the same, corrupted lengths are errors, and no input, however
 * broken, makes it throw. (It lives in src/tls; its tests sit beside the
 * front that uses it.)
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import fc from "fast-check";
import { HelloError, MAX_HELLO_BYTES, parseClientHello, type HelloAnswer, type HelloErrorCode } from "../../src/tls/client-hello.ts";
import { captureHello } from "../harness/client-hello.ts";
import { fuzzParams } from "../harness/fuzz.ts";

const ALPN_H2_HTTP1 = new Uint8Array([2, ...Buffer.from("h2"), 8, ...Buffer.from("http/1.1")]);

/** The hello message (handshake header and body) of a one-record hello, cut into records of `size` bytes each. */
function recut(hello: Uint8Array, size: number): Uint8Array {
  const message = hello.subarray(5);
  const out: number[] = [];
  for (let at = 0; at < message.length; at += size) {
    const part = message.subarray(at, at + size);
    out.push(22, 3, 1, part.length >> 8, part.length & 0xff, ...part);
  }
  return new Uint8Array(out);
}

const u16 = (n: number) => [n >> 8, n & 0xff];
const vec16 = (bytes: number[]) => [...u16(bytes.length), ...bytes];
const ascii = (s: string) => [...Buffer.from(s, "latin1")];

/** A ClientHello built by hand, in one record; `extensions: null` leaves the extensions out altogether. */
function buildHello(opts: { serverName?: string; alpn?: string[]; extensions?: number[] | null } = {}): Uint8Array {
  let extensions = opts.extensions ?? [];
  if (opts.serverName !== undefined) extensions = [...extensions, ...u16(0), ...vec16(vec16([0, ...vec16(ascii(opts.serverName))]))];
  if (opts.alpn) extensions = [...extensions, ...u16(16), ...vec16(vec16(opts.alpn.flatMap((p) => [p.length, ...ascii(p)])))];
  const body = [3, 3, ...new Array(32).fill(7), 0, ...vec16([0x13, 0x01]), 1, 0, ...(opts.extensions === null ? [] : vec16(extensions))];
  const message = [1, 0, ...u16(body.length), ...body];
  return new Uint8Array([22, 3, 1, ...u16(message.length), ...message]);
}

function expectError(answer: HelloAnswer, code: HelloErrorCode): void {
  expect(answer).toBeInstanceOf(HelloError);
  expect((answer as HelloError).code).toBe(code);
}

/** Whatever the input, one of the three answers and never a throw. */
function answers(bytes: Uint8Array): boolean {
  const a = parseClientHello(bytes);
  return a === "incomplete" || a instanceof HelloError || (typeof a === "object" && a !== null);
}

let bunHello: Uint8Array;
let opensslHello: Uint8Array;
let opensslNoSni: Uint8Array;
const spawned: Bun.Subprocess[] = [];

beforeAll(async () => {
  bunHello = await captureHello(async (port) => {
    await Bun.connect({
      hostname: "127.0.0.1",
      port,
      tls: { serverName: "Bun.Example.COM", rejectUnauthorized: false, ALPNProtocols: ALPN_H2_HTTP1 },
      socket: { data() {}, error() {} },
    });
  });
  const openssl = (args: string[]) => (port: number) =>
    void spawned.push(Bun.spawn(["openssl", "s_client", "-connect", `127.0.0.1:${port}`, ...args], { stdin: "ignore", stdout: "ignore", stderr: "ignore" }));
  opensslHello = await captureHello(openssl(["-servername", "OpenSSL.example.", "-alpn", "http/1.1"]));
  opensslNoSni = await captureHello(openssl(["-noservername"]));
});

afterAll(() => {
  for (const p of spawned) p.kill();
});

describe("real hellos", () => {
  test("Bun's client: its server name in lower case, its ALPN list in order", () => {
    expect(parseClientHello(bunHello)).toEqual({ serverName: "bun.example.com", alpn: ["h2", "http/1.1"] });
  });

  test("openssl s_client: the trailing dot of the name is dropped", () => {
    expect(parseClientHello(opensslHello)).toEqual({ serverName: "openssl.example", alpn: ["http/1.1"] });
  });

  test("openssl without SNI: no server name", () => {
    expect(parseClientHello(opensslNoSni)).toEqual({});
  });

  test("every prefix of each is incomplete, and what follows the hello does not change the answer", () => {
    for (const hello of [bunHello, opensslHello, opensslNoSni]) {
      for (let n = 0; n < hello.length; n++) expect(parseClientHello(hello.subarray(0, n))).toBe("incomplete");
      const after = new Uint8Array([...hello, 20, 3, 3, 0, 1, 1]);
      expect(parseClientHello(after)).toEqual(parseClientHello(hello));
    }
  });

  test("cut into records of any size (down to one byte each), the same hello", () => {
    const whole = parseClientHello(bunHello);
    for (const size of [1, 2, 3, 4, 5, 100, 511, bunHello.length - 6]) {
      const records = recut(bunHello, size);
      expect(parseClientHello(records)).toEqual(whole);
      // and every prefix of the cut form is still incomplete
      for (let n = 0; n < records.length; n += Math.max(1, Math.floor(records.length / 300))) expect(parseClientHello(records.subarray(0, n))).toBe("incomplete");
    }
  });

  test("split over two records at every point of its message, the same hello", () => {
    const whole = parseClientHello(opensslHello);
    const message = opensslHello.subarray(5);
    for (let cut = 1; cut < message.length; cut++) {
      const a = message.subarray(0, cut);
      const b = message.subarray(cut);
      const two = new Uint8Array([22, 3, 1, ...u16(a.length), ...a, 22, 3, 1, ...u16(b.length), ...b]);
      expect(parseClientHello(two)).toEqual(whole);
    }
  });

  test("any byte changed to any value: an answer, never a throw", () => {
    for (const hello of [bunHello, opensslHello]) {
      for (let i = 0; i < hello.length; i++) {
        for (const value of [0, 1, 0x7f, 0x80, 0xff, hello[i]! ^ 0x01]) {
          const bad = hello.slice();
          bad[i] = value;
          expect(answers(bad)).toBe(true);
        }
      }
    }
  });
});

describe("refusals", () => {
  test("plain HTTP is not TLS from its first byte", () => {
    expectError(parseClientHello(new TextEncoder().encode("G")), "NOT_TLS");
    expectError(parseClientHello(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")), "NOT_TLS");
    // SSLv2-style, and a handshake record of another version
    expectError(parseClientHello(new Uint8Array([0x80, 0x2e, 0x01])), "NOT_TLS");
    expectError(parseClientHello(new Uint8Array([22, 2])), "NOT_TLS");
  });

  test("a handshake that is not a ClientHello (a ServerHello) is not one", () => {
    const bad = buildHello({ serverName: "a.test" });
    bad[5] = 2;
    expectError(parseClientHello(bad), "NOT_TLS");
  });

  test("each length changed by one, or out of its range: an error (or a wait, for a length that now runs past what came)", () => {
    const hello = buildHello({ serverName: "a.test", alpn: ["http/1.1"] });
    expect(parseClientHello(hello)).toEqual({ serverName: "a.test", alpn: ["http/1.1"] });
    // where buildHello puts each length (one record, empty session id, one suite, one compression method, SNI then ALPN)
    const at = { record: 4, handshake: 8, session: 43, suites: 45, compression: 48, extensions: 51, sniExt: 55, sniList: 57, sniName: 60, alpnExt: 70, alpnList: 72, alpnName: 73 };
    const changed = (offset: number, value: number) => {
      const bad = hello.slice();
      bad[offset] = value;
      return parseClientHello(bad);
    };
    expect(changed(at.record, hello[at.record]! + 1)).toBe("incomplete");
    expect(changed(at.handshake, hello[at.handshake]! + 1)).toBe("incomplete");
    expectError(changed(at.handshake, hello[at.handshake]! - 1), "MALFORMED");
    expectError(changed(at.session, 33), "MALFORMED");
    expectError(changed(at.session, 1), "MALFORMED");
    expectError(changed(at.suites, 3), "MALFORMED");
    expectError(changed(at.compression, 0), "MALFORMED");
    for (const [name, offset] of Object.entries(at).slice(5)) {
      for (const delta of [-1, 1]) {
        const answer = changed(offset, hello[offset]! + delta);
        if (!(answer instanceof HelloError)) throw new Error(`${name} ${delta > 0 ? "+" : ""}${delta}: ${JSON.stringify(answer)}`);
        expect(answer.code).toBe("MALFORMED");
      }
    }
  });

  test("a record of zero bytes, or over 2^14, is malformed", () => {
    expectError(parseClientHello(new Uint8Array([22, 3, 1, 0, 0])), "MALFORMED");
    expectError(parseClientHello(new Uint8Array([22, 3, 1, 0x40, 0x01])), "MALFORMED");
  });

  test("a hello longer than MAX_HELLO_BYTES is refused as soon as its header says so", () => {
    const declared = MAX_HELLO_BYTES; // with its 4-byte header it cannot fit
    expectError(parseClientHello(new Uint8Array([22, 3, 1, 0x40, 0x00, 1, declared >> 16, (declared >> 8) & 0xff, declared & 0xff])), "TOO_LONG");
    // many small records that together pass the bound, before the hello ends
    const small = recut(buildHello({ serverName: "a.test", extensions: [...u16(21), ...vec16(new Array(9000).fill(0))] }), 2);
    expectError(parseClientHello(small), "TOO_LONG");
  });

  test("server names a DNS name cannot carry", () => {
    for (const name of ["exa mple.test", "a..test", ".a.test", "a\u0000.test", "ä.test", `${"x".repeat(64)}.test`, `${"abcdefghi.".repeat(26)}test`]) {
      expectError(parseClientHello(buildHello({ serverName: name })), "BAD_SERVER_NAME");
    }
    expect(parseClientHello(buildHello({ serverName: "_acme.Example.test." }))).toEqual({ serverName: "_acme.example.test" });
    expect(parseClientHello(buildHello({ serverName: `${"x".repeat(63)}.test` }))).toEqual({ serverName: `${"x".repeat(63)}.test` });
  });

  test("an extension twice, an empty ALPN name, extensions that overrun the hello", () => {
    const sni = [...u16(0), ...vec16(vec16([0, ...vec16(ascii("a.test"))]))];
    expectError(parseClientHello(buildHello({ extensions: [...sni, ...sni] })), "MALFORMED");
    expectError(parseClientHello(buildHello({ extensions: [...u16(16), ...vec16(vec16([0]))] })), "MALFORMED");
    expectError(parseClientHello(buildHello({ extensions: [...u16(16), ...u16(9)] })), "MALFORMED");
    // a server_name list with two host names
    expectError(parseClientHello(buildHello({ extensions: [...u16(0), ...vec16(vec16([0, ...vec16(ascii("a.test")), 0, ...vec16(ascii("b.test"))]))] })), "MALFORMED");
  });

  test("bytes after the hello inside its own record are malformed", () => {
    const hello = buildHello({ serverName: "a.test" });
    const message = hello.subarray(5);
    const longer = new Uint8Array([22, 3, 1, ...u16(message.length + 2), ...message, 0, 0]);
    expectError(parseClientHello(longer), "MALFORMED");
  });

  test("a hello without extensions, and one whose only name is not a host name, have no server name", () => {
    expect(parseClientHello(buildHello({ extensions: null }))).toEqual({});
    expect(parseClientHello(buildHello({ extensions: [...u16(0), ...vec16(vec16([1, ...vec16([1, 2, 3])]))] }))).toEqual({});
  });
});

describe("never throws", () => {
  test("on random bytes, and on random bytes after a handshake record header", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.boolean(), (bytes, framed) => {
        const input = framed ? new Uint8Array([22, 3, 1, ...u16(bytes.length), ...bytes]) : bytes;
        return answers(input);
      }),
      fuzzParams(2_000, 5_000),
    );
  });

  test("on a real hello with random bytes changed, cut short, or cut into records", () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { maxLength: 8 }),
        fc.nat(),
        fc.integer({ min: 1, max: 64 }),
        (changes, cut, size) => {
          const bad = recut(bunHello, size);
          for (const [at, value] of changes) bad[at % bad.length] = value;
          return answers(bad) && answers(bad.subarray(0, cut % (bad.length + 1)));
        },
      ),
      fuzzParams(1_000, 5_000),
    );
  });
});
