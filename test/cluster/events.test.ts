/**
 * Events on two nodes over one PostgreSQL: a node joining says node.up;
 * both deliver the outbox, one
 * webhook at a time under a lease, so a receiver sees each event in order;
 * the node holding a webhook's lease is killed with SIGKILL in the middle
 * of an attempt, and the other takes the webhook over once the lease has
 * run out and delivers everything, the delivery that was in flight
 * included (at least once: the same webhook-id). The survivor says
 * node.down and alert.node_down; and when PostgreSQL itself goes away, it
 * posts alert.database_unavailable straight to --alert-webhook.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SQL } from "bun";
import { newWebhookSecret } from "../../src/core/events/signing.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

const ALERT_SECRET = newWebhookSecret();
let pg: TestPostgres;
let url: string;
let sql: SQL;
let nodes: TestServer[] = [];
let receiver: WebhookReceiver;
let alerts: WebhookReceiver;
let api: AdminClient;

beforeAll(async () => {
  pg = await startPostgres();
  url = await pg.newDatabase();
  receiver = startReceiver();
  alerts = startReceiver([ALERT_SECRET]);
  const args = (id: string) => ["--database", url, "--node-id", id, "--webhook-allow-private", "on", "--webhook-timeout", "2", "--webhook-backoff-max", "1", "--alert-webhook", alerts.url];
  nodes = [await startServer({ args: args("n1"), env: { BURROW_ALERT_WEBHOOK_SECRET: ALERT_SECRET } })];
  // the webhook first: the second node's node.up is written for it
  const made = await (await signedIn(nodes[0]!)).post("/api/webhooks", { url: receiver.url, events: ["user.created", "node.*"] });
  receiver.secrets.push(made.body.secret);
  nodes.push(await startServer({ args: args("n2"), env: { BURROW_ALERT_WEBHOOK_SECRET: ALERT_SECRET } }));
  api = await signedIn(nodes[1]!);
  sql = new SQL(url, { max: 1 });
});
afterAll(async () => {
  await sql?.close();
  await Promise.all(nodes.map((n) => n.stop("SIGKILL")));
  await receiver?.stop();
  await alerts?.stop();
  await pg?.stop();
});

const usernames = () => receiver.received.filter((r) => r.event.type === "user.created").map((r) => (r.event.data as { username: string }).username);

test("a node that joins says node.up; both nodes deliver, one webhook at a time: each event once, in order", async () => {
  const up = () => receiver.received.filter((r) => r.event.type === "node.up").map((r) => r.event.data);
  await waitUntil(() => up().some((d) => d.node === "n2"), 20_000, "n2's node.up");
  expect(up()).toContainEqual({ node: "n2", url: null });
  const other = await signedIn(nodes[0]!);
  for (let i = 0; i < 10; i++) await (i % 2 ? api : other).createUser(`both${i}`);
  await waitUntil(() => usernames().length >= 10, 20_000, "ten events");
  await Bun.sleep(500);
  expect(usernames()).toEqual(Array.from({ length: 10 }, (_, i) => `both${i}`));
});

test("the node holding the lease is killed mid-attempt: the other delivers everything after the lease runs out", async () => {
  receiver.mode = "hang";
  const before = receiver.requests;
  for (let i = 0; i < 5; i++) await api.createUser(`kill${i}`);
  // an attempt hangs: its node holds the webhook's lease
  await waitUntil(async () => (await sql`SELECT lease_node FROM webhooks WHERE origin = 'api'`)[0]?.lease_node != null && receiver.requests > before, 20_000, "an attempt in flight");
  const holder = String((await sql`SELECT lease_node FROM webhooks WHERE origin = 'api'`)[0].lease_node);
  const victim = nodes.find((n) => n.output.text().includes(`node=${holder}`))!;
  const survivor = nodes.find((n) => n !== victim)!;
  victim.proc.kill("SIGKILL");
  await victim.proc.exited;
  const killed = performance.now();
  receiver.mode = "ok";
  await waitUntil(() => new Set(usernames()).size >= 15, 60_000, "every event, from the other node");
  const firsts = usernames().filter((u, i, all) => all.indexOf(u) === i);
  expect(firsts.slice(10)).toEqual(["kill0", "kill1", "kill2", "kill3", "kill4"]);
  // the lease (2 x 2 s + 5 s) had to run out first: liveness, not speed
  expect(performance.now() - killed).toBeLessThan(60_000);
  const survivorId = holder === "n1" ? "n2" : "n1";
  expect(String((await sql`SELECT lease_node FROM webhooks WHERE origin = 'api'`)[0]?.lease_node ?? survivorId)).toBe(survivorId);

  // the survivor sweeps the dead node and says so, to the webhook and to --alert-webhook
  await waitUntil(() => receiver.received.some((r) => r.event.type === "node.down"), 30_000, "node.down");
  expect(receiver.received.find((r) => r.event.type === "node.down")!.event.data).toMatchObject({ node: holder });
  await waitUntil(() => alerts.received.some((r) => r.event.type === "alert.node_down"), 30_000, "alert.node_down");
  expect(alerts.received.find((r) => r.event.type === "alert.node_down")!.event.data).toMatchObject({ down: holder, node: survivorId, severity: "critical" });
  // the alert webhook gets alerts only
  expect(alerts.received.every((r) => r.event.type.startsWith("alert."))).toBe(true);
  nodes = [survivor];
});

test("PostgreSQL goes away: alert.database_unavailable is posted straight to --alert-webhook", async () => {
  const survivor = nodes[0]!;
  const admin = await signedIn(survivor);
  await pg.stop();
  // a request meets the outage (503), which is what notices it
  expect((await admin.get("/api/users")).status).toBe(503);
  await waitUntil(() => alerts.received.some((r) => r.event.type === "alert.database_unavailable"), 20_000, "the database alert");
  const alert = alerts.received.find((r) => r.event.type === "alert.database_unavailable")!;
  expect(alert.verifiedBy).toEqual([0]);
  expect(alert.event.data).toMatchObject({ severity: "critical", node: survivor === nodes[0] ? expect.any(String) : "" });
  expect((alert.event.data as { message: string }).message).toContain("the database is unavailable since");
  // said once, not per failed query
  for (let i = 0; i < 5; i++) await admin.get("/api/users");
  await Bun.sleep(500);
  expect(alerts.received.filter((r) => r.event.type === "alert.database_unavailable")).toHaveLength(1);
});
