/**
 * circuit-breaker through a real tunnel: a real server and agent, a local
 * service switched to answer 500s, curl as the visitor. After enough
 * failures the tunnel answers 503 without the service being asked (its
 * hits counted); after tripped_duration one request tries it again (its
 * failure trips the breaker anew, its success closes it). Over HTTP/1.1,
 * over HTTP/2 streams (h2c, prior knowledge), and with the service gone
 * (the edge's own 502s count as failures).
 */
import { describe, expect, test } from "bun:test";
import { curl, type CurlReply } from "./curl.ts";
import { withPolicy, type PolicyTunnel } from "./rig.ts";

const POLICY = `
on_http_request:
  - name: breaker
    actions:
      - type: circuit-breaker
        config: { error_threshold: 0.5, volume_threshold: 4, window_duration: 30s, tripped_duration: 1s }
`;

/** A service that answers 500 while `failing`, counting what reaches it. */
function switchable() {
  const s = {
    failing: true,
    hits: 0,
    upstream: () => {
      s.hits++;
      return new Response(s.failing ? "broken\n" : "fine\n", { status: s.failing ? 500 : 200 });
    },
  };
  return s;
}

/** Asks until the answer is not a 503 (the breaker let one through after tripped_duration): bounded in count and time. */
async function untilLetThrough(ask: () => Promise<CurlReply>): Promise<CurlReply> {
  const deadline = Date.now() + 15_000;
  for (let i = 0; i < 300 && Date.now() < deadline; i++) {
    const r = await ask();
    if (r.status !== 503) return r;
    await Bun.sleep(50);
  }
  throw new Error("the breaker never let a request through again");
}

async function tripsAndRecovers(t: PolicyTunnel, s: ReturnType<typeof switchable>, args: string[]): Promise<void> {
  const ask = () => t.curl("/x", args);
  for (let i = 0; i < 4; i++) expect((await ask()).status).toBe(500);
  expect(s.hits).toBe(4);
  // tripped: answered at the edge, the service not asked
  const refused = await ask();
  expect(refused.status).toBe(503);
  expect(refused.headers["retry-after"]).toBe("1");
  expect((await ask()).status).toBe(503);
  expect(s.hits).toBe(4);
  // after tripped_duration one request tries the service; it fails: tripped again at once
  const tried = await untilLetThrough(ask);
  expect(tried.status).toBe(500);
  expect(s.hits).toBe(5);
  expect((await ask()).status).toBe(503);
  expect(s.hits).toBe(5);
  // the service mended: the next try closes the breaker, and requests pass again
  s.failing = false;
  const mended = await untilLetThrough(ask);
  expect(mended.status).toBe(200);
  for (let i = 0; i < 3; i++) expect((await ask()).status).toBe(200);
  expect(s.hits).toBe(9);
}

describe("circuit-breaker at the edge", () => {
  test("HTTP/1.1: 500s trip it, the service is not asked while tripped, and requests pass again after tripped_duration", async () => {
    const s = switchable();
    await using t = await withPolicy(POLICY, { upstream: s.upstream });
    await tripsAndRecovers(t, s, []);
  }, 60_000);

  test("HTTP/2 streams (h2c): the same", async () => {
    const s = switchable();
    await using t = await withPolicy(POLICY, { upstream: s.upstream });
    await tripsAndRecovers(t, s, ["--http2-prior-knowledge"]);
  }, 60_000);

  for (const [name, args] of [["HTTP/1.1", []], ["HTTP/2", ["--http2-prior-knowledge"]]] as const) {
    test(`${name}, with response rules (the response judged on its way): the service's own status is counted`, async () => {
      const s = switchable();
      // the response rule answers 200 in the 500's place: the breaker still counts the service's 500
      await using t = await withPolicy(`${POLICY}
on_http_response:
  - expressions: ["res.status_code == 500"]
    actions: [{ type: custom-response, config: { status_code: 200, body: "masked" } }]
`, { upstream: s.upstream });
      for (let i = 0; i < 4; i++) expect((await t.curl("/x", [...args])).body).toBe("masked");
      expect((await t.curl("/x", [...args])).status).toBe(503);
      expect(s.hits).toBe(4);
    }, 60_000);
  }

  test("successes under the threshold keep it closed", async () => {
    const s = switchable();
    await using t = await withPolicy(POLICY, { upstream: s.upstream });
    s.failing = false;
    for (let i = 0; i < 6; i++) expect((await t.curl("/x")).status).toBe(200);
    s.failing = true;
    // 2 failures in 8: under half, so both reach the service
    expect((await t.curl("/x")).status).toBe(500);
    expect((await t.curl("/x")).status).toBe(500);
    expect(s.hits).toBe(8);
  }, 60_000);

  for (const [name, args] of [["HTTP/1.1", []], ["HTTP/2", ["--http2-prior-knowledge"]]] as const) {
    test(`${name}: with the service gone, the edge's 502s count as failures`, async () => {
      // a port nothing listens on: the agent cannot reach it, the edge answers 502
      const gone = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
      const port = gone.port!;
      gone.stop(true);
      await using t = await withPolicy(POLICY, { upstream: port });
      for (let i = 0; i < 4; i++) expect((await curl(t.url("/x"), [...args])).status).toBe(502);
      const refused = await curl(t.url("/x"), [...args]);
      expect(refused.status).toBe(503);
      expect(refused.body).toContain("Service Unavailable");
    }, 60_000);
  }
});
