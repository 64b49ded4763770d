/**
 * --geoip-db as `burrow server` reads it: none by default, a path from the
 * flag or BURROW_GEOIP_DB, and a file that is not there a usage error
 * naming the flag. (A file there that is not a MaxMind DB is refused when
 * the server opens it: test/traffic-policy/geoip.test.ts.)
 */
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseServerConfig } from "../../src/config/server.ts";
import { UsageError } from "../../src/usage-error.ts";

const parse = (argv: string[], env: Record<string, string> = {}) => {
  const r = parseServerConfig(argv, env);
  if (r.help) throw new Error("help");
  return r.config;
};

test("no database by default; a path from the flag or from BURROW_GEOIP_DB", () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-geoip-flag-"));
  try {
    const file = join(dir, "GeoLite2-City.mmdb");
    writeFileSync(file, "");
    expect(parse([]).policy.geoipDb).toBeUndefined();
    expect(parse(["--geoip-db", file]).policy.geoipDb).toBe(file);
    expect(parse([], { BURROW_GEOIP_DB: file }).policy.geoipDb).toBe(file);
    expect(parse(["--geoip-db", ""]).policy.geoipDb).toBeUndefined();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("a path with no file: a usage error naming the flag", () => {
  expect(() => parse(["--geoip-db", "/nonexistent/GeoLite2-City.mmdb"])).toThrow(UsageError);
  expect(() => parse(["--geoip-db", "/nonexistent/GeoLite2-City.mmdb"])).toThrow(/--geoip-db: no such file/);
  expect(() => parse([], { BURROW_GEOIP_DB: "/nonexistent/x.mmdb" })).toThrow(/--geoip-db: no such file/);
});

test("--geoip-cache and --geoip-check-interval: their defaults, a value from the flag or the environment, and a value out of range a usage error naming the flag", () => {
  expect(parse([]).policy.geoip).toEqual({ cacheRecords: 10_000, checkIntervalMs: 5_000 });
  expect(parse(["--geoip-cache", "500", "--geoip-check-interval", "60"]).policy.geoip).toEqual({ cacheRecords: 500, checkIntervalMs: 60_000 });
  expect(parse([], { BURROW_GEOIP_CACHE: "2000", BURROW_GEOIP_CHECK_INTERVAL: "1" }).policy.geoip).toEqual({ cacheRecords: 2000, checkIntervalMs: 1000 });
  expect(() => parse(["--geoip-cache", "0"])).toThrow(/--geoip-cache/);
  expect(() => parse(["--geoip-cache", "lots"])).toThrow(/--geoip-cache/);
  expect(() => parse(["--geoip-check-interval", "0"])).toThrow(/--geoip-check-interval/);
  expect(() => parse(["--geoip-check-interval", "86401"])).toThrow(/--geoip-check-interval/);
});
