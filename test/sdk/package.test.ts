/**
 * The npm package burrow-agent as its users get it: built and packed
 * (`npm run sdk:pack`), installed with `npm install ./burrow-agent-*.tgz`
 * into a temp project, not imported from src/, and run by a script under
 * Node.js and under Bun against the real server: an http tunnel (a request
 * through its public address, the "request" event, the name free again at
 * once after close()), a tcp tunnel, refusals with their codes, and an
 * AbortSignal that closes the tunnel.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildSdk } from "../../build/sdk.ts";
import { signedIn } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startTinyproxy, tinyproxyAvailable, type TestHttpProxy } from "../harness/tinyproxy.ts";

let server: TestServer;
let token: string;
/** A user's token whose can_use_proxy is false. */
let noProxyToken: string;
/** The token of a user sdk-user shares private tunnels with. */
let friendToken: string;
let proxy: TestHttpProxy | undefined;
let project: string;
let tarball: string;
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  // /who: who the owner's agent says is asking (a private http tunnel's X-Burrow-User)
  fetch: (req) => new Response(new URL(req.url).pathname === "/who" ? `x-burrow-user: ${req.headers.get("x-burrow-user")}` : `upstream saw ${new URL(req.url).pathname}${new URL(req.url).search}`),
});
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
const udpEcho = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d, port, address) => void s.send(d, port, address) } });
const node = Bun.which("node");

beforeAll(async () => {
  tarball = (await buildSdk()).tarball;
  project = mkdtempSync(join(tmpdir(), "burrow-sdk-"));
  writeFileSync(join(project, "package.json"), JSON.stringify({ name: "sdk-user", private: true, type: "module" }));
  const installed = Bun.spawnSync(["npm", "install", "--no-audit", "--no-fund", "--silent", tarball], { cwd: project, stdout: "pipe", stderr: "pipe" });
  if (installed.exitCode !== 0) throw new Error(`npm install of the package failed: ${installed.stderr.toString()}`);
  copyFileSync(join(import.meta.dir, "scenario.mjs"), join(project, "scenario.mjs"));
  server = await startServer();
  const admin = await signedIn(server);
  token = await admin.createToken(await admin.createUser("sdk-user", { allowed_protocols: "http,tcp,udp", can_use_proxy: true, can_share: true }), "sdk");
  friendToken = await admin.createToken(await admin.createUser("sdk-friend", { allowed_protocols: "http,tcp,udp" }), "sdk");
  noProxyToken = await admin.createToken(await admin.createUser("sdk-no-proxy", { can_use_proxy: false }), "sdk");
  if (tinyproxyAvailable()) proxy = await startTinyproxy();
}, 120_000);

afterAll(async () => {
  upstream.stop(true);
  echo.stop(true);
  udpEcho.close();
  await proxy?.stop();
  await server?.stop();
  if (project) rmSync(project, { recursive: true, force: true });
});

