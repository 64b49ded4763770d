/**
 * The traffic policy caps' flags as `burrow server` reads them: by default
 * the engine's defaults, each from its flag or its BURROW_ variable, and a
 * value out of its range a usage error naming the flag (exit 2 from the
 * real program, before anything listens).
 */
import { expect, test } from "bun:test";
import { join } from "node:path";
import { parseServerConfig } from "../../src/config/server.ts";
import { DEFAULT_POLICY_LIMITS, type PolicyLimits } from "../../src/policy/limits.ts";
import { JWKS_MAX_AGE_MS, JWKS_TIMEOUT_MS, MAX_JWKS_BYTES } from "../../src/policy/services.ts";
import { UsageError } from "../../src/usage-error.ts";
import { DEFAULT_COMPILED_KEPT } from "../../src/edge/traffic-policy/edge-policies.ts";
import { DEFAULT_SSE_EVENT_BYTES } from "../../src/edge/traffic-policy/body-reading.ts";
import { POLL_MS } from "../../src/edge/traffic-policy/operator-layers.ts";
import { DEFAULT_OUTGOING_LIMITS } from "../../src/edge/traffic-policy/outgoing-requests.ts";

const parse = (argv: string[], env: Record<string, string> = {}) => {
  const r = parseServerConfig(argv, env);
  if (r.help) throw new Error("help");
  return r.config;
};

/** Each flag, the cap it sets, a value in its range other than the default, and its range. */
const FLAGS: [string, keyof PolicyLimits, number, number, number][] = [
  ["--policy-max-bytes", "maxDocumentBytes", 2048, 1024, 16_777_216],
  ["--policy-max-rules", "maxRules", 5, 1, 100_000],
  ["--policy-cost-limit", "costLimit", 500, 100, 10_000_000],
  ["--policy-max-expressions", "maxExpressionsPerRule", 3, 1, 1000],
  ["--policy-max-actions", "maxActionsPerRule", 40, 1, 1000],
  ["--policy-expression-max-length", "maxExpressionLength", 100, 64, 1_048_576],
  ["--policy-expression-max-depth", "maxExpressionDepth", 128, 8, 256],
  ["--policy-expression-max-nodes", "maxExpressionNodes", 50, 10, 100_000],
  ["--policy-max-interpolations", "maxInterpolations", 2, 1, 1000],
  ["--policy-log-metadata-max-bytes", "maxLogMetadataBytes", 300, 256, 1_048_576],
  ["--policy-log-metadata-max-depth", "maxLogMetadataDepth", 8, 1, 32],
  ["--policy-value-max-bytes", "maxValueBytes", 4096, 1024, 67_108_864],
  ["--policy-max-entries", "maxMadeEntries", 1000, 100, 10_000_000],
  ["--policy-json-max-depth", "maxJsonDepth", 4, 1, 512],
  ["--policy-pattern-max-length", "maxPatternLength", 2048, 16, 65_536],
  ["--policy-pattern-max-steps", "maxPatternSteps", 5000, 1000, 10_000_000],
];

test("by default a policy is loaded under the engine's own defaults, every cap of them; key sets fetched as the engine does", () => {
  expect(parse([]).policy.limits).toEqual({ ...DEFAULT_POLICY_LIMITS });
  expect(parse([]).policy.jwks).toEqual({ maxBytes: MAX_JWKS_BYTES, timeoutMs: JWKS_TIMEOUT_MS, maxAgeMs: JWKS_MAX_AGE_MS });
});

test("--policy-jwks-max-bytes, --policy-jwks-timeout (s), --policy-jwks-cache (s), from the flags or BURROW_*", () => {
  expect(parse(["--policy-jwks-max-bytes", "4096", "--policy-jwks-timeout", "2", "--policy-jwks-cache", "60"]).policy.jwks).toEqual({ maxBytes: 4096, timeoutMs: 2000, maxAgeMs: 60_000 });
  expect(parse([], { BURROW_POLICY_JWKS_MAX_BYTES: "1024", BURROW_POLICY_JWKS_TIMEOUT: "60", BURROW_POLICY_JWKS_CACHE: "86400" }).policy.jwks).toEqual({ maxBytes: 1024, timeoutMs: 60_000, maxAgeMs: 86_400_000 });
});

