/**
 * Who may reach a user's tunnels, set by the admin: require_auth and
 * allow_cidrs through the admin API and the panel (headless Chromium), and
 * what the edge does with them, at the handshake and on tunnels already
 * live. The server listens on both families, so 127.0.0.1, 127.0.0.2 and
 * ::1 are three visitors.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { spawnAgent, startAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, signIn, type TestBrowser } from "../panel/browser.ts";

let server: TestServer;
let api: AdminClient;
const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("service") });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(`echo:${d}`) } });

beforeAll(async () => {
  server = await startServer({ args: ["--host", "::"] });
  api = await signedIn(server);
});
afterAll(async () => {
  await server?.stop();
  service.stop(true);
  echo.stop(true);
});

/** Status of one GET to a tunnel from `from` (a 127.0.0.x address, or "::1"). */
async function statusFrom(sub: string, from: string, auth?: string): Promise<number> {
  const url = from === "::1" ? `http://[::1]:${server.edgePort}/` : `http://127.0.0.1:${server.edgePort}/`;
  const proc = Bun.spawn(
    ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "5", "-H", `Host: ${sub}.localhost:${server.edgePort}`, "-H", "Accept: application/json", ...(from === "::1" ? [] : ["--interface", from]), ...(auth ? ["-u", auth] : []), "-g", url],
    { stdout: "pipe" },
  );
  return Number(await new Response(proc.stdout).text());
}

/** Whether a TCP visitor from `from` gets its bytes echoed (false: closed at accept). */
function tcpEchoes(port: number, from: string): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: "127.0.0.1", port, localAddress: from }, () => sock.write("hi"));
    const timer = setTimeout(() => (sock.destroy(), resolve(false)), 5_000);
    sock.on("data", () => (clearTimeout(timer), sock.destroy(), resolve(true)));
    sock.on("error", () => undefined);
    sock.on("close", () => (clearTimeout(timer), resolve(false)));
  });
}

describe("the fields in the admin API", () => {
  test("created with the documented defaults, set and cleared; a bad CIDR is a 400 naming the field", async () => {
    const id = await api.createUser("fields-user");
    expect((await api.get(`/api/users/${id}`)).body.user).toMatchObject({ require_auth: false, allow_cidrs: [] });
    const set = await api.put(`/api/users/${id}`, { require_auth: true, allow_cidrs: [" 10.0.0.0/8", "2001:db8::/32", "10.0.0.0/8", "127.0.0.1"] });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ require_auth: true, allow_cidrs: ["10.0.0.0/8", "2001:db8::/32", "127.0.0.1"] });
    const bad = await api.put(`/api/users/${id}`, { allow_cidrs: ["10.0.0.0/8", "10.0.0.0/40"] });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toStartWith("allow_cidrs.1 must be an IPv4 or IPv6 address or CIDR");
    expect((await api.put(`/api/users/${id}`, { allow_cidrs: "10.0.0.0/8" })).status).toBe(400);
    expect((await api.put(`/api/users/${id}`, { require_auth: "yes" })).status).toBe(400);
    const cleared = await api.put(`/api/users/${id}`, { allow_cidrs: [] });
    expect(cleared.body).toMatchObject({ require_auth: true, allow_cidrs: [] });
    const created = await api.post("/api/users", { username: "fields-two", password: "password-123", require_auth: true, allow_cidrs: ["::1"] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ require_auth: true, allow_cidrs: ["::1"] });
  });
});

