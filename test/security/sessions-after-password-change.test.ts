/**
 * Sessions left alive by a password change: a new password (an admin's
 * PUT /api/users/:id, or the user's own on the portal) ends every session of
 * that user, admin API and portal, on every node, except the one that made
 * the change; a new role ends the user's admin sessions (a demoted admin's
 * cookie does not come back to life on a promotion). Device tokens are no
 * sessions: agents stay connected and connect again.
 *
 * Against the real server; the last group on two nodes sharing PostgreSQL.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { PortalClient, portalAs } from "../harness/portal.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

/** An admin API client signed in as `username` (password "password-123"). */
async function adminAs(server: TestServer, username: string, password = "password-123"): Promise<AdminClient> {
  const client = new AdminClient(server.adminUrl);
  const res = await client.login(username, password);
  if (res.status !== 200) throw new Error(`admin login as ${username}: ${res.status} ${JSON.stringify(res.body)}`);
  return client;
}

/** A copy of a client holding the same session cookie. */
function sameSession<C extends AdminClient>(client: C, make: () => C): C {
  const copy = make();
  copy.cookie = client.cookie;
  return copy;
}

describe("sessions left alive by a password change: one node", () => {
  let server: TestServer;
  let admin: AdminClient;

  beforeAll(async () => {
    server = await startServer();
    admin = await signedIn(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("sessions left alive by a password change: an admin's new password for a user ends all of that user's portal sessions; their device token still connects", async () => {
    const aliceId = await admin.createUser("alice");
    const token = await admin.createToken(aliceId);
    const laptop = await portalAs(server.edgePort, "alice");
    const phone = await portalAs(server.edgePort, "alice");
    expect((await laptop.get("/_burrow/api/me")).status).toBe(200);

    expect((await admin.put(`/api/users/${aliceId}`, { password: "a-new-password-1" })).status).toBe(200);

    for (const portal of [laptop, phone]) {
      expect((await portal.get("/_burrow/api/me")).status).toBe(401);
      expect((await portal.post("/_burrow/api/me/tokens", { device_name: "minted-with-an-old-cookie" })).status).toBe(401);
    }
    expect((await admin.get(`/api/users/${aliceId}/tokens`)).body.map((t: { device_name: string }) => t.device_name)).toEqual(["laptop"]);
    // the new password signs in; the old does not; the device token was never a session
    expect((await new PortalClient(server.edgePort).login("alice", "password-123")).status).toBe(401);
    expect((await new PortalClient(server.edgePort).login("alice", "a-new-password-1")).status).toBe(200);
    expect((await sayHello({ port: server.agentPort!, via: "direct", token })).type).toBe("READY");
  });

  test("sessions left alive by a password change: a user who is also an admin changes it on the portal: that browser stays signed in, their other portal and admin sessions end", async () => {
    await admin.createUser("bob", { role: "admin" });
    const adminSession = await adminAs(server, "bob");
    const here = await portalAs(server.edgePort, "bob");
    const there = await portalAs(server.edgePort, "bob");
    expect((await adminSession.get("/api/auth/me")).status).toBe(200);

    const changed = await here.put("/_burrow/api/me/password", { current_password: "password-123", new_password: "bobs-new-password" });
    expect(changed.status).toBe(200);

    expect((await here.get("/_burrow/api/me")).status).toBe(200);
    expect((await there.get("/_burrow/api/me")).status).toBe(401);
    expect((await adminSession.get("/api/auth/me")).status).toBe(401);
    expect((await adminSession.get("/api/users")).status).toBe(401);
  });

  test("sessions left alive by a password change: an admin who changes their own password keeps the session that did it; their other sessions end; with an API key, every session ends", async () => {
    const daveId = await admin.createUser("dave", { role: "admin" });
    const desk = await adminAs(server, "dave");
    const laptop = await adminAs(server, "dave");
    const portal = await portalAs(server.edgePort, "dave");

    expect((await desk.put(`/api/users/${daveId}`, { password: "daves-new-password" })).status).toBe(200);
    expect((await desk.get("/api/auth/me")).status).toBe(200);
    expect((await laptop.get("/api/auth/me")).status).toBe(401);
    expect((await portal.get("/_burrow/api/me")).status).toBe(401);

    // a key is no session: nothing is kept for it
    const key = (await desk.post("/api/keys", { name: "script" })).body.key as string;
    const byKey = await fetch(`${server.adminUrl}/api/users/${daveId}`, {
      method: "PUT",
      headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
      body: JSON.stringify({ password: "daves-third-password" }),
    });
    expect(byKey.status).toBe(200);
    expect((await desk.get("/api/auth/me")).status).toBe(401);
  });

  test("sessions left alive by a password change: a new role ends the user's admin sessions, and a promotion does not bring an old cookie back; the portal session stays", async () => {
    const erinId = await admin.createUser("erin", { role: "admin" });
    const erinAdmin = await adminAs(server, "erin");
    const erinPortal = await portalAs(server.edgePort, "erin");

    expect((await admin.put(`/api/users/${erinId}`, { role: "user" })).status).toBe(200);
    expect((await erinAdmin.get("/api/auth/me")).status).toBe(401);
    expect((await admin.put(`/api/users/${erinId}`, { role: "admin" })).status).toBe(200);
    expect((await erinAdmin.get("/api/auth/me")).status).toBe(401);
    expect((await erinAdmin.get("/api/users")).status).toBe(401);
    expect((await erinPortal.get("/_burrow/api/me")).status).toBe(200);
    // other admins' sessions are untouched
    expect((await admin.get("/api/auth/me")).status).toBe(200);
  });
});

describe("sessions left alive by a password change: two nodes", () => {
  let pg: TestPostgres;
  const nodes: TestServer[] = [];

  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.newDatabase();
    for (const id of ["s1", "s2"]) {
      nodes.push(await startServer({ args: ["--database", url, "--node-id", id, "--node-url", "http://127.0.0.1:1", "--cluster-secret", "sessions-cluster-secret-0123456789"] }));
    }
  }, 60_000);
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    await pg?.stop();
  });

  test("sessions left alive by a password change: a password changed through one node ends the user's sessions on the other at once", async () => {
    const [one, two] = nodes as [TestServer, TestServer];
    const adminOnTwo = await signedIn(two);
    const frankId = await adminOnTwo.createUser("frank", { role: "admin" });
    const portalOnOne = await portalAs(one.edgePort, "frank");
    const adminOnOne = await adminAs(one, "frank");
    const sameOnTwo = sameSession(portalOnOne, () => new PortalClient(two.edgePort));
    expect((await sameOnTwo.get("/_burrow/api/me")).status).toBe(200);

    expect((await adminOnTwo.put(`/api/users/${frankId}`, { password: "franks-new-password" })).status).toBe(200);

    expect((await portalOnOne.get("/_burrow/api/me")).status).toBe(401);
    expect((await sameOnTwo.get("/_burrow/api/me")).status).toBe(401);
    expect((await adminOnOne.get("/api/auth/me")).status).toBe(401);
  }, 30_000);
});
