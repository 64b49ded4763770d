/**
 * A graceful stop (SIGTERM, the drain) loses none of the events the edge
 * holds back: what it queued for the outbox (a tunnel going offline as the
 * drain closes it), and what it would say later (a traffic policy's rate
 * limit counted since its last event, said once a minute). The server is
 * stopped with SIGTERM while an agent is connected and a rate limit is
 * counting; after a restart on the same data dir, a receiver verifying
 * with `standardwebhooks` has every one of them.
 */
import { afterAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startServer } from "../harness/server.ts";
import { startReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

const FAST = ["--webhook-allow-private", "on", "--webhook-backoff-max", "1"];
const POLICY = `
on_http_request:
  - actions:
      - type: rate-limit
        config: { name: tight, algorithm: sliding_window, capacity: 1, rate: 60s, bucket_key: [conn.client_ip] }
`;

const dataDir = mkdtempSync(join(tmpdir(), "burrow-events-stop-"));
const receiver = startReceiver();
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("hello") });
afterAll(async () => {
  await receiver.stop();
  upstream.stop(true);
  rmSync(dataDir, { recursive: true, force: true });
});

const events = (type: string) => receiver.received.filter((r) => r.event.type === type).map((r) => r.event.data as Record<string, any>);

test("SIGTERM writes what the edge held back: the drain's tunnel.offline and a rate limit's count of its minute", async () => {
  let counted = 0;
  {
    await using first = await startServer({ dataDir, args: FAST });
    const api = await signedIn(first);
    const made = await api.post("/api/webhooks", { url: receiver.url, events: ["tunnel.*", "policy.*"] });
    receiver.secrets.push(made.body.secret);
    const userId = await api.createUser("limited", { skip_warning: true });
    expect((await api.post("/api/policies", { name: "tight", scope: "user", user_id: userId, policy: POLICY })).status).toBe(201);
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: first.edgeUrl, token: await api.createToken(userId), args: ["--subdomain", "limited"] });
    await waitUntil(() => events("tunnel.online").length === 1, 20_000, "tunnel.online");

    // the first refusal is said at once; the next ones are counted, to be said at the end of their minute
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) statuses.push((await tunnelFetch(first.edgePort, "limited", "/")).status);
    counted = statuses.filter((s) => s === 429).length - 1;
    expect(counted).toBeGreaterThanOrEqual(3);
    await waitUntil(() => events("policy.rate_limited").length === 1, 20_000, "the first policy.rate_limited");
    expect(events("policy.rate_limited")[0]).toMatchObject({ refused: 1 });

    // SIGTERM well within the minute, the agent still connected
    expect(await first.stop("SIGTERM")).toBe(0);
    await agent.stop();
  }

  // whatever the stopping server had no time to deliver, the next one does: nothing held back was lost
  await using second = await startServer({ dataDir, args: FAST });
  await waitUntil(() => events("tunnel.offline").length === 1 && events("policy.rate_limited").length === 2, 20_000, "tunnel.offline and the rate limit's count");
  expect(events("tunnel.offline")[0]).toMatchObject({ username: "limited", kind: "http" });
  expect(events("tunnel.offline")[0]!.bytes_out).toBeGreaterThan(0);
  expect(events("policy.rate_limited")[1]).toMatchObject({ username: "limited", refused: counted });
  expect(second.output.text()).not.toContain("events not written");
}, 90_000);