test("--policy-connect-max-bytes: 64 KiB by default, from the flag or BURROW_POLICY_CONNECT_MAX_BYTES, 1024 to 16777216", () => {
  expect(parse([]).policy.connectMaxBytes).toBe(65_536);
  expect(parse(["--policy-connect-max-bytes", "4096"]).policy.connectMaxBytes).toBe(4096);
  expect(parse([], { BURROW_POLICY_CONNECT_MAX_BYTES: "16777216" }).policy.connectMaxBytes).toBe(16_777_216);
  expect(() => parse(["--policy-connect-max-bytes", "1023"])).toThrow("--policy-connect-max-bytes must be a whole number from 1024 to 16777216");
});

test("--policy-http-request-*: by default the edge's own (inside addresses refused, 10 s, 256 KiB, 64 at once, 16 of them a tunnel's, 8 a run); each from its flag or BURROW_ variable; out of range a usage error", () => {
  expect(parse([]).policy.httpRequest).toEqual(DEFAULT_OUTGOING_LIMITS);
  expect(DEFAULT_OUTGOING_LIMITS.allowPrivate).toBe(false);
  const set = ["--policy-http-request-allow-private", "on", "--policy-http-request-timeout", "30", "--policy-http-request-max-bytes", "1024", "--policy-http-request-concurrency", "2", "--policy-http-request-concurrency-per-tunnel", "1", "--policy-http-request-max-per-run", "64"];
  expect(parse(set).policy.httpRequest).toEqual({ allowPrivate: true, timeoutMs: 30_000, maxBytes: 1024, concurrency: 2, concurrencyPerTunnel: 1, maxPerRun: 64 });
  expect(parse([], { BURROW_POLICY_HTTP_REQUEST_ALLOW_PRIVATE: "on", BURROW_POLICY_HTTP_REQUEST_TIMEOUT: "1" }).policy.httpRequest).toMatchObject({ allowPrivate: true, timeoutMs: 1000 });
  expect(() => parse(["--policy-http-request-allow-private", "yes"])).toThrow("--policy-http-request-allow-private must be on or off");
  expect(() => parse(["--policy-http-request-timeout", "31"])).toThrow("--policy-http-request-timeout must be a whole number from 1 to 30");
  expect(() => parse(["--policy-http-request-max-bytes", "1023"])).toThrow("--policy-http-request-max-bytes must be a whole number from 1024");
  expect(() => parse(["--policy-http-request-concurrency", "0"])).toThrow("--policy-http-request-concurrency must be a whole number from 1");
  expect(() => parse(["--policy-http-request-concurrency-per-tunnel", "0"])).toThrow("--policy-http-request-concurrency-per-tunnel must be a whole number from 1 to 10000");
  expect(() => parse(["--policy-http-request-max-per-run", "65"])).toThrow("--policy-http-request-max-per-run must be a whole number from 1 to 64");
});

test("--policy-http-request-concurrency-per-tunnel: from the flag or BURROW_POLICY_HTTP_REQUEST_CONCURRENCY_PER_TUNNEL; never more than the node's --policy-http-request-concurrency", () => {
  expect(parse([]).policy.httpRequest.concurrencyPerTunnel).toBe(16);
  expect(parse(["--policy-http-request-concurrency-per-tunnel", "40"]).policy.httpRequest.concurrencyPerTunnel).toBe(40);
  expect(parse([], { BURROW_POLICY_HTTP_REQUEST_CONCURRENCY_PER_TUNNEL: "3" }).policy.httpRequest.concurrencyPerTunnel).toBe(3);
  // held to the node's cap, whether it is set or the node's is lowered under the default
  expect(parse(["--policy-http-request-concurrency", "8", "--policy-http-request-concurrency-per-tunnel", "100"]).policy.httpRequest.concurrencyPerTunnel).toBe(8);
  expect(parse(["--policy-http-request-concurrency", "4"]).policy.httpRequest.concurrencyPerTunnel).toBe(4);
});

