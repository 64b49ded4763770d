/**
 * The JA4 fingerprint (src/tls/ja4.ts) of ClientHellos parsed with their
 * pieces: FoxIO's own captures with the fingerprints its test data gives
 * them, the specification's worked example built by hand, and its edge
 * cases (GREASE, no extensions, no signature algorithms, the ALPN rules,
 * counts over 99), whose expected hashes are computed here with
 * node:crypto from the specification's rules, apart from the module's.
 */
import { createHash } from "node:crypto";
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { parseClientHello, type ClientHello } from "../../src/tls/client-hello.ts";
import { alpnMark, isGrease, ja4 } from "../../src/tls/ja4.ts";
import { fuzzParams } from "../harness/fuzz.ts";
import { FOXIO_VECTORS } from "./ja4-vectors.ts";

const u16 = (n: number) => [n >> 8, n & 0xff];
const vec8 = (bytes: number[]) => [bytes.length, ...bytes];
const vec16 = (bytes: number[]) => [...u16(bytes.length), ...bytes];
const ascii = (s: string) => [...Buffer.from(s, "latin1")];
const sha12 = (s: string) => createHash("sha256").update(s).digest("hex").slice(0, 12);

interface Spec {
  version?: number;
  ciphers: number[];
  /** Extension types in order; a type named in `bodies` gets that body, others an empty one. Null: no extensions at all. */
  extensions: number[] | null;
  bodies?: Record<number, number[]>;
}

function hello(spec: Spec): Uint8Array {
  const ext = (spec.extensions ?? []).flatMap((type) => [...u16(type), ...vec16(spec.bodies?.[type] ?? [])]);
  const body = [...u16(spec.version ?? 0x0303), ...new Array(32).fill(7), 0, ...vec16(spec.ciphers.flatMap(u16)), 1, 0, ...(spec.extensions === null ? [] : vec16(ext))];
  const message = [1, 0, ...u16(body.length), ...body];
  return new Uint8Array([22, 3, 1, ...u16(message.length), ...message]);
}

function fingerprint(bytes: Uint8Array): string {
  const parsed = parseClientHello(bytes, true);
  if (typeof parsed !== "object" || !("pieces" in parsed)) throw new Error(`not a hello: ${JSON.stringify(parsed)}`);
  return ja4(parsed);
}

const sniBody = (name: string) => vec16([0, ...vec16(ascii(name))]);
const alpnBody = (names: string[]) => vec16(names.flatMap((n) => vec8(ascii(n))));
const sigBody = (algs: number[]) => vec16(algs.flatMap(u16));
const versionsBody = (versions: number[]) => vec8(versions.flatMap(u16));

// the specification's example (technical_details/JA4.md): its ciphers, extensions and signature algorithms in its order
const SPEC_CIPHERS = [0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f, 0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013, 0xc014, 0x009c, 0x009d, 0x002f, 0x0035];
const SPEC_EXTENSIONS = [0x001b, 0x0000, 0x0033, 0x0010, 0x4469, 0x0017, 0x002d, 0x000d, 0x0005, 0x0023, 0x0012, 0x002b, 0xff01, 0x000b, 0x000a, 0x0015];
const SPEC_SIGNATURES = [0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601];
const specBodies = (): Record<number, number[]> => ({ 0x0000: sniBody("example.test"), 0x0010: alpnBody(["h2", "http/1.1"]), 0x000d: sigBody(SPEC_SIGNATURES), 0x002b: versionsBody([0x0304, 0x0303]) });

describe("JA4 of FoxIO's captured hellos", () => {
  for (const v of FOXIO_VECTORS) {
    if (v.source === "tls-non-ascii-alpn.pcapng") continue;
    test(`${v.source}: ${v.ja4}`, () => {
      expect(fingerprint(Buffer.from(v.hello, "hex"))).toBe(v.ja4);
    });
  }

  test("tls-non-ascii-alpn.pcapng: the ALPN mark by the specification's hex rule (the test data's older '99' rule aside), the rest as published", () => {
    const v = FOXIO_VECTORS.find((x) => x.source === "tls-non-ascii-alpn.pcapng")!;
    const parsed = parseClientHello(Buffer.from(v.hello, "hex"), true) as ClientHello;
    // its first protocol is the bytes 0xba 0xad: neither end is alphanumeric, so the hex "baad"'s first and last: "bd"
    expect(parsed.alpn?.[0]).toBe("\xba\xad");
    expect(ja4(parsed)).toBe(v.ja4.replace("t13d151699_", "t13d1516bd_"));
  });
});