describe("require_auth", () => {
  test("a tunnel without basic auth or OIDC is refused AUTH_REQUIRED; with basic auth it opens; a tcp tunnel cannot", async () => {
    const id = await api.createUser("must-sign-in", { require_auth: true });
    const token = await api.createToken(id);
    const bare = spawnAgent({ kind: "http", target: `127.0.0.1:${service.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    await bare.output.waitFor(/AUTH_REQUIRED.*basic auth or OIDC/, 15_000);
    expect(await bare.proc.exited).toBe(1);
    const tcp = spawnAgent({ kind: "tcp", target: `127.0.0.1:${echo.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    await tcp.output.waitFor(/AUTH_REQUIRED.*which a tcp tunnel cannot carry/, 15_000);
    expect(await tcp.proc.exited).toBe(1);

    await using locked = await startAgent({ kind: "http", target: `127.0.0.1:${service.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect", "--basic-auth", "u:p"] });
    expect(await statusFrom(locked.subdomain!, "127.0.0.1")).toBe(401);
    expect(await statusFrom(locked.subdomain!, "127.0.0.1", "u:p")).toBe(200);
  });

  test("set while a bare tunnel is live: its session is closed with AUTH_REQUIRED; a protected one stays", async () => {
    const id = await api.createUser("late-rule");
    const token = await api.createToken(id);
    await using bare = await startAgent({ kind: "http", target: `127.0.0.1:${service.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    await using locked = await startAgent({ kind: "http", target: `127.0.0.1:${service.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect", "--basic-auth", "u:p"] });
    expect(await statusFrom(bare.subdomain!, "127.0.0.1")).toBe(200);
    expect((await api.put(`/api/users/${id}`, { require_auth: true })).status).toBe(200);
    await bare.output.waitFor(/AUTH_REQUIRED/, 10_000);
    expect(await bare.proc.exited).toBe(1);
    expect(await statusFrom(bare.subdomain!, "127.0.0.1")).toBe(404);
    expect(await statusFrom(locked.subdomain!, "127.0.0.1", "u:p")).toBe(200);
  });
});

describe("allow_cidrs", () => {
  test("applies to every tunnel of the user, besides the agent's own rules, live and at the next handshake, http and tcp", async () => {
    const id = await api.createUser("office-only");
    const token = await api.createToken(id);
    await using web = await startAgent({ kind: "http", target: `127.0.0.1:${service.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    await using own = await startAgent({
      kind: "http",
      target: `127.0.0.1:${service.port}`,
      server: server.edgeUrl,
      token,
      args: ["--log", "text", "--no-inspect", "--allow-cidr", "127.0.0.2", "--allow-cidr", "127.0.0.1"],
    });
    await using db = await startAgent({ kind: "tcp", target: `127.0.0.1:${echo.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    for (const from of ["127.0.0.1", "127.0.0.2", "::1"]) expect(await statusFrom(web.subdomain!, from)).toBe(200);

    // the admin narrows it: the live tunnels follow at once
    expect((await api.put(`/api/users/${id}`, { allow_cidrs: ["127.0.0.2/32", "::1"] })).status).toBe(200);
    expect(await statusFrom(web.subdomain!, "127.0.0.1")).toBe(403);
    expect(await statusFrom(web.subdomain!, "127.0.0.2")).toBe(200);
    expect(await statusFrom(web.subdomain!, "::1")).toBe(200);
    // in addition to the agent's own list: only 127.0.0.2 is in both
    expect(await statusFrom(own.subdomain!, "127.0.0.1")).toBe(403);
    expect(await statusFrom(own.subdomain!, "127.0.0.2")).toBe(200);
    expect(await statusFrom(own.subdomain!, "::1")).toBe(403);
    expect(await tcpEchoes(db.port!, "127.0.0.1")).toBe(false);
    expect(await tcpEchoes(db.port!, "127.0.0.2")).toBe(true);

    // a tunnel opened now gets it at its handshake
    await using later = await startAgent({ kind: "http", target: `127.0.0.1:${service.port}`, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    expect(await statusFrom(later.subdomain!, "127.0.0.1")).toBe(403);
    expect(await statusFrom(later.subdomain!, "127.0.0.2")).toBe(200);

    // cleared: anywhere again
    expect((await api.put(`/api/users/${id}`, { allow_cidrs: [] })).status).toBe(200);
    expect(await statusFrom(web.subdomain!, "127.0.0.1")).toBe(200);
    expect(await tcpEchoes(db.port!, "127.0.0.1")).toBe(true);
  });
});

describe("the panel", () => {
  let browser: TestBrowser;
  afterAll(async () => browser?.[Symbol.asyncDispose]());

  test("shows and sets require_auth and allow_cidrs on the user's page, and refuses a bad CIDR beside its field", async () => {
    const id = await api.createUser("panel-access");
    browser = await openBrowser();
    const { page } = browser;
    await signIn(page, server.adminUrl);
    await page.goto(`${server.adminUrl}/users/${id}`);
    const form = page.locator("#settings-title").locator("xpath=ancestor::section");
    await form.getByLabel("Allowed visitor addresses").fill("10.0.0.0/8\n10.0.0.0/40");
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByText("Allowed addresses: 10.0.0.0/40 must be an IPv4 or IPv6 address or CIDR").waitFor();
    expect((await api.get(`/api/users/${id}`)).body.user.allow_cidrs).toEqual([]);

    await form.getByLabel("Allowed visitor addresses").fill("10.0.0.0/8\n2001:db8::/32, 127.0.0.1");
    await form.getByLabel("Require sign-in on every tunnel").check();
    await form.getByRole("button", { name: "Save changes" }).click();
    await page.getByText("Saved panel-access's settings.").waitFor();
    expect((await api.get(`/api/users/${id}`)).body.user).toMatchObject({ require_auth: true, allow_cidrs: ["10.0.0.0/8", "2001:db8::/32", "127.0.0.1"] });
    const limits = page.locator("#limits-title").locator("xpath=ancestor::section");
    await limits.getByText("10.0.0.0/8, 2001:db8::/32, 127.0.0.1").waitFor();
    await limits.getByText("required", { exact: true }).waitFor();

    // the form reads back what is stored; saving nothing new sends nothing
    await page.reload();
    expect(await form.getByLabel("Allowed visitor addresses").inputValue()).toBe("10.0.0.0/8\n2001:db8::/32\n127.0.0.1");
    expect(await form.getByLabel("Require sign-in on every tunnel").isChecked()).toBe(true);
    await form.getByRole("button", { name: "Save changes" }).click();
    await form.getByText("Nothing changed").waitFor();
  }, 30_000);
});
