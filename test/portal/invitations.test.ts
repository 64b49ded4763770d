/**
 * Invitations, against the real server: made by the admin API with the new
 * user's settings (the link shown once), opened on the portal (what it
 * offers), used once to make the user and sign them in; withdrawn, wrong,
 * taken usernames, throttled wrong links, the portal off, bad input, audit.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { PortalClient } from "../harness/portal.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let admin: AdminClient;

beforeAll(async () => {
  server = await startServer();
  admin = await signedIn(server);
});

afterAll(async () => {
  await server?.stop();
});

const secretOf = (url: string) => url.slice(url.indexOf("#") + 1);

describe("an invitation", () => {
  test("made with settings: the link once (on the portal's address, the secret after #), listed without it", async () => {
    const res = await admin.post("/api/invitations", { max_tunnels: 3, max_devices: 2, traffic_limit: 5 * 1024 ** 3, traffic_period: "daily", allowed_protocols: "http", note: "for Alice", expires_in_hours: 48 });
    expect(res.status).toBe(201);
    expect(res.headers.get("location")).toBe(`/api/invitations/${res.body.id}`);
    expect(res.body.url).toMatch(new RegExp(`^http://localhost:${server.edgePort}/invite#bri_[A-Za-z0-9]{43}$`));
    expect(res.body).toMatchObject({ status: "pending", role: "user", max_tunnels: 3, max_devices: 2, traffic_period: "daily", allowed_protocols: "http", skip_warning: false, can_use_proxy: true, note: "for Alice", used_at: null });
    const hours = (Date.parse(res.body.expires_at) - Date.parse(res.body.created_at)) / 3600_000;
    expect(hours).toBe(48);
    const list = await admin.get("/api/invitations");
    expect(list.status).toBe(200);
    expect(list.body[0].id).toBe(res.body.id);
    expect(JSON.stringify(list.body)).not.toContain(secretOf(res.body.url));
    expect(list.body[0].url).toBeUndefined();
  });

  test("opened: it says what it offers; used: the user is made with its settings and signed in; used again: 410", async () => {
    const made = (await admin.post("/api/invitations", { max_tunnels: 4, max_devices: 1, can_use_proxy: false, note: "welcome" })).body;
    const invitee = new PortalClient(server.edgePort);
    const offer = await invitee.post("/_burrow/api/invitation", { invitation: secretOf(made.url) });
    expect(offer.status).toBe(200);
    expect(offer.body).toEqual({ note: "welcome", max_tunnels: 4, allowed_protocols: "http,tcp", traffic_limit: 0, traffic_period: "monthly", max_devices: 1, expires_at: made.expires_at });
    const joined = await invitee.post("/_burrow/api/invitation/accept", { invitation: secretOf(made.url), username: "newbie", password: "a-good-password" });
    expect(joined.status).toBe(201);
    expect(joined.body.user.username).toBe("newbie");
    invitee.cookie = joined.headers.get("set-cookie")!.split(";")[0];
    const me = await invitee.get("/_burrow/api/me");
    expect(me.status).toBe(200);
    expect(me.body.user).toMatchObject({ username: "newbie", role: "user", max_tunnels: 4, max_devices: 1, can_use_proxy: false });
    const user = (await admin.get(`/api/users/${joined.body.user.id}`)).body.user;
    expect(user).toMatchObject({ username: "newbie", max_tunnels: 4, max_devices: 1, can_use_proxy: false, enabled: true });
    // the password chosen signs in
    expect((await new PortalClient(server.edgePort).login("newbie", "a-good-password")).status).toBe(200);
    const after = (await admin.get(`/api/invitations/${made.id}`)).body;
    expect(after).toMatchObject({ status: "used", used_by: joined.body.user.id, used_username: "newbie" });
    const again = await new PortalClient(server.edgePort).post("/_burrow/api/invitation/accept", { invitation: secretOf(made.url), username: "second", password: "a-good-password" });
    expect(again.status).toBe(410);
    expect(again.body.error).toContain("not valid");
    expect((await new PortalClient(server.edgePort).post("/_burrow/api/invitation", { invitation: secretOf(made.url) })).status).toBe(410);
    const audit = (await admin.get("/api/audit?limit=20")).body;
    expect(audit.find((e: any) => e.action === "invitation.create" && e.target === `invitation:${made.id}`)).toMatchObject({ username: "admin", outcome: "ok" });
    expect(audit.find((e: any) => e.action === "invitation.accept" && e.target === `invitation:${made.id}`)).toMatchObject({ username: "newbie", outcome: "ok" });
  });

  test("a username that is taken leaves the invitation unused, to be used with another", async () => {
    await admin.createUser("taken-name");
    const made = (await admin.post("/api/invitations", {})).body;
    const invitee = new PortalClient(server.edgePort);
    const clash = await invitee.post("/_burrow/api/invitation/accept", { invitation: secretOf(made.url), username: "Taken-Name", password: "a-good-password" });
    expect(clash.status).toBe(409);
    expect(clash.body.error).toContain("already taken");
    expect((await admin.get(`/api/invitations/${made.id}`)).body.status).toBe("pending");
    expect((await invitee.post("/_burrow/api/invitation/accept", { invitation: secretOf(made.url), username: "free-name", password: "a-good-password" })).status).toBe(201);
  });

  test("two people opening one link at once: one user is made", async () => {
    const made = (await admin.post("/api/invitations", {})).body;
    const tries = await Promise.all(
      ["racer-a", "racer-b", "racer-c"].map((name) => new PortalClient(server.edgePort).post("/_burrow/api/invitation/accept", { invitation: secretOf(made.url), username: name, password: "a-good-password" })),
    );
    expect(tries.map((t) => t.status).sort()).toEqual([201, 410, 410]);
    const names = (await admin.get("/api/users")).body.map((u: any) => u.username).filter((n: string) => n.startsWith("racer-"));
    expect(names).toHaveLength(1);
  });

  test("withdrawn: its link stops working; a used one's record can go while its user stays", async () => {
    const made = (await admin.post("/api/invitations", {})).body;
    expect((await admin.delete(`/api/invitations/${made.id}`)).body).toEqual({ status: "deleted" });
    expect((await new PortalClient(server.edgePort).post("/_burrow/api/invitation", { invitation: secretOf(made.url) })).status).toBe(410);
    expect((await admin.delete(`/api/invitations/${made.id}`)).status).toBe(404);
    expect((await admin.get(`/api/invitations/${made.id}`)).status).toBe(404);
  });

  test("wrong links are 410, and after 10 from one address even a good one waits (429)", async () => {
    await using fresh = await startServer();
    const freshAdmin = await signedIn(fresh);
    const good = (await freshAdmin.post("/api/invitations", {})).body;
    const stranger = new PortalClient(fresh.edgePort);
    for (const wrong of ["bri_" + "x".repeat(43), "bri_nope", "not-even-a-link", "bri_" + "A".repeat(43), "", "bri_1", "bri_2", "bri_3", "bri_4", "bri_5"]) {
      const res = await stranger.post("/_burrow/api/invitation", { invitation: wrong });
      expect(res.status).toBe(410);
    }
    const locked = await stranger.post("/_burrow/api/invitation", { invitation: secretOf(good.url) });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});

describe("bad input", () => {
  test("the admin API's body is checked field by field", async () => {
    const cases: [unknown, string][] = [
      [{ expires_in_hours: 0 }, "expires_in_hours"],
      [{ expires_in_hours: 721 }, "expires_in_hours"],
      [{ expires_in_hours: "24" }, "expires_in_hours"],
      [{ role: "root" }, "role"],
      [{ max_tunnels: -1 }, "max_tunnels"],
      [{ allowed_protocols: "ftp" }, "allowed_protocols"],
      [{ note: "x".repeat(201) }, "note"],
      ["[]", "JSON object"],
      ["{", "not valid JSON"],
    ];
    for (const [body, mentions] of cases) {
      const res = await admin.post("/api/invitations", body);
      if (res.status !== 400) throw new Error(`${JSON.stringify(body)}: ${res.status} ${JSON.stringify(res.body)}`);
      expect(res.body.error).toContain(mentions);
    }
    expect((await admin.delete("/api/invitations/abc")).status).toBe(400);
    expect((await admin.call("PUT", "/api/invitations/1", {})).status).toBe(405);
  });

  test("the portal's bodies are checked too: no 500, nothing made", async () => {
    const made = (await admin.post("/api/invitations", {})).body;
    const invitee = new PortalClient(server.edgePort);
    const cases: [unknown, number][] = [
      [{ invitation: secretOf(made.url), username: "has space", password: "a-good-password" }, 400],
      [{ invitation: secretOf(made.url), username: "ok-name", password: "short" }, 400],
      [{ invitation: secretOf(made.url), username: "ok-name" }, 400],
      [{ invitation: 42, username: "ok-name", password: "a-good-password" }, 400],
      [{ invitation: "x".repeat(300), username: "ok-name", password: "a-good-password" }, 400],
      ["not json", 400],
    ];
    for (const [body, status] of cases) {
      const res = await invitee.post("/_burrow/api/invitation/accept", body);
      if (res.status !== status) throw new Error(`${JSON.stringify(body)}: ${res.status} ${JSON.stringify(res.body)}`);
    }
    expect((await admin.get(`/api/invitations/${made.id}`)).body.status).toBe("pending");
  });

  test("with the portal off, no invitation is made (it could not be opened)", async () => {
    await using off = await startServer({ args: ["--portal", "off"] });
    const offAdmin = await signedIn(off);
    const res = await offAdmin.post("/api/invitations", {});
    expect(res.status).toBe(409);
    expect(res.body.error).toContain("--portal off");
  });
});
