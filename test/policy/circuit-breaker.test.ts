/**
 * circuit-breaker, as ngrok documents it: the rolling window's buckets on
 * an injected clock, the volume and error thresholds, the trip and the
 * request that tries the service after tripped_duration (its success
 * closes the breaker, its failure trips it again), the action answering
 * 503 while tripped, and its config refused at load with clear errors.
 */
import { describe, expect, test } from "bun:test";
import { Breaker } from "../../src/policy/breaker.ts";
import { defaultServices, formatPolicyError, type Policy } from "../../src/policy/index.ts";
import { WorkingRequest } from "../../src/policy/message.ts";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const settings = { errorThreshold: 0.5, volumeThreshold: 4, windowMs: 10_000, trippedMs: 5_000, buckets: 10 };

/** `n` requests let through at `now`, each ending at once. */
function ended(b: Breaker, now: number, n: number, failed: boolean): void {
  for (let i = 0; i < n; i++) {
    const a = b.admit(now);
    expect(a).toBe("pass");
    b.record(a, failed, now);
  }
}

describe("the breaker's window", () => {
  test("it trips once the volume is reached and the failures' share reaches the threshold", () => {
    const b = new Breaker(settings);
    ended(b, 1000, 2, true);
    // 2 of 2 failed, but under the volume: not tripped
    expect(b.tripped(1000)).toBe(false);
    ended(b, 1500, 1, false);
    expect(b.counts(1500)).toEqual([3, 2]);
    ended(b, 1600, 1, false);
    // 4 requests, 2 failed: 0.5 reaches 0.5
    expect(b.tripped(1600)).toBe(true);
    expect(b.admit(1700)).toBe("refuse");
    expect(b.retryAfter(1700)).toBe(4900);
  });

  test("under the error threshold it stays closed, whatever the volume", () => {
    const b = new Breaker(settings);
    ended(b, 1000, 10, false);
    ended(b, 1000, 9, true);
    expect(b.counts(1000)).toEqual([19, 9]);
    expect(b.tripped(1000)).toBe(false);
  });

  test("outcomes older than the window fall out of it, bucket by bucket", () => {
    const b = new Breaker(settings);
    ended(b, 0, 2, true); // bucket 0 (0-999 ms)
    ended(b, 5_000, 1, false); // bucket 5
    expect(b.counts(9_999)).toEqual([3, 2]);
    // at 10 s bucket 0 has left the window: 1 request, under the volume
    expect(b.counts(10_000)).toEqual([1, 0]);
    ended(b, 10_000, 2, false);
    expect(b.counts(10_000)).toEqual([3, 0]);
    // a bucket's slot reused by a later window starts from nothing
    expect(b.counts(15_000)).toEqual([2, 0]);
    expect(b.tripped(15_000)).toBe(false);
  });

  test("after tripped_duration one request tries the service: its success closes the breaker with the window emptied", () => {
    const b = new Breaker(settings);
    ended(b, 0, 4, true);
    expect(b.admit(4_999)).toBe("refuse");
    expect(b.admit(5_000)).toBe("probe");
    // while it is out, the others are refused
    expect(b.admit(5_001)).toBe("refuse");
    expect(b.tripped(5_001)).toBe(true);
    b.record("probe", false, 5_100);
    expect(b.tripped(5_100)).toBe(false);
    expect(b.counts(5_100)).toEqual([0, 0]);
    expect(b.admit(5_200)).toBe("pass");
  });

  test("the trying request's failure trips it again for tripped_duration", () => {
    const b = new Breaker(settings);
    ended(b, 0, 4, true);
    expect(b.admit(5_000)).toBe("probe");
    b.record("probe", true, 5_500);
    expect(b.admit(10_499)).toBe("refuse");
    expect(b.admit(10_500)).toBe("probe");
  });

  test("a trying request never told of (refused later on) is given up after tripped_duration; one the visitor left frees the way at once", () => {
    const b = new Breaker(settings);
    ended(b, 0, 4, true);
    expect(b.admit(5_000)).toBe("probe");
    expect(b.admit(9_999)).toBe("refuse");
    expect(b.admit(10_000)).toBe("probe");
    b.release("probe");
    expect(b.admit(10_001)).toBe("probe");
  });

  test("ngrok's example: error_threshold 0 and volume 1 trip on the first request, whatever its outcome", () => {
    const b = new Breaker({ ...settings, errorThreshold: 0, volumeThreshold: 1 });
    ended(b, 0, 1, false);
    expect(b.tripped(0)).toBe(true);
  });
});