test("--policy-sse-event-limit: the edge's default, from the flag or BURROW_POLICY_SSE_EVENT_LIMIT, 1024 to 16777216", () => {
  expect(parse([]).policy.body.sseEventMaxBytes).toBe(DEFAULT_SSE_EVENT_BYTES);
  expect(parse(["--policy-sse-event-limit", "4096"]).policy.body.sseEventMaxBytes).toBe(4096);
  expect(parse([], { BURROW_POLICY_SSE_EVENT_LIMIT: "16777216" }).policy.body.sseEventMaxBytes).toBe(16_777_216);
  expect(() => parse(["--policy-sse-event-limit", "1023"])).toThrow("--policy-sse-event-limit must be a whole number from 1024 to 16777216");
  expect(() => parse(["--policy-sse-event-limit", "16777217"])).toThrow(UsageError);
});

test.each([
  ["--policy-jwks-max-bytes", "1023"],
  ["--policy-jwks-max-bytes", "16777217"],
  ["--policy-jwks-timeout", "0"],
  ["--policy-jwks-timeout", "61"],
  ["--policy-jwks-cache", "29"],
  ["--policy-jwks-cache", "86401"],
])("%s %p is a usage error naming the flag and its range", (flag, value) => {
  expect(() => parse([flag, value])).toThrow(`${flag} must be a whole number from`);
});

test.each(FLAGS)("%s sets %s, from the flag or BURROW_<FLAG>; the flag wins", (flag, field, value, min, max) => {
  const env = `BURROW_${flag.slice(2).toUpperCase().replaceAll("-", "_")}`;
  expect(parse([flag, String(value)]).policy.limits[field]).toBe(value);
  expect(parse([], { [env]: String(min) }).policy.limits[field]).toBe(min);
  expect(parse([flag, String(max)], { [env]: String(min) }).policy.limits[field]).toBe(max);
  expect(parse([flag, String(value)]).policy.limits).toEqual({ ...DEFAULT_POLICY_LIMITS, [field]: value });
});

test.each(FLAGS.flatMap(([flag, , , min, max]) => [[flag, String(min - 1)], [flag, String(max + 1)], [flag, "1.5"], [flag, "8k"]]))("%s %p is a usage error naming the flag and its range", (flag, value) => {
  expect(() => parse([flag, value])).toThrow(UsageError);
  expect(() => parse([flag, value])).toThrow(`${flag} must be a whole number from`);
});

test("the real program: a cap out of its range is one line naming the flag, exit 2, nothing started", async () => {
  for (const [args, flag] of [
    [["--policy-max-expressions", "0"], "--policy-max-expressions must be a whole number from 1 to 1000 (got '0')"],
    [["--policy-value-max-bytes", "100000000"], "--policy-value-max-bytes must be a whole number from 1024 to 67108864"],
  ] as const) {
    const proc = Bun.spawn([process.execPath, join(import.meta.dir, "..", "..", "src", "main.ts"), "server", ...args], {
      env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
      timeout: 15_000,
    });
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    expect(code).toBe(2);
    expect(stdout).toBe("");
    expect(stderr.trim().split("\n")).toEqual([expect.stringContaining(flag)]);
    expect(stderr).toStartWith("burrow:");
  }
}, 40_000);

test("--policy-compiled-kept and --policy-reload-interval: their defaults (the edge's own), a value from the flag or its BURROW_ variable, and one out of range a usage error naming the flag", () => {
  expect(parse([]).policy.compiledKept).toBe(DEFAULT_COMPILED_KEPT);
  expect(parse([]).policy.reloadMs).toBe(POLL_MS);
  expect(parse(["--policy-compiled-kept", "500", "--policy-reload-interval", "250"]).policy).toMatchObject({ compiledKept: 500, reloadMs: 250 });
  expect(parse([], { BURROW_POLICY_COMPILED_KEPT: "1", BURROW_POLICY_RELOAD_INTERVAL: "5000" }).policy).toMatchObject({ compiledKept: 1, reloadMs: 5000 });
  for (const [flag, bad] of [["--policy-compiled-kept", "0"], ["--policy-compiled-kept", "10001"], ["--policy-reload-interval", "249"], ["--policy-reload-interval", "5001"], ["--policy-reload-interval", "2s"]] as const) {
    expect(() => parse([flag, bad])).toThrow(UsageError);
    expect(() => parse([flag, bad])).toThrow(flag);
  }
});
