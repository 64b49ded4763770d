/**
 * `burrow login` through the browser (RFC 8628), with the compiled
 * executable as the agent and the real server: the code printed, looked up and approved on
 * the portal, the token saved and a tunnel opened with it; denied, expired,
 * wrong codes throttled, the device limit, polls too fast, a code used
 * twice, and a server without the portal.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { LineReader } from "../harness/lines.ts";
import { PortalClient, portalAs } from "../harness/portal.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let admin: AdminClient;
let aliceId: number;
/** The compiled executable, as users run it: `burrow login` and `burrow http` are its. */
let burrow: string;
const homes: string[] = [];

beforeAll(async () => {
  burrow = await compiledBurrow();
  server = await startServer({ args: ["--device-code-ttl", "12"] });
  admin = await signedIn(server);
  aliceId = await admin.createUser("alice");
});

afterAll(async () => {
  await server?.stop();
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

/** `burrow login` as a person runs it, with a config dir of its own; stopped by the test's end. */
function login(args: string[], env: Record<string, string> = {}) {
  const home = mkdtempSync(join(tmpdir(), "burrow-login-home-"));
  homes.push(home);
  const proc = Bun.spawn([burrow, "login", ...args], {
    env: { ...process.env, XDG_CONFIG_HOME: home, DISPLAY: "", WAYLAND_DISPLAY: "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = new LineReader(proc);
  const exited = async () => {
    const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
    const code = await proc.exited;
    clearTimeout(timer);
    await output.closed();
    return code;
  };
  return { proc, output, home, exited, [Symbol.dispose]: () => proc.kill("SIGKILL") };
}

/** The user code the command printed (once it has printed all it shows: the address with the code comes last). */
async function printedCode(output: LineReader): Promise<string> {
  const line = await output.waitFor(/enter the code\s+([A-Z]{4}-[A-Z]{4})/, 15_000);
  await output.waitFor(/\(or open /, 15_000);
  return /([A-Z]{4}-[A-Z]{4})/.exec(line)![1]!;
}

const portalUrl = () => `http://localhost:${server.edgePort}`;

describe("burrow login through the browser", () => {
  test("approve: the command saves the token and says who it is; a tunnel then opens with no flags", async () => {
    using cli = login(["--server", portalUrl(), "--device-name", "ci-box", "--no-browser"]);
    const code = await printedCode(cli.output);
    expect(cli.output.text()).toContain(`${portalUrl()}/device`);
    expect(cli.output.text()).toContain(`${portalUrl()}/device?code=${code}`);
    const portal = await portalAs(server.edgePort, "alice");
    const seen = await portal.get(`/_burrow/api/device?user_code=${code.toLowerCase().replace("-", "")}`);
    expect(seen.status).toBe(200);
    expect(seen.body).toMatchObject({ user_code: code, device_name: "ci-box", address: "127.0.0.1" });
    const approved = await portal.post("/_burrow/api/device/approve", { user_code: code });
    expect(approved.status).toBe(200);
    expect(await cli.exited()).toBe(0);
    expect(cli.output.text()).toContain(`Logged in to ${portalUrl()} as alice`);
    const saved = JSON.parse(readFileSync(join(cli.home, "burrow", "config.json"), "utf8"));
    expect(saved.server).toBe(portalUrl());
    expect(saved.token).toMatch(/^brw_/);
    const tokens = (await portal.get("/_burrow/api/me/tokens")).body;
    expect(tokens.find((t: any) => t.device_name === "ci-box")?.enabled).toBe(true);

    // the saved login is what `burrow http` uses: no --server, no --token
    const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("hello from the device") });
    const agent = Bun.spawn([burrow, "http", String(upstream.port), "--subdomain", "ci-box-app"], {
      env: { ...process.env, XDG_CONFIG_HOME: cli.home },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    try {
      await new LineReader(agent).waitFor(/Forwarding/, 15_000);
      const res = await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `ci-box-app.localhost:${server.edgePort}` } });
      expect(await res.text()).toBe("hello from the device");
    } finally {
      agent.kill("SIGINT");
      await agent.exited;
      upstream.stop(true);
    }
    const audit = (await admin.get("/api/audit?limit=50")).body;
    expect(audit.find((e: any) => e.action === "device.approve" && e.username === "alice")).toMatchObject({ outcome: "ok", details: { via: "portal", device_name: "ci-box" } });
    expect(audit.find((e: any) => e.action === "device.login" && e.username === "alice")).toMatchObject({ outcome: "ok" });
  }, 60_000);

  test("deny: the command says so and saves nothing", async () => {
    using cli = login(["--server", portalUrl(), "--no-browser"]);
    const code = await printedCode(cli.output);
    const portal = await portalAs(server.edgePort, "alice");
    expect((await portal.post("/_burrow/api/device/deny", { user_code: code })).status).toBe(200);
    expect(await cli.exited()).toBe(1);
    expect(cli.output.text()).toContain("the login was denied");
    expect(() => readFileSync(join(cli.home, "burrow", "config.json"))).toThrow();
  }, 60_000);

  test("a code nobody approves expires (--device-code-ttl 12): the command says to run it again", async () => {
    using cli = login(["--server", portalUrl(), "--no-browser"]);
    const code = await printedCode(cli.output);
    expect(await cli.exited()).toBe(1);
    expect(cli.output.text()).toContain("the code expired before it was approved");
    // and the code is gone for the user too
    const portal = await portalAs(server.edgePort, "alice");
    expect((await portal.post("/_burrow/api/device/approve", { user_code: code })).status).toBe(404);
  }, 60_000);

  test("a server without the portal: the command says to use --token", async () => {
    await using off = await startServer({ args: ["--portal", "off"] });
    using cli = login(["--server", `http://localhost:${off.edgePort}`, "--no-browser"]);
    expect(await cli.exited()).toBe(1);
    expect(cli.output.text()).toContain("does not offer login through the browser");
    expect(cli.output.text()).toContain("--token");
  }, 60_000);
});

describe("the rules of the codes", () => {
  test("codes: 8 letters without look-alikes, shown XXXX-XXXX; the addresses are the portal's", async () => {
    const res = await new PortalClient(server.edgePort).post("/_burrow/device/code", { device_name: "shape" });
    expect(res.status).toBe(200);
    expect(res.body.user_code).toMatch(/^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$/);
    expect(res.body.verification_uri).toBe(`${portalUrl()}/device`);
    expect(res.body.verification_uri_complete).toBe(`${portalUrl()}/device?code=${res.body.user_code}`);
    expect(res.body.expires_in).toBe(12);
    expect(res.body.interval).toBe(5);
    expect(res.body.device_code.length).toBeGreaterThanOrEqual(43);
  });

  test("polling faster than the interval is slow_down, and the interval grows", async () => {
    const device = new PortalClient(server.edgePort);
    const { device_code } = (await device.post("/_burrow/device/code", {})).body;
    const first = await device.post("/_burrow/device/token", { device_code });
    expect(first.body.error).toBe("authorization_pending");
    const second = await device.post("/_burrow/device/token", { device_code });
    expect(second.status).toBe(400);
    expect(second.body.error).toBe("slow_down");
    expect(second.body.error_description).toContain("10 s");
  });

  test("a token is given once: a second poll after it is invalid_grant, and the code cannot be approved again", async () => {
    const device = new PortalClient(server.edgePort);
    const codes = (await device.post("/_burrow/device/code", { device_name: "once" })).body;
    const portal = await portalAs(server.edgePort, "alice");
    expect((await portal.post("/_burrow/api/device/approve", { user_code: codes.user_code })).status).toBe(200);
    const got = await device.post("/_burrow/device/token", { device_code: codes.device_code });
    expect(got.status).toBe(200);
    expect(got.body).toMatchObject({ username: "alice" });
    expect(got.body.token).toMatch(/^brw_/);
    await Bun.sleep(5_100);
    const again = await device.post("/_burrow/device/token", { device_code: codes.device_code });
    expect(again.body.error).toBe("invalid_grant");
    expect((await portal.post("/_burrow/api/device/approve", { user_code: codes.user_code })).status).toBe(404);
  }, 30_000);

  test("approving past max_devices is refused with a message that says so", async () => {
    const id = await admin.createUser("erin", { max_devices: 1 });
    await admin.createToken(id, "the one device");
    const codes = (await new PortalClient(server.edgePort).post("/_burrow/device/code", { device_name: "second" })).body;
    const portal = await portalAs(server.edgePort, "erin");
    const res = await portal.post("/_burrow/api/device/approve", { user_code: codes.user_code });
    expect(res.status).toBe(409);
    expect(res.body.error).toContain("1 of your 1 devices");
  });

  test("wrong codes are throttled: after 10, even the right one waits (429, Retry-After)", async () => {
    // a server of its own: the address's count starts from nothing
    await using fresh = await startServer();
    const freshAdmin = await signedIn(fresh);
    await freshAdmin.createUser("frank");
    await freshAdmin.createUser("gina");
    const portal = await portalAs(fresh.edgePort, "frank");
    const codes = (await new PortalClient(fresh.edgePort).post("/_burrow/device/code", { device_name: "guessed" })).body;
    for (let i = 0; i < 10; i++) {
      const wrong = await portal.post("/_burrow/api/device/approve", { user_code: "BBBB-BBBB" });
      expect(wrong.status).toBe(404);
    }
    const locked = await portal.post("/_burrow/api/device/approve", { user_code: codes.user_code });
    expect(locked.status).toBe(429);
    expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
    // someone else, from the same address, is locked too: the address counts as well as the user
    const other = await portalAs(fresh.edgePort, "gina");
    expect((await other.get(`/_burrow/api/device?user_code=${codes.user_code}`)).status).toBe(429);
  });

  test("approving needs a portal session", async () => {
    const codes = (await new PortalClient(server.edgePort).post("/_burrow/device/code", {})).body;
    const res = await new PortalClient(server.edgePort).post("/_burrow/api/device/approve", { user_code: codes.user_code });
    expect(res.status).toBe(401);
    void aliceId;
  });
});
