/**
 * Judging again what a tunnel carries when its policies change
 * (edge/traffic-policy/live-rejudge.ts), on its own: a tunnel with 10,000
 * open connections is judged a batch at a time, the edge's other work
 * running between the batches; and a run marked as a re-judgement counts
 * no rate limit and no basic-auth guess. The end-to-end paths (a real
 * edge, agent and service) are test/security/policy-change-live-visits.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { LiveVisits } from "../../src/edge/judgement/live-visits.ts";
import type { Tunnel } from "../../src/edge/registry.ts";
import { BATCH, rejudgeLive, type PolicySubject } from "../../src/edge/traffic-policy/live-rejudge.ts";
import { TunnelPolicy } from "../../src/edge/traffic-policy/tunnel-policy.ts";
import { defaultServices, loadPolicy, type Policy, type PolicyInput } from "../../src/policy/index.ts";

function load(doc: unknown): Policy {
  const p = loadPolicy(JSON.stringify(doc), { source: "test", services: defaultServices() });
  if (Array.isArray(p)) throw new Error(p[0]!.message);
  return p;
}

/** A tunnel as live-rejudge.ts reads it: its layers and its live visits. */
function tunnelWith(operator: Policy[], count: number): { t: Tunnel; ended: () => number } {
  const visits = new LiveVisits();
  let ended = 0;
  for (let i = 0; i < count; i++) {
    const subject: PolicySubject = { connect: { client: i % 2 === 0 ? "127.0.0.1" : "10.0.0.1", clientPort: 40000 + (i % 20000), serverPort: 20000, host: "x", protocol: "tcp", openedAt: Date.now() } };
    let over = false;
    visits.add({
      client: subject.connect.client,
      get over() {
        return over;
      },
      end: () => {
        over = true;
        ended++;
      },
      judgedBy: () => subject,
    });
  }
  const t = { subdomain: "x", protocol: "tcp", username: "u", liveVisits: visits, policy: TunnelPolicy.of(operator, undefined) } as unknown as Tunnel;
  return { t, ended: () => ended };
}

describe("what a tunnel carries, judged again by its layers", () => {
  test("10,000 open connections are judged a batch at a time: the event loop turns between batches, and those refused end", async () => {
    const deny = load({ on_tcp_connect: [{ actions: [{ type: "restrict-ips", config: { deny: ["127.0.0.0/8"] } }] }] });
    const { t, ended } = tunnelWith([deny], 10_000);
    let turned = -1;
    setImmediate(() => (turned = ended()));
    const done = rejudgeLive(t);
    // the first batch at once, no more
    expect(ended()).toBeLessThanOrEqual(BATCH);
    await done;
    expect(turned).toBeGreaterThanOrEqual(0);
    expect(turned).toBeLessThan(5_000);
    // every other one is from 127.0.0.1
    expect(ended()).toBe(5_000);
    expect(t.liveVisits!.size).toBe(5_000);
  });

  test("a change while a tunnel is judged judges it again after, with the layers of then", async () => {
    const none = load({ on_tcp_connect: [{ expressions: ["false"], actions: [{ type: "deny" }] }] });
    const { t, ended } = tunnelWith([none], 2_000);
    const first = rejudgeLive(t);
    (t as { policy?: TunnelPolicy }).policy = TunnelPolicy.of([load({ on_tcp_connect: [{ actions: [{ type: "deny" }] }] })], undefined);
    await rejudgeLive(t);
    await first;
    expect(ended()).toBe(2_000);
  });
});

describe("a run marked as a re-judgement takes nothing the visitor paid already", () => {
  const base: PolicyInput = {
    conn: { clientIp: "127.0.0.1", clientPort: 5000, serverPort: 80, openedAt: Date.now() },
    endpoint: { host: "x.localhost", port: 80, protocol: "http", url: "http://x.localhost" },
    tunnel: { name: "x", kind: "http", user: "u" },
    request: { method: "GET", target: "/", scheme: "http", host: "x.localhost", headers: [] },
  };

  test("a rate limit passes without counting", async () => {
    const p = load({ on_http_request: [{ actions: [{ type: "rate-limit", config: { name: "one", algorithm: "sliding_window", capacity: 1, rate: "60s" } }] }] });
    for (let i = 0; i < 5; i++) expect((await p.run("on_http_request", { ...base, rejudging: true })).verdict.kind).toBe("continue");
    // the one request the window holds is still there for what comes
    expect((await p.run("on_http_request", base)).verdict.kind).toBe("continue");
    expect((await p.run("on_http_request", base)).verdict.kind).toBe("respond");
  });

  test("basic-auth checks what the request carries and counts no guess", async () => {
    const p = load({ on_http_request: [{ actions: [{ type: "basic-auth", config: { credentials: ["user:right-password"] } }] }] });
    const wrong = { ...base, request: { ...base.request!, headers: [["authorization", `Basic ${btoa("user:wrong-password")}`]] as [string, string][] } };
    const right = { ...base, request: { ...base.request!, headers: [["authorization", `Basic ${btoa("user:right-password")}`]] as [string, string][] } };
    // refused each time, but the address is never locked by them (--basic-auth-limit is 10)
    for (let i = 0; i < 20; i++) {
      const out = await p.run("on_http_request", { ...wrong, rejudging: true });
      expect(out.verdict.kind === "respond" && out.verdict.response.status).toBe(401);
    }
    expect((await p.run("on_http_request", { ...right, rejudging: true })).verdict.kind).toBe("continue");
    expect((await p.run("on_http_request", right)).verdict.kind).toBe("continue");
  });
});