describe("JA4 by the specification's rules", () => {
  test("its worked example: t13d1516h2_8daaf6152771_e5627efa2ab1", () => {
    expect(fingerprint(hello({ ciphers: SPEC_CIPHERS, extensions: SPEC_EXTENSIONS, bodies: specBodies() }))).toBe("t13d1516h2_8daaf6152771_e5627efa2ab1");
    // the same by the rules, hashed here
    expect(sha12("002f,0035,009c,009d,1301,1302,1303,c013,c014,c02b,c02c,c02f,c030,cca8,cca9")).toBe("8daaf6152771");
    expect(sha12("0005,000a,000b,000d,0012,0015,0017,001b,0023,002b,002d,0033,4469,ff01_0403,0804,0401,0503,0805,0501,0806,0601")).toBe("e5627efa2ab1");
  });

  test("GREASE is left out of the counts, the lists, the version and the signature algorithms", () => {
    const bodies = { ...specBodies(), 0x002b: versionsBody([0x7a7a, 0x0304, 0x0303]), 0x000d: sigBody([0x1a1a, ...SPEC_SIGNATURES]) };
    const greased = hello({ ciphers: [0x0a0a, ...SPEC_CIPHERS, 0xfafa], extensions: [0x2a2a, ...SPEC_EXTENSIONS, 0xdada], bodies });
    expect(fingerprint(greased)).toBe("t13d1516h2_8daaf6152771_e5627efa2ab1");
    expect([0x0a0a, 0x1a1a, 0xfafa].every(isGrease)).toBe(true);
    expect([0x0a1a, 0x0b0b, 0x000a, 0x1303].some(isGrease)).toBe(false);
  });

  test("without signature algorithms the extensions are hashed without an underscore (the specification's 6d807ffa2a79)", () => {
    const bodies = specBodies();
    delete bodies[0x000d];
    // 000d stays an extension, with an empty list that does not add up: read as no signature algorithms
    expect(fingerprint(hello({ ciphers: SPEC_CIPHERS, extensions: SPEC_EXTENSIONS, bodies }))).toBe("t13d1516h2_8daaf6152771_6d807ffa2a79");
  });

  test("a hello without extensions: the hello's version, 'i', no ALPN, and zeros for the extensions' hash", () => {
    expect(fingerprint(hello({ version: 0x0301, ciphers: [0x002f, 0x0035], extensions: null }))).toBe(`t10i020000_${sha12("002f,0035")}_000000000000`);
  });

  test("only SNI and ALPN: counted, but nothing is left to hash", () => {
    const bodies = { 0x0000: sniBody("a.test"), 0x0010: alpnBody(["http/1.1"]) };
    expect(fingerprint(hello({ ciphers: [0x1301], extensions: [0x0000, 0x0010], bodies }))).toBe(`t12d0102h1_${sha12("1301")}_000000000000`);
  });

  test("no cipher suite but GREASE: zeros for the ciphers' hash", () => {
    expect(fingerprint(hello({ ciphers: [0x0a0a], extensions: [0x0017] }))).toBe(`t12i000100_000000000000_${sha12("0017")}`);
  });

  test("the version: supported_versions' highest whatever its order, else the hello's; unknown ones are 00", () => {
    const with_ = (versions: number[], legacy = 0x0303) => fingerprint(hello({ version: legacy, ciphers: [0x1301], extensions: [0x002b], bodies: { 0x002b: versionsBody(versions) } })).slice(0, 3);
    expect(with_([0x0303, 0x0304])).toBe("t13");
    expect(with_([0x0302, 0x0301])).toBe("t11");
    expect(with_([0x0300])).toBe("ts3");
    expect(with_([0x0305])).toBe("t00");
    expect(with_([0x4a4a], 0x0301)).toBe("t10"); // only GREASE offered: the hello's own
    expect(fingerprint(hello({ version: 0x0302, ciphers: [0x1301], extensions: [] })).slice(0, 3)).toBe("t11");
    expect(fingerprint(hello({ version: 0x0200, ciphers: [0x1301], extensions: [] })).slice(0, 3)).toBe("t00");
  });

  test("counts over 99 are written 99", () => {
    const ciphers = Array.from({ length: 120 }, (_, i) => 0x0100 + i);
    const extensions = Array.from({ length: 105 }, (_, i) => 0x1000 + i);
    const sorted = (xs: number[]) => xs.map((n) => n.toString(16).padStart(4, "0")).join(",");
    expect(fingerprint(hello({ ciphers, extensions }))).toBe(`t12i999900_${sha12(sorted(ciphers))}_${sha12(sorted(extensions))}`);
  });

  test("the ALPN mark, by the specification's examples", () => {
    expect(alpnMark(undefined)).toBe("00");
    expect(alpnMark("")).toBe("00");
    expect(alpnMark("h2")).toBe("h2");
    expect(alpnMark("http/1.1")).toBe("h1");
    expect(alpnMark("a")).toBe("aa");
    const bytes = (...b: number[]) => String.fromCharCode(...b);
    expect(alpnMark(bytes(0xab))).toBe("ab");
    expect(alpnMark(bytes(0x20))).toBe("20");
    expect(alpnMark(bytes(0xab, 0xcd))).toBe("ad");
    expect(alpnMark(bytes(0x20, 0x61))).toBe("21");
    expect(alpnMark(bytes(0x30, 0xab))).toBe("3b");
    expect(alpnMark(bytes(0x61, 0x20))).toBe("60");
    expect(alpnMark(bytes(0x30, 0x31, 0xab, 0xcd))).toBe("3d");
    expect(alpnMark(bytes(0x30, 0xab, 0xcd, 0x31))).toBe("01");
  });

  test("the ALPN mark reads only the first protocol", () => {
    const bodies = { 0x0010: alpnBody(["http/1.1", "h2"]) };
    expect(fingerprint(hello({ ciphers: [0x1301], extensions: [0x0010], bodies })).slice(0, 10)).toBe("t12i0101h1");
  });
});

