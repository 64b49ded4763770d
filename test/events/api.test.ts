/**
 * /api/webhooks and /_burrow/api/me/webhooks on the real server, with a
 * real receiver verifying every delivery with `standardwebhooks`: a
 * webhook's secret is in its creation's answer only; events made by the
 * admin API's own writes arrive; deliveries are listed with their attempts
 * and a failed one is sent again; a user's own webhook gets the events
 * about that user only, and no other user's webhook is reachable; URLs and
 * event names are checked; and a server killed with SIGKILL between the
 * write and the delivery delivers after its restart.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { portalAs } from "../harness/portal.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";
import { waitUntil } from "../harness/wait.ts";

/** Fast retries: a test waits seconds, not the default backoff's minutes. */
const FAST = ["--webhook-allow-private", "on", "--webhook-backoff-max", "1"];

let server: TestServer;
let api: AdminClient;
let receiver: WebhookReceiver;

beforeAll(async () => {
  server = await startServer({ args: FAST });
  api = await signedIn(server);
  receiver = startReceiver();
});
afterAll(async () => {
  await server?.stop();
  await receiver?.stop();
});

const eventsOf = (r: WebhookReceiver, type?: string) => r.received.filter((x) => type === undefined || x.event.type === type).map((x) => x.event);

describe("/api/webhooks", () => {
  let hookId: number;

  test("made with its secret in the answer only; listed and read without it", async () => {
    const made = await api.post("/api/webhooks", { url: receiver.url, events: ["user.*", "token.*"], description: "ops" });
    expect(made.status).toBe(201);
    expect(made.body.secret).toMatch(/^whsec_/);
    expect(made.body).toMatchObject({ url: receiver.url, events: ["user.*", "token.*"], description: "ops", enabled: true, user_id: null, origin: "api", pending: 0, dropped: 0 });
    receiver.secrets.push(made.body.secret);
    hookId = made.body.id;
    const list = await api.get("/api/webhooks");
    expect(list.status).toBe(200);
    expect(JSON.stringify(list.body)).not.toContain(made.body.secret);
    const one = await api.get(`/api/webhooks/${hookId}`);
    expect(one.body.secret).toBeUndefined();
    expect(one.body.id).toBe(hookId);
    // the server's log never shows it either
    expect(server.output.text()).not.toContain(made.body.secret);
  });

  test("the admin API's own writes are its events, delivered signed", async () => {
    const userId = await api.createUser("webhooked");
    const made = await api.post(`/api/users/${userId}/tokens`, { device_name: "phone" });
    await api.delete(`/api/tokens/${made.body.token_id}`);
    await api.put(`/api/users/${userId}`, { max_tunnels: 3, enabled: false });
    await api.delete(`/api/users/${userId}`);
    await waitUntil(() => receiver.received.length >= 6, 15_000, "six events");
    expect(eventsOf(receiver).map((e) => e.type)).toEqual(["user.created", "token.created", "token.revoked", "user.updated", "user.disabled", "user.deleted"]);
    expect(eventsOf(receiver, "token.created")[0]!.data).toEqual({ user_id: userId, username: "webhooked", token_id: made.body.token_id, device_name: "phone", by: "admin" });
    expect(eventsOf(receiver, "user.updated")[0]!.data).toEqual({ user_id: userId, username: "webhooked", fields: ["enabled", "max_tunnels"] });
  });

  test("its deliveries are listed newest first with their attempts; a failed one is sent again", async () => {
    const list = await api.get(`/api/webhooks/${hookId}/deliveries?limit=2`);
    expect(list.status).toBe(200);
    expect(list.body).toHaveLength(2);
    expect(list.body[0]).toMatchObject({ event_type: "user.deleted", status: "delivered", attempts: 1, response_status: 204, error: null, next_attempt_at: null });
    const older = await api.get(`/api/webhooks/${hookId}/deliveries?before_id=${list.body[1].id}`);
    expect(older.body.map((d: { event_type: string }) => d.event_type)).toEqual(["user.updated", "token.revoked", "token.created", "user.created"]);
    // a delivered one sent again arrives again, with the same id
    const first = older.body.at(-1);
    const again = await api.post(`/api/webhooks/${hookId}/deliveries/${first.id}/retry`);
    expect(again.status).toBe(200);
    expect(again.body.status).toBe("pending");
    await waitUntil(() => receiver.received.length === 7, 15_000, "the delivery sent again");
    expect(receiver.received[6]!.id).toBe(first.event_id);
    expect((await api.post(`/api/webhooks/${hookId}/deliveries/999999/retry`)).status).toBe(404);
    expect((await api.get(`/api/webhooks/${hookId}/deliveries?status=lost`)).status).toBe(400);
  });

  test("changed, rotated, turned off and deleted", async () => {
    const changed = await api.put(`/api/webhooks/${hookId}`, { enabled: false, events: ["*"] });
    expect(changed.body).toMatchObject({ enabled: false, events: ["*"] });
    await api.createUser("unseen"); // off: not written for it
    const rotated = await api.post(`/api/webhooks/${hookId}/rotate`, { overlap_seconds: 60 });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.previous_secret_until).not.toBeNull();
    expect((await api.post(`/api/webhooks/${hookId}/rotate`, { overlap_seconds: 10 ** 9 })).status).toBe(400);
    // nothing was written for "unseen": the newest delivery is still the last one before it was turned off
    const deliveries = (await api.get(`/api/webhooks/${hookId}/deliveries`)).body as { event_type: string }[];
    expect(deliveries).toHaveLength(6);
    expect(deliveries[0]!.event_type).toBe("user.deleted");
    expect((await api.delete(`/api/webhooks/${hookId}`)).body).toEqual({ status: "deleted" });
    expect((await api.get(`/api/webhooks/${hookId}`)).status).toBe(404);
  });

  test("a URL or an event name that cannot be is refused with what is wrong", async () => {
    const bad = async (body: unknown) => {
      const res = await api.post("/api/webhooks", body);
      expect(res.status).toBe(400);
      return res.body.error as string;
    };
    expect(await bad({ url: "ftp://example.com/x", events: ["*"] })).toContain("http:// or https://");
    expect(await bad({ url: "https://user:pw@example.com/x", events: ["*"] })).toContain("user or password");
    expect(await bad({ url: "https://example.com/x", events: ["tunnel.exploded"] })).toContain("not an event type");
    expect(await bad({ url: "https://example.com/x", events: [] })).toContain("at least one");
    expect(await bad({ url: "https://example.com/x" })).toContain("events");
    expect(await bad({ url: "x".repeat(3000), events: ["*"] })).toContain("2048");
  });
});

