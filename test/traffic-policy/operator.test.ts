/**
 * The operator's traffic policies: /api/policies (made, listed, read,
 * changed, deleted; a document that does not load refused with its lines),
 * applied to live tunnels within 5 s without a reconnect, by scope (the
 * server, a user, a hostname or wildcard). That a tunnel's own policy
 * cannot lift them is test/security/operator-policy-lift.test.ts.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { curl } from "./curl.ts";
import { echo } from "./rig.ts";

/** Polls `check` every 100 ms until it holds, for at most `ms` (a liveness bound: the promise is 5 s). */
async function within(ms: number, check: () => Promise<boolean>): Promise<number> {
  const start = performance.now();
  for (let i = 0; i < Math.ceil(ms / 100) + 1; i++) {
    if (await check()) return performance.now() - start;
    await Bun.sleep(100);
  }
  throw new Error(`not within ${ms} ms`);
}

let rig: Rig;
let upstream: ReturnType<typeof Bun.serve>;
const agents: TestAgent[] = [];
let other: { userId: number; token: string };
const DENY_ALL = "on_http_request:\n  - name: closed\n    actions: [{ type: deny, config: { status_code: 451 } }]\n";

beforeAll(async () => {
  rig = await withServer({ user: { skip_warning: true } });
  upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: echo });
  const userId = await rig.api.createUser("other-user", { skip_warning: true });
  other = { userId, token: await rig.api.createToken(userId) };
}, 30_000);
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await rig?.close();
  upstream?.stop(true);
});

const tunnelUrl = (sub: string, path = "/") => `http://${sub}.localhost:${rig.server.edgePort}${path}`;
async function tunnel(sub: string, args: string[] = [], token = rig.token): Promise<TestAgent> {
  const a = await startAgent({ kind: "http", target: upstream.port!, server: rig.server.edgeUrl, token, args: ["--subdomain", sub, ...args] });
  agents.push(a);
  return a;
}

describe("/api/policies", () => {
  test("made, listed, read, changed and deleted, in the API's shapes", async () => {
    const made = await rig.api.post("/api/policies", { name: "crud", scope: "hostname", hostname: "Nothing.Example.com", policy: DENY_ALL });
    expect(made.status).toBe(201);
    expect(made.body).toEqual({
      id: expect.any(Number),
      name: "crud",
      scope: "hostname",
      user_id: null,
      username: null,
      hostname: "nothing.example.com",
      policy: DENY_ALL,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });
    const id = made.body.id;
    expect((await rig.api.get("/api/policies")).body.map((p: { id: number }) => p.id)).toContain(id);
    expect((await rig.api.get(`/api/policies/${id}`)).body.name).toBe("crud");
    const changed = await rig.api.put(`/api/policies/${id}`, { scope: "user", user_id: other.userId, policy: { on_http_request: [{ actions: [{ type: "deny" }] }] } });
    expect(changed.status).toBe(200);
    expect(changed.body).toMatchObject({ scope: "user", user_id: other.userId, username: "other-user", hostname: null });
    expect(JSON.parse(changed.body.policy)).toEqual({ on_http_request: [{ actions: [{ type: "deny" }] }] });
    expect(changed.body.updated_at > made.body.updated_at).toBe(true);
    expect(await rig.api.delete(`/api/policies/${id}`)).toMatchObject({ status: 200, body: { status: "deleted" } });
    expect((await rig.api.get(`/api/policies/${id}`)).status).toBe(404);
    const audit = await rig.api.get("/api/audit?action=policy.create");
    expect(JSON.stringify(audit.body)).toContain(`policy:${id}`);
  });

  test("refused: a document that does not load (its line and code), a name taken, a scope without what it names, no such user", async () => {
    const bad = await rig.api.post("/api/policies", { name: "bad", policy: "on_http_request:\n  - expressions: [\"req.nope\"]\n    actions: [{ type: deny }]\n" });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toContain("policy:2:");
    expect(bad.body.error).toContain("[CEL_TYPE]");
    const ok = await rig.api.post("/api/policies", { name: "taken", scope: "hostname", hostname: "a.example.com", policy: "{}" });
    expect(ok.status).toBe(201);
    expect((await rig.api.post("/api/policies", { name: "taken", scope: "hostname", hostname: "b.example.com", policy: "{}" })).status).toBe(409);
    expect((await rig.api.post("/api/policies", { name: "u", scope: "user", policy: "{}" })).body.error).toContain("user_id: missing");
    expect((await rig.api.post("/api/policies", { name: "s", user_id: 1, policy: "{}" })).status).toBe(400);
    expect((await rig.api.post("/api/policies", { name: "n", scope: "user", user_id: 999_999, policy: "{}" })).status).toBe(404);
    expect((await rig.api.post("/api/policies", { name: "h", scope: "hostname", hostname: "not a host", policy: "{}" })).status).toBe(400);
    expect((await rig.api.put(`/api/policies/${ok.body.id}`, { policy: "on_http_request: [{actions: [{type: nope}]}]" })).body.error).toContain("[ACTION_UNKNOWN]");
    expect((await rig.api.get("/api/policies/424242")).status).toBe(404);
    await rig.api.delete(`/api/policies/${ok.body.id}`);
  });
});