/** Runs scenario.mjs under `runtime` in the temp project; its JSON line. */
async function scenario(runtime: "node" | "bun", name: string): Promise<Record<string, any>> {
  const exe = runtime === "node" ? node! : process.execPath;
  const env = {
    ...process.env,
    XDG_CONFIG_HOME: join(project, "no-config"),
    NAME: runtime,
    SCENARIO: JSON.stringify({ server: server.edgeUrl, token, noProxyToken, friendToken, owner: "sdk-user", proxy: proxy?.url, edgePort: server.edgePort, httpPort: upstream.port, echoPort: echo.port, udpEchoPort: udpEcho.port, scenario: name }),
  };
  const proc = Bun.spawn([exe, "scenario.mjs"], { cwd: project, env, stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 30_000);
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  await proc.exited;
  clearTimeout(timer);
  const line = out.trim().split("\n").pop() ?? "";
  try {
    return JSON.parse(line);
  } catch {
    throw new Error(`no result from ${runtime}: ${out}\n${err}`);
  }
}

test("the package is one ES module with its declarations and no dependencies", () => {
  const manifest = JSON.parse(readFileSync(join(project, "node_modules", "burrow-agent", "package.json"), "utf8"));
  expect(manifest).toMatchObject({ name: "burrow-agent", type: "module", engines: { node: ">=20" }, exports: { ".": { types: "./index.d.ts", default: "./index.js" } } });
  expect(manifest.dependencies).toBeUndefined();
  const code = readFileSync(join(project, "node_modules", "burrow-agent", "index.js"), "utf8");
  // nothing of the server: no argon2, no SQLite, no drizzle
  const found = ["@node-rs/argon2", "bun:sqlite", "drizzle-orm", "acme-client"].filter((name) => code.includes(name));
  expect(found).toEqual([]);
});

for (const runtime of ["node", "bun"] as const) {
  describe.skipIf(runtime === "node" && !node)(`on ${runtime === "node" ? "Node.js" : "Bun"}`, () => {
    test("an http tunnel: a request through its public address, the request event, and its name free again at once after close()", async () => {
      const r = await scenario(runtime, "http");
      expect(r.error).toBeUndefined();
      expect(r.url).toBe(`http://sdk-${runtime}.localhost:${server.edgePort}`);
      expect(r.answer).toEqual({ status: 200, body: "upstream saw /hello?from=sdk" });
      expect(r.requests).toEqual([{ method: "GET", path: "/hello?from=sdk", status: 200, timed: true }]);
      expect(r.again).toBe(true);
    }, 60_000);

    test("a handler tunnel: a function serves the requests, with no local port; a streamed body arrives whole; a handler that throws is a 500", async () => {
      const r = await scenario(runtime, "handler");
      expect(r.error).toBeUndefined();
      expect(r.post.status).toBe(201);
      expect(JSON.parse(r.post.body)).toEqual({ method: "POST", path: "/h?x=1", body: "ping", header: null });
      expect(r.stream).toEqual({ status: 200, body: "one two three" });
      expect(r.thrown).toBe(500);
      expect(r.upgrade).toBe(501);
    }, 60_000);

    test("a session: several tunnels over one connection, one added later, a refused one alone rejected, one closed freeing its name at once", async () => {
      const before = server.output.lines.filter((l) => l.includes("agent connected")).length;
      const r = await scenario(runtime, "session");
      expect(r.error).toBeUndefined();
      expect(r.first).toEqual(["upstream saw /a", "from b", "t"]);
      expect(r.second).toEqual(["upstream saw /a", "from d", "t2"]);
      expect(r.duplicate).toBe("SUBDOMAIN_TAKEN");
      expect(r.third).toEqual(["upstream saw /a", "b elsewhere"]);
      expect(r.after).toBe(404);
      // the first three came in one handshake: one "agent connected" line names all three
      const connected = server.output.lines.filter((l) => l.includes("agent connected")).slice(before);
      expect(connected.some((l) => l.includes(`sa-${runtime}.`) && l.includes(`sb-${runtime}.`) && /tunnels=\S*:\d+/.test(l))).toBe(true);
    }, 60_000);

    test("a tcp tunnel carries bytes both ways", async () => {
      const r = await scenario(runtime, "tcp");
      expect(r.error).toBeUndefined();
      expect(r.port).toBeGreaterThan(0);
      expect(r.echo).toBe("bytes through a tcp tunnel");
    }, 60_000);

    test("refusals reject with a BurrowError and the server's code", async () => {
      const r = await scenario(runtime, "refused");
      expect(r.error).toBeUndefined();
      expect(r.refused).toMatchObject({ isBurrowError: true, code: "SUBDOMAIN_TAKEN" });
      expect(r.badToken).toBe("AUTH_FAILED");
      expect(r.bad).toEqual(["TypeError: basicAuth", "TypeError: port", "TypeError: basicAuth", "TypeError: allowCidr"]);
    }, 60_000);

    test("access options as the CLI's flags: basic auth asked of visitors, a header set on requests", async () => {
      const r = await scenario(runtime, "access");
      expect(r.error).toBeUndefined();
      expect(r.without).toBe(401);
      expect(r.with).toEqual({ status: 200, body: "upstream saw /private" });
    }, 60_000);

    test("inspect: off by default; on, the inspector listens on a free loopback port, captures the requests and serves its page, and closes with the tunnel", async () => {
      const r = await scenario(runtime, "inspect");
      expect(r.error).toBeUndefined();
      expect(r.plain).toBeNull();
      expect(r.inspector).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      expect(r.captured).toEqual(["GET /seen-by-the-inspector?x=1 200"]);
      expect(r.page).toStartWith("text/html");
      expect(r.after).toBe("closed");
    }, 60_000);

    test.skipIf(!tinyproxyAvailable())("proxy: the connection to the server through an HTTP proxy (Debian's tinyproxy, CONNECT), for a tunnel and a session; can_use_proxy false is PROXY_DENIED; a bad proxy is a TypeError", async () => {
      const from = proxy!.log.lines.length;
      const r = await scenario(runtime, "proxy");
      expect(r.error).toBeUndefined();
      expect(r.answer).toEqual({ status: 200, body: "upstream saw /through-the-proxy" });
      expect(r.session).toBe("upstream saw /session-through-the-proxy");
      expect(r.sessionProxy).toBe("TypeError: proxy is the session's: connect({ proxy })");
      expect(r.denied).toBe("PROXY_DENIED");
      expect(r.bad).toEqual(["TypeError: proxy", "TypeError: proxy", "TypeError: proxy must be a URL string such as http"]);
      // the proxy carried them: its log names a CONNECT to the server's port for each connection
      const connects = proxy!.log.lines.slice(from).filter((l) => l.includes("CONNECT") && l.includes(`:${server.edgePort}`));
      expect(connects.length).toBeGreaterThanOrEqual(3);
    });

    test("private tunnels: forward({ private, name, share }) and reach(owner/name) through a local port, tcp, http (X-Burrow-User set by the owner's agent) and udp; NOT_SHARED for a stranger and for no such tunnel; bad options are TypeErrors", async () => {
      const r = await scenario(runtime, "private");
      expect(r.error).toBeUndefined();
      expect(r.publicPort).toBeNull(); // nothing public
      expect(r.db).toEqual({ protocol: "tcp", host: "127.0.0.1", echo: "bytes to a private tunnel" });
      expect(r.web).toEqual({ protocol: "http", url: "http://127.0.0.1:PORT", body: "x-burrow-user: sdk-friend" });
      expect(r.udp).toEqual({ protocol: "udp", echo: "a datagram to a private tunnel" });
      expect(r.taken).toBe("LISTEN_FAILED");
      expect(r.refused).toEqual({ stranger: "NOT_SHARED", "nobody's": "NOT_SHARED" });
      expect(r.closedEvent).toEqual({});
      expect(r.portAfterClose).toBe("closed");
      expect(r.bad).toEqual(["TypeError: 'no-slash' is not OWNER/NAME, e.g. alice/db", "TypeError: name", "TypeError: private", "TypeError: name"]);
    });

    test("an AbortSignal closes the tunnel", async () => {
      const r = await scenario(runtime, "abort");
      expect(r.error).toBeUndefined();
      expect(r.closed).toEqual({});
      expect(r.after).toBe(404);
    }, 60_000);
  });
}