describe("/_burrow/api/me/webhooks", () => {
  test("a user's own webhook gets the events about them only; another's is not reachable; admin-only events are refused", async () => {
    const own = startReceiver();
    try {
      const aliceId = await api.createUser("alice");
      await api.createUser("bob");
      const alice = await portalAs(server.edgePort, "alice");
      const bob = await portalAs(server.edgePort, "bob");
      expect((await alice.post("/_burrow/api/me/webhooks", { url: own.url, events: ["user.*"] })).body.error).toContain("names no event about your own");
      const made = await alice.post("/_burrow/api/me/webhooks", { url: own.url, events: ["*"] });
      expect(made.status).toBe(201);
      expect(made.body.user_id).toBe(aliceId);
      own.secrets.push(made.body.secret);
      // bob's and the admin's view
      expect((await bob.get(`/_burrow/api/me/webhooks/${made.body.id}`)).status).toBe(404);
      expect((await bob.delete(`/_burrow/api/me/webhooks/${made.body.id}`)).status).toBe(404);
      expect((await bob.get("/_burrow/api/me/webhooks")).body).toEqual([]);
      expect((await api.get(`/api/webhooks/${made.body.id}`)).body.origin).toBe("portal");
      // alice's token and bob's: only hers arrives; user.* never does
      await alice.post("/_burrow/api/me/tokens", { device_name: "mine" });
      await bob.post("/_burrow/api/me/tokens", { device_name: "his" });
      await api.put(`/api/users/${aliceId}`, { max_tunnels: 9 });
      await waitUntil(() => own.received.length >= 1, 15_000, "alice's token event");
      await Bun.sleep(1_500);
      expect(eventsOf(own).map((e) => `${e.type} ${e.data.device_name}`)).toEqual(["token.created mine"]);
      expect(eventsOf(own)[0]!.data.by).toBe("portal");
      // deliveries of her own only, and the per-user cap
      expect((await alice.get(`/_burrow/api/me/webhooks/${made.body.id}/deliveries`)).body).toHaveLength(1);
      for (let i = 0; i < 4; i++) expect((await alice.post("/_burrow/api/me/webhooks", { url: own.url, events: ["token.*"] })).status).toBe(201);
      const sixth = await alice.post("/_burrow/api/me/webhooks", { url: own.url, events: ["token.*"] });
      expect(sixth.status).toBe(409);
      expect(sixth.body.error).toContain("delete one first");
    } finally {
      await own.stop();
    }
  });
});

describe("private destinations", () => {
  test("without --webhook-allow-private a loopback URL is refused at once", async () => {
    await using plain = await startServer();
    const admin = await signedIn(plain);
    for (const url of ["http://127.0.0.1:9/x", "http://localhost:9/x", "http://[::1]:9/x", "http://169.254.169.254/latest/meta-data", "http://10.0.0.1/x"]) {
      const res = await admin.post("/api/webhooks", { url, events: ["*"] });
      expect({ url, status: res.status }).toEqual({ url, status: 400 });
      expect(res.body.error).toContain("refused");
    }
  });
});

describe("SIGKILL between the write and the delivery", () => {
  test("the event is delivered after the restart", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "burrow-events-kill-"));
    const late = startReceiver();
    try {
      const first = await startServer({ dataDir, args: FAST });
      const admin = await signedIn(first);
      const made = await admin.post("/api/webhooks", { url: late.url, events: ["user.created"] });
      late.secrets.push(made.body.secret);
      await late.down(); // the receiver is away when the event is written
      await admin.createUser("survivor");
      await waitUntil(async () => (await admin.get(`/api/webhooks/${made.body.id}/deliveries`)).body[0]?.attempts >= 1, 15_000, "a failed attempt");
      first.proc.kill("SIGKILL");
      await first.proc.exited;
      late.up();
      const second = await startServer({ dataDir, args: FAST });
      try {
        await waitUntil(() => late.received.length >= 1, 20_000, "the delivery after the restart");
        expect(eventsOf(late).map((e) => `${e.type} ${e.data.username}`)).toEqual(["user.created survivor"]);
      } finally {
        await second.stop();
      }
    } finally {
      await late.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
