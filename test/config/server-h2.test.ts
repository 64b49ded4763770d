/** --h2, --h2-prior-knowledge and the HTTP/2 limits (--h2-max-*, --h2-idle-timeout) as `burrow server` reads them: defaults, flag, environment, mistakes. */
import { expect, test } from "bun:test";
import { parseServerConfig } from "../../src/config/server.ts";
import { DEFAULT_H2_LIMITS } from "../../src/http2/limits.ts";
import { UsageError } from "../../src/usage-error.ts";

const parse = (argv: string[], env: Record<string, string> = {}) => {
  const r = parseServerConfig(argv, env);
  if (r.help) throw new Error("help");
  return r.config;
};

test("by default HTTP/2 is on both ways, with the engine's own limits", () => {
  expect(parse([]).http2).toEqual({ alpn: true, priorKnowledge: true, limits: { ...DEFAULT_H2_LIMITS } });
});

test("each way turns off alone, by flag or BURROW_H2 / BURROW_H2_PRIOR_KNOWLEDGE; the flag wins", () => {
  expect(parse(["--h2", "off"]).http2).toMatchObject({ alpn: false, priorKnowledge: true });
  expect(parse(["--h2-prior-knowledge", "off"]).http2).toMatchObject({ alpn: true, priorKnowledge: false });
  expect(parse([], { BURROW_H2: "off", BURROW_H2_PRIOR_KNOWLEDGE: "off" }).http2).toMatchObject({ alpn: false, priorKnowledge: false });
  expect(parse(["--h2", "on"], { BURROW_H2: "off" }).http2.alpn).toBe(true);
});

test("the limits from their flags or the environment", () => {
  const c = parse(
    ["--h2-max-concurrent-streams", "10", "--h2-max-header-list", "4096", "--h2-max-resets-per-second", "7", "--h2-max-control-frames", "50", "--h2-idle-timeout", "5"],
    { BURROW_H2_MAX_QUEUED_RESPONSE: "65536", BURROW_H2_MAX_CONCURRENT_STREAMS: "999" },
  );
  expect(c.http2.limits).toEqual({
    maxConcurrentStreams: 10,
    maxHeaderListBytes: 4096,
    maxResetsPerSecond: 7,
    maxControlFramesPerSecond: 50,
    idleTimeoutMs: 5000,
    maxQueuedResponseBytes: 65536,
  });
});

test.each([
  ["--h2", "yes", /--h2 must be on or off/],
  ["--h2-prior-knowledge", "1", /--h2-prior-knowledge must be on or off/],
  ["--h2-max-concurrent-streams", "0", /from 1 to 1000/],
  ["--h2-max-concurrent-streams", "1001", /from 1 to 1000/],
  ["--h2-max-header-list", "1023", /from 1024 to 1048576/],
  ["--h2-max-resets-per-second", "0", /from 1 to 100000/],
  ["--h2-max-control-frames", "9", /from 10 to 1000000/],
  ["--h2-idle-timeout", "4", /from 5 to 255/],
  ["--h2-idle-timeout", "256", /from 5 to 255/],
  ["--h2-max-queued-response", "65535", /bytes from 65536 to 1073741824/],
  ["--h2-max-queued-response", "8M", /bytes from 65536 to 1073741824/],
])("%s %p is a usage error naming the flag and its range", (flag, value, words) => {
  expect(() => parse([flag, value])).toThrow(UsageError);
  expect(() => parse([flag, value])).toThrow(words);
});
