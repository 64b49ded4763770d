/**
 * A link between two nodes that goes silent without closing: node A's
 * --node-url is a TCP proxy that, once told, forwards nothing more on the
 * connections it carries (new ones it forwards as before), while both
 * nodes and the database stay well.
 *
 * Promised: node B, whose visitors A's tunnel is relayed to, finds its link
 * dead by the mux's keepalive (no sign of life for DEAD_AFTER_MS) and makes
 * a new one for the next visitor, so visitors of B are served again within
 * about half a minute; node A drops its end of the silent link the same way.
 * Without liveness on the node link, B's visitors got no answer for good.
 *
 * Takes about 30 s: the 25 s of silence are the point.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { DEAD_AFTER_MS } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startFreezableProxy, type FreezableProxy } from "../harness/freezable-proxy.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { within } from "../harness/wait.ts";

const SECRET = "dead-link-secret-for-tests-0123456789";
/** Found dead after DEAD_AFTER_MS, at the keepalive's next tick; the rest is room for a loaded machine. */
const REPLACED_WITHIN_MS = DEAD_AFTER_MS + 20_000;

let pg: TestPostgres;
let proxy: FreezableProxy;
let a: TestServer;
let b: TestServer;
let agent: TestAgent;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`served ${new URL(req.url).pathname}`) });

beforeAll(async () => {
  pg = await startPostgres();
  const db = await pg.newDatabase();
  const ports = freeRange(2);
  proxy = startFreezableProxy({ host: "127.0.0.1", port: ports.first });
  const node = (id: string, port: number, url: string) =>
    startServer({ args: ["--database", db, "--node-id", id, "--http-port", String(port), "--node-url", url, "--cluster-secret", SECRET, "--response-timeout", "2"] });
  [a, b] = await Promise.all([node("a", ports.first, `http://127.0.0.1:${proxy.port}`), node("b", ports.first + 1, `http://127.0.0.1:${ports.first + 1}`)]);
  const api = await signedIn(a);
  const token = await api.createToken(await api.createUser("far", { skip_warning: true }));
  agent = await startAgent({ kind: "http", target: upstream.port!, server: a.edgeUrl, token, args: ["--subdomain", "on-a", "--skip-warning"] });
});

afterAll(async () => {
  await agent?.stop();
  await Promise.all([a?.stop(), b?.stop()]);
  proxy?.stop();
  upstream.stop(true);
  await pg?.stop();
});

async function visitB(path: string): Promise<{ status: number; body: string }> {
  const res = await within(tunnelFetch(b.edgePort, "on-a", path), 10_000, `an answer from node b for ${path}`);
  return { status: res.status, body: await within(res.text(), 10_000, `the body for ${path}`) };
}

test(
  "a node link that stops carrying bytes is found dead and replaced: node b's visitors are served again within about 30 s",
  async () => {
    // the link from b to a is made through the proxy
    expect(await visitB("/before")).toEqual({ status: 200, body: "served /before" });
    const madeBefore = proxy.connections;

    proxy.freezeEstablished();
    const frozeAt = performance.now();
    const bFound = b.output.waitFor(/relay link down.*no sign of life/, REPLACED_WITHIN_MS);
    const aFound = a.output.waitFor(/relay link from another node silent too long/, REPLACED_WITHIN_MS);
    // awaited below; a failure before then is the test's, not an unhandled rejection
    bFound.catch(() => {});
    aFound.catch(() => {});

    // visitors all along, one after the other (bounded in count and time), until one is served again
    let served: { status: number; body: string; at: number } | undefined;
    for (let i = 0; i < 120 && performance.now() - frozeAt < REPLACED_WITHIN_MS; i++) {
      const r = await visitB(`/during-${i}`);
      if (r.status === 200) {
        served = { ...r, at: performance.now() - frozeAt };
        break;
      }
      await Bun.sleep(250);
    }
    expect(served).toBeDefined();
    expect(served!.body).toMatch(/^served \/during-\d+$/);
    // served again by a new link, not by the frozen one coming back
    expect(served!.at).toBeGreaterThanOrEqual(DEAD_AFTER_MS - 1_000);
    expect(proxy.connections).toBeGreaterThan(madeBefore);
    await bFound;
    await aFound;

    // and it stays served
    expect(await visitB("/after")).toEqual({ status: 200, body: "served /after" });
  },
  REPLACED_WITHIN_MS + 30_000,
);
