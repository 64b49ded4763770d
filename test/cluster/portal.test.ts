/**
 * The portal on several nodes (two on one PostgreSQL database): a session
 * made on one node is good on the other; a device login asked for on one
 * node, approved on the other and polled on the first gets its token; an
 * invitation made through one node's admin API is used on the other's
 * portal, once; a device revoked on one node's portal closes its tunnel on
 * the other; the user's tunnels are listed whichever node holds them.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { PortalClient, portalAs } from "../harness/portal.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

let pg: TestPostgres;
let nodes: TestServer[] = [];
let admin: AdminClient;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("portal cluster") });

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  nodes = [];
  for (const id of ["p1", "p2"]) {
    nodes.push(await startServer({ args: ["--database", url, "--node-id", id, "--node-url", "http://127.0.0.1:1", "--cluster-secret", "portal-cluster-secret-0123456789"] }));
  }
  admin = await signedIn(nodes[0]!);
  await admin.createUser("alice");
}, 60_000);

afterAll(async () => {
  await Promise.all(nodes.map((n) => n.stop()));
  upstream.stop(true);
  await pg?.stop();
});

test("a session made on one node is good on the other", async () => {
  const one = await portalAs(nodes[0]!.edgePort, "alice");
  const other = new PortalClient(nodes[1]!.edgePort);
  other.cookie = one.cookie;
  expect((await other.get("/_burrow/api/me")).body.user.username).toBe("alice");
});

test("a device login asked for on one node, approved on the other, polled on the first", async () => {
  const device = new PortalClient(nodes[0]!.edgePort);
  const codes = (await device.post("/_burrow/device/code", { device_name: "roaming" })).body;
  const alice = await portalAs(nodes[1]!.edgePort, "alice");
  expect((await alice.post("/_burrow/api/device/approve", { user_code: codes.user_code })).status).toBe(200);
  const got = await device.post("/_burrow/device/token", { device_code: codes.device_code });
  expect(got.status).toBe(200);
  expect(got.body).toMatchObject({ username: "alice" });
});

test("an invitation made through one node is used on the other's portal, once", async () => {
  const made = (await admin.post("/api/invitations", { max_devices: 4 })).body;
  const secret = made.url.slice(made.url.indexOf("#") + 1);
  const [a, b] = await Promise.all([
    new PortalClient(nodes[1]!.edgePort).post("/_burrow/api/invitation/accept", { invitation: secret, username: "from-p2", password: "a-good-password" }),
    new PortalClient(nodes[0]!.edgePort).post("/_burrow/api/invitation/accept", { invitation: secret, username: "from-p1", password: "a-good-password" }),
  ]);
  expect([a.status, b.status].sort()).toEqual([201, 410]);
  const names = (await admin.get("/api/users")).body.map((u: any) => u.username);
  expect(names.filter((n: string) => n.startsWith("from-p"))).toHaveLength(1);
});

test("a device revoked on one node's portal closes its tunnel held by the other; its tunnels are listed on either", async () => {
  const alice0 = await portalAs(nodes[0]!.edgePort, "alice");
  const made = (await alice0.post("/_burrow/api/me/tokens", { device_name: "on-p2" })).body;
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[1]!.edgeUrl, token: made.token, args: ["--subdomain", "alice-cluster"] });
  await waitUntil(async () => (await alice0.get("/_burrow/api/me/tunnels")).body.length === 1, 10_000, "the tunnel listed on the other node");
  expect((await alice0.get("/_burrow/api/me/tunnels")).body[0]).toMatchObject({ subdomain: "alice-cluster", device_name: "on-p2" });
  expect((await alice0.delete(`/_burrow/api/me/tokens/${made.token_id}`)).status).toBe(200);
  await waitUntil(() => agent.output.text().includes("TOKEN_DISABLED"), 10_000, "the agent on the other node told its token was revoked");
}, 60_000);