describe("on live tunnels", () => {
  test("a server-wide policy reaches a live tunnel within 5 s, without a reconnect; changed and deleted too", async () => {
    const agent = await tunnel("live-one");
    expect((await curl(tunnelUrl("live-one"))).status).toBe(200);
    const made = await rig.api.post("/api/policies", { name: "everyone", policy: DENY_ALL });
    await within(5_000, async () => (await curl(tunnelUrl("live-one"))).status === 451);
    await rig.api.put(`/api/policies/${made.body.id}`, { policy: "on_http_response:\n  - actions: [{ type: add-headers, config: { headers: { x-operator: yes } } }]\n" });
    await within(5_000, async () => (await curl(tunnelUrl("live-one"))).headers["x-operator"] === "yes");
    await rig.api.delete(`/api/policies/${made.body.id}`);
    await within(5_000, async () => (await curl(tunnelUrl("live-one"))).headers["x-operator"] === undefined);
    expect(agent.output.text().match(/Forwarding/g)?.length).toBe(1); // never reconnected
  }, 30_000);

  test("by scope: a user's policy covers that user's tunnels only; a hostname's, the tunnels reached by it or under its wildcard", async () => {
    await tunnel("mine-a");
    await tunnel("theirs-a", [], other.token);
    const user = await rig.api.post("/api/policies", { name: "other's", scope: "user", user_id: other.userId, policy: DENY_ALL });
    await within(5_000, async () => (await curl(tunnelUrl("theirs-a"))).status === 451);
    expect((await curl(tunnelUrl("mine-a"))).status).toBe(200);
    await rig.api.delete(`/api/policies/${user.body.id}`);
    await within(5_000, async () => (await curl(tunnelUrl("theirs-a"))).status === 200);
    const host = await rig.api.post("/api/policies", { name: "one name", scope: "hostname", hostname: "mine-a.localhost", policy: DENY_ALL });
    await within(5_000, async () => (await curl(tunnelUrl("mine-a"))).status === 451);
    expect((await curl(tunnelUrl("theirs-a"))).status).toBe(200);
    expect((await rig.api.put(`/api/policies/${host.body.id}`, { hostname: "*.localhost" })).status).toBe(200);
    await within(5_000, async () => (await curl(tunnelUrl("theirs-a"))).status === 451);
    await rig.api.delete(`/api/policies/${host.body.id}`);
    await within(5_000, async () => (await curl(tunnelUrl("mine-a"))).status === 200 && (await curl(tunnelUrl("theirs-a"))).status === 200);
  }, 30_000);

  test("a tunnel that opens after the policy was made runs it from its first request", async () => {
    const made = await rig.api.post("/api/policies", { name: "before", scope: "hostname", hostname: "later.localhost", policy: DENY_ALL });
    await tunnel("later");
    expect((await curl(tunnelUrl("later"))).status).toBe(451);
    await rig.api.delete(`/api/policies/${made.body.id}`);
  }, 30_000);
});