describe("the pieces", () => {
  test("parsed without them, a hello answers as it always did; with them, the same and its pieces", () => {
    const bytes = hello({ ciphers: SPEC_CIPHERS, extensions: SPEC_EXTENSIONS, bodies: specBodies() });
    expect(parseClientHello(bytes)).toEqual({ serverName: "example.test", alpn: ["h2", "http/1.1"] });
    expect(parseClientHello(bytes, true)).toEqual({
      serverName: "example.test",
      alpn: ["h2", "http/1.1"],
      pieces: { version: 0x0303, cipherSuites: SPEC_CIPHERS, extensions: SPEC_EXTENSIONS, supportedVersions: [0x0304, 0x0303], signatureAlgorithms: SPEC_SIGNATURES },
    });
    expect(ja4({ serverName: "example.test" })).toBe("");
  });

  test("supported_versions or signature_algorithms that do not add up are read as absent, and the hello is still a hello", () => {
    const bodies = { 0x002b: [3, 3, 4], 0x000d: [0, 3, 4, 3, 8] };
    const parsed = parseClientHello(hello({ ciphers: [0x1301], extensions: [0x002b, 0x000d], bodies }), true) as ClientHello;
    expect(parsed.pieces).toEqual({ version: 0x0303, cipherSuites: [0x1301], extensions: [0x002b, 0x000d] });
    expect(ja4(parsed)).toBe(`t12i010200_${sha12("1301")}_${sha12("000d,002b")}`);
  });

  test("any bytes: a fingerprint of the JA4 form or no hello, and never a throw", () => {
    const form = /^t(1[0-3]|s[23]|d[123]|00)[di]\d{4}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$/;
    const anyExtensions = fc.array(fc.record({ type: fc.integer({ min: 0, max: 0xffff }), body: fc.array(fc.integer({ min: 0, max: 255 }), { maxLength: 12 }) }), { maxLength: 20 });
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 1, maxLength: 120 }), anyExtensions, fc.integer({ min: 0, max: 0xffff }), (ciphers, exts, version) => {
        const unique = exts.filter((e, i) => exts.findIndex((x) => x.type === e.type) === i && e.type !== 0 && e.type !== 16);
        const bytes = hello({ version, ciphers, extensions: unique.map((e) => e.type), bodies: Object.fromEntries(unique.map((e) => [e.type, e.body])) });
        const parsed = parseClientHello(bytes, true);
        if (typeof parsed !== "object" || !("pieces" in parsed)) return true;
        return form.test(ja4(parsed));
      }),
      fuzzParams(300, 5_000),
    );
  });
});
