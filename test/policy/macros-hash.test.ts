/**
 * ngrok's checksum macros: hash.crc32 (IEEE), hash.crc64 (ISO, Go's
 * table) and hash.xxhash64 (seed 0), as functions and string methods, hex
 * or base64; checked against ngrok's documented values and the
 * algorithms' published check values.
 */
import { describe, expect, test } from "bun:test";
import { crc32, crc64Iso, xxhash64 } from "../../src/policy/cel/checksums.ts";
import { errorsOf, policyOf, requestInput } from "./policy-harness.ts";
import { errorOf, refusalOf, valueOf } from "./macro-harness.ts";

const bytes = (s: string) => new TextEncoder().encode(s);

describe("the algorithms", () => {
  test("the standard check values of '123456789' (CRC-32/ISO-HDLC, CRC-64/GO-ISO, XXH64 seed 0) and of the empty input", () => {
    expect(crc32(bytes("123456789"))).toBe(0xcbf43926n);
    expect(crc64Iso(bytes("123456789"))).toBe(0xb90956c775a41001n);
    expect(crc64Iso(bytes(""))).toBe(0n);
    expect(xxhash64(bytes(""))).toBe(0xef46db3751d8e999n);
    expect(xxhash64(bytes("abc"))).toBe(0x44bc2cf5ad770999n);
  });
});

describe("the macros", () => {
  test("ngrok's documented values, in hex by default, hex and base64, as functions and methods", () => {
    const cases: [string, string, string][] = [
      ["crc32", "3610a686", "NhCmhg=="],
      ["crc64", "3c3eeee2d8100000", "PD7u4tgQAAA="],
      ["xxhash64", "26c7827d889f6da3", "JseCfYifbaM="],
    ];
    for (const [name, hex, base64] of cases) {
      expect(valueOf(`hash.${name}('hello')`)).toBe(hex);
      expect(valueOf(`hash.${name}('hello', 'hex')`)).toBe(hex);
      expect(valueOf(`hash.${name}('hello', 'base64')`)).toBe(base64);
      expect(valueOf(`'hello'.${name}()`)).toBe(hex);
      expect(valueOf(`'hello'.${name}('base64')`)).toBe(base64);
    }
  });

  test("a sum keeps its leading zeros (fixed width), and hashes the string's UTF-8 bytes", () => {
    expect(valueOf("hash.crc64('')")).toBe("0000000000000000");
    expect((valueOf("hash.crc32('a')") as string).length).toBe(8);
    expect(valueOf("hash.crc32('é')")).toBe(crc32(bytes("é")).toString(16).padStart(8, "0"));
  });

  test("an unknown format is an error at run time; a wrong argument type is refused at load", () => {
    expect(errorOf("hash.crc32('hello', 'hexx')")).toContain("neither 'hex' nor 'base64'");
    expect(refusalOf("hash.crc64(1)").refused).toContain("found no matching overload for 'hash.crc64'");
    const [e] = errorsOf("on_http_request:\n  - expressions: [\"hash.xxhash64(b'x') == ''\"]\n    actions: [{ type: deny }]\n");
    expect(e).toMatchObject({ code: "CEL_TYPE", rule: expect.any(String) });
    expect(e!.message).toContain("hash.xxhash64");
  });

  test("a policy keys on them (a stable split of visitors by a header)", async () => {
    const p = policyOf(`on_http_request:
  - expressions: ["hash.crc32(getReqHeader('x-user')[0]) == '${crc32(bytes("alice")).toString(16).padStart(8, "0")}'"]
    actions: [{ type: deny, config: { status_code: 418 } }]
`);
    expect((await p.run("on_http_request", requestInput({ headers: [["x-user", "alice"]] }))).verdict.kind).toBe("respond");
    expect((await p.run("on_http_request", requestInput({ headers: [["x-user", "bob"]] }))).verdict.kind).not.toBe("respond");
  });

  test("what they digest is paid for by its size, a unit a KiB: 20 KiB under a limit of 10 units ends the run", () => {
    const request = { headers: [["x-big", "x".repeat(20 * 1024)]] as [string, string][] };
    for (const name of ["crc32", "crc64", "xxhash64"]) {
      expect(errorOf(`hash.${name}(getReqHeader('x-big')[0])`, { request, costLimit: 10 })).toContain("cost limit");
      expect(valueOf(`hash.${name}(getReqHeader('x-big')[0])`, { request, costLimit: 30 })).toBeString();
    }
  });
});
