/** --max-request-head, --max-request-fields, --max-read-ahead and --tls-hello-timeout as `burrow server` reads them: defaults, flag, environment, mistakes. */
import { expect, test } from "bun:test";
import { parseServerConfig } from "../../src/config/server.ts";
import { UsageError } from "../../src/usage-error.ts";

const parse = (argv: string[], env: Record<string, string> = {}) => {
  const r = parseServerConfig(argv, env);
  if (r.help) throw new Error("help");
  return r.config;
};

test("defaults: a 64 KiB head, 256 fields, 10 s for a ClientHello", () => {
  const c = parse([]);
  expect([c.maxRequestHeadBytes, c.maxRequestFields, c.tlsHelloTimeoutMs]).toEqual([65536, 256, 10_000]);
});

test("--max-read-ahead: 64 KiB by default, from the flag or BURROW_MAX_READ_AHEAD", () => {
  expect(parse([]).maxReadAheadBytes).toBe(65536);
  expect(parse(["--max-read-ahead", "4096"], { BURROW_MAX_READ_AHEAD: "8192" }).maxReadAheadBytes).toBe(4096);
  expect(parse([], { BURROW_MAX_READ_AHEAD: "1048576" }).maxReadAheadBytes).toBe(1_048_576);
});

test("the flags, or the environment; the flag wins", () => {
  const c = parse(["--max-request-head", "8192", "--max-request-fields", "100", "--tls-hello-timeout", "3"], { BURROW_MAX_REQUEST_HEAD: "4096" });
  expect([c.maxRequestHeadBytes, c.maxRequestFields, c.tlsHelloTimeoutMs]).toEqual([8192, 100, 3000]);
  const e = parse([], { BURROW_MAX_REQUEST_HEAD: "4096", BURROW_MAX_REQUEST_FIELDS: "32", BURROW_TLS_HELLO_TIMEOUT: "60" });
  expect([e.maxRequestHeadBytes, e.maxRequestFields, e.tlsHelloTimeoutMs]).toEqual([4096, 32, 60_000]);
});

test.each([
  ["--max-request-head", "1023"],
  ["--max-request-head", "1048577"],
  ["--max-request-head", "64k"],
  ["--max-request-fields", "15"],
  ["--max-request-fields", "10001"],
  ["--max-read-ahead", "4095"],
  ["--max-read-ahead", "1048577"],
  ["--tls-hello-timeout", "0"],
  ["--tls-hello-timeout", "61"],
  ["--tls-hello-timeout", "1.5"],
])("%s %p is a usage error naming the flag and its range", (flag, value) => {
  expect(() => parse([flag, value])).toThrow(UsageError);
  expect(() => parse([flag, value])).toThrow(new RegExp(`${flag} must be a whole number from \\d+ to \\d+`));
});