/** A request run through the policy's on_http_request at `now`, with the request object the edge would tell the outcome through. */
async function through(p: Policy, now: number) {
  const input = requestInput({ now });
  const request = new WorkingRequest(input.request!, now);
  const out = await p.runFrom("on_http_request", input, { request });
  return { out, request };
}

describe("the circuit-breaker action", () => {
  test("it answers 503 with Retry-After while tripped, and lets requests through again after tripped_duration", async () => {
    let now = 1_000_000;
    const p = policyOf(
      `
on_http_request:
  - actions:
      - type: circuit-breaker
        config: { error_threshold: 0.5, volume_threshold: 3, window_duration: 10s, tripped_duration: 2s }
`,
      { services: defaultServices({ now: () => now }) },
    );
    for (let i = 0; i < 3; i++) {
      const { out, request } = await through(p, now);
      expect(out.verdict.kind).toBe("continue");
      expect(request.breakers?.length).toBe(1);
      request.breakers![0]!.settle("failed");
    }
    const refused = await through(p, now);
    expect(answered(refused.out)).toMatchObject({ status: 503, headers: { "retry-after": "2" } });
    expect(refused.request.breakers).toBeUndefined();
    now += 2_000;
    const probe = await through(p, now);
    expect(probe.out.verdict.kind).toBe("continue");
    probe.request.breakers![0]!.settle("ok");
    expect((await through(p, now)).out.verdict.kind).toBe("continue");
  });

  test("enforce: false never trips and asks for no outcome", async () => {
    const p = policyOf("on_http_request:\n  - actions: [{ type: circuit-breaker, config: { error_threshold: 0, volume_threshold: 1, enforce: false } }]\n");
    for (let i = 0; i < 3; i++) {
      const { out, request } = await through(p, Date.now());
      expect(out.verdict.kind).toBe("continue");
      expect(request.breakers).toBeUndefined();
    }
  });

  test("ngrok's defaults load: only error_threshold given, or no config at all", () => {
    policyOf("on_http_request:\n  - actions: [{ type: circuit-breaker, config: { error_threshold: 0.25 } }]\n");
    policyOf("on_http_request:\n  - actions: [{ type: circuit-breaker }]\n");
  });

  test("a config out of ngrok's ranges is refused at load, at its field", () => {
    const refused = (config: string) => errorsOf(`on_http_request:\n  - actions: [{ type: circuit-breaker, config: ${config} }]\n`).map((e) => formatPolicyError(e)).join("\n");
    expect(refused("{ error_threshold: 1.5 }")).toContain("error_threshold");
    expect(refused("{ error_threshold: -0.1 }")).toContain("error_threshold");
    expect(refused("{ volume_threshold: 0 }")).toContain("volume_threshold");
    expect(refused("{ volume_threshold: 2.5 }")).toContain("volume_threshold");
    expect(refused("{ window_duration: 500ms }")).toContain("'500ms' is not a duration from 1s to 2m");
    expect(refused("{ tripped_duration: 3m }")).toContain("'3m' is not a duration from 1s to 2m");
    expect(refused("{ tripped_duration: soon }")).toContain("tripped_duration");
    expect(refused("{ num_buckets: 0 }")).toContain("num_buckets");
    expect(refused("{ retries: 3 }")).toContain("retries");
  });

  test("only in on_http_request", () => {
    expect(errorsOf("on_http_response:\n  - actions: [{ type: circuit-breaker }]\n")[0]!.code).toBe("ACTION_PHASE");
    expect(errorsOf("on_tcp_connect:\n  - actions: [{ type: circuit-breaker }]\n")[0]!.code).toBe("ACTION_PHASE");
  });
});
