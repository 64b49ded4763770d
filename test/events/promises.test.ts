/**
 * What the events page promises, checked from outside on the real server
 * with a receiver verifying by `standardwebhooks`, where no other test
 * does: the outbox's cap dropping the oldest and saying so
 * (webhook.dropped), a pending delivery not sent twice at once
 * (DELIVERY_PENDING), the caps on webhooks (TOO_MANY_WEBHOOKS, users
 * allowed none), and the page's own Python verification run on a real
 * delivery.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { portalAs } from "../harness/portal.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";

const MAX_PENDING = 10;

let server: TestServer;
let api: AdminClient;
let receiver: WebhookReceiver;
const work = mkdtempSync(join(tmpdir(), "burrow-events-promises-"));

beforeAll(async () => {
  server = await startServer({ args: ["--webhook-allow-private", "on", "--webhook-backoff-max", "1", "--webhook-max-pending", String(MAX_PENDING), "--webhooks-max", "3", "--webhooks-per-user", "0"] });
  api = await signedIn(server);
  receiver = startReceiver();
});
afterAll(async () => {
  await server?.stop();
  await receiver?.stop();
  rmSync(work, { recursive: true, force: true });
});

describe("the outbox's cap", () => {
  test("a receiver down past --webhook-max-pending: the oldest are dropped, counted, and said by webhook.dropped after what was kept", async () => {
    const made = await api.post("/api/webhooks", { url: receiver.url, events: ["user.created", "webhook.dropped"] });
    receiver.secrets.push(made.body.secret);
    const id = made.body.id as number;
    await receiver.down();
    for (let i = 0; i < 15; i++) expect((await api.post("/api/users", { username: `kept${i}`, password: "password-1234" })).status).toBe(201);

    // a pending delivery is being tried: it cannot be sent again on top
    const pending = (await api.get(`/api/webhooks/${id}/deliveries?status=pending&limit=1`)).body[0];
    const twice = await api.post(`/api/webhooks/${id}/deliveries/${pending.id}/retry`);
    expect(twice.status).toBe(409);
    expect(twice.body.error).toContain("pending already");

    // the cap is looked at every few seconds: ten wait, the notice among them
    await waitUntil(async () => (await api.get(`/api/webhooks/${id}`)).body.dropped === 6, 20_000, "six dropped");
    const hook = (await api.get(`/api/webhooks/${id}`)).body;
    expect(hook).toMatchObject({ pending: MAX_PENDING, dropped: 6 });
    const dropped = (await api.get(`/api/webhooks/${id}/deliveries?status=dropped`)).body as { event_at: string; error: string }[];
    expect(dropped).toHaveLength(6);
    expect(dropped[0]!.error).toBe(`dropped unsent: the webhook had more than ${MAX_PENDING} deliveries waiting`);
    const metrics = await (await fetch(`${server.adminUrl}/metrics`, { headers: { cookie: api.cookie! } })).text();
    expect(metrics).toContain('burrow_webhook_deliveries_total{result="dropped"} 6');

    receiver.up();
    await waitUntil(() => receiver.received.some((r) => r.event.type === "webhook.dropped"), 30_000, "what was kept, then the notice");
    const seen = receiver.received.filter((r, i, all) => all.findIndex((x) => x.id === r.id) === i).map((r) => r.event);
    expect(seen.map((e) => (e.type === "webhook.dropped" ? e.type : e.data.username))).toEqual([...Array.from({ length: 9 }, (_, i) => `kept${i + 6}`), "webhook.dropped"]);
    const times = dropped.map((d) => d.event_at).sort();
    expect(seen.at(-1)!.data).toEqual({ webhook_id: id, user_id: null, dropped: 6, dropped_total: 6, max_pending: MAX_PENDING, from: times[0], to: times.at(-1) });
    expect(receiver.rejected).toEqual([]);
    await api.delete(`/api/webhooks/${id}`);
  }, 60_000);
});

describe("the caps on webhooks", () => {
  test("past --webhooks-max: 409 TOO_MANY_WEBHOOKS; with --webhooks-per-user 0, a user is told they may make none", async () => {
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) ids.push((await api.post("/api/webhooks", { url: `${receiver.url}/${i}`, events: ["user.deleted"] })).body.id);
    const fourth = await api.post("/api/webhooks", { url: `${receiver.url}/4`, events: ["*"] });
    expect(fourth.status).toBe(409);
    expect(fourth.body.error).toContain("--webhooks-max 3");
    for (const id of ids) await api.delete(`/api/webhooks/${id}`);

    await api.createUser("nohooks");
    const user = await portalAs(server.edgePort, "nohooks");
    const refused = await user.post("/_burrow/api/me/webhooks", { url: receiver.url, events: ["tunnel.*"] });
    expect(refused.status).toBe(409);
    expect(refused.body.error).toBe("this server lets users make no webhooks of their own: ask its admin");
  });
});

describe("the events page's verification in Python", () => {
  test.skipIf(!Bun.which("python3"))("verifies a real delivery with the webhook's secret, and refuses one byte changed or another secret", async () => {
    const made = await api.post("/api/webhooks", { url: receiver.url, events: ["user.updated"] });
    receiver.secrets.push(made.body.secret);
    const userId = await api.createUser("verified-in-python");
    await api.put(`/api/users/${userId}`, { max_tunnels: 3 });
    await waitUntil(() => receiver.received.some((r) => r.event.type === "user.updated"), 15_000, "user.updated");
    const got = receiver.received.find((r) => r.event.type === "user.updated")!;

    const page = readFileSync(join(import.meta.dir, "..", "..", "docs", "events.md"), "utf8");
    const python = /```python\n([\s\S]*?)```/.exec(page)![1]!;
    const script = join(work, "verify.py");
    writeFileSync(script, `${python}\nimport json, sys\nc = json.load(sys.stdin)\nprint(verify(c["secret"], c["headers"], c["body"].encode()))\n`);
    const run = async (secret: string, body: string) => {
      const headers = { "webhook-id": got.id, "webhook-timestamp": got.timestamp, "webhook-signature": got.signature };
      const p = Bun.spawn(["python3", script], { stdin: new Blob([JSON.stringify({ secret, headers, body })]), stdout: "pipe", stderr: "pipe" });
      const [out, err] = [await new Response(p.stdout).text(), await new Response(p.stderr).text()];
      expect(await p.exited, err).toBe(0);
      return out.trim();
    };
    expect(await run(made.body.secret, got.body)).toBe("True");
    expect(await run(made.body.secret, got.body.replace("verified", "verifiee"))).toBe("False");
    expect(await run(`whsec_${Buffer.alloc(32, 1).toString("base64")}`, got.body)).toBe("False");
  });
});
