/**
 * Path routes (`burrow http 3000 --route /api=8080 ...`): three local
 * services behind one public name, reached with curl (one visitor
 * connection carrying requests for several of them) and a WebSocket. The
 * longest prefix wins, whole segments only, the path goes on unchanged; the
 * agent's lines and its inspector say which route served a request. Bad
 * routes are usage errors before anything connects.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { runBurrow } from "../harness/run.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

/** A local service that says who it is, the path it got and the Host it was sent; `/socket` is a WebSocket echo. */
function service(name: string) {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, server) {
      const url = new URL(req.url);
      if (url.pathname.endsWith("/socket") && server.upgrade(req)) return undefined;
      return new Response(`${name} ${url.pathname}${url.search} host=${req.headers.get("host")}`);
    },
    websocket: { message: (ws, m) => void ws.send(`${name} echoes ${m}`) },
  });
}

const front = service("front");
const api = service("api");
const admin = service("admin");
const ws = service("ws");
let server: TestServer;
let token: string;
let agent: TestAgent;
let inspector: string;
let dir: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-routes-"));
  server = await startServer();
  const client = await signedIn(server);
  token = await client.createToken(await client.createUser("router", { skip_warning: true }));
  agent = await startAgent({
    kind: "http",
    target: front.port!,
    server: server.edgeUrl,
    token,
    args: ["--subdomain", "routed", "--skip-warning", "--route", `/api=${api.port}`, "--route", `/api/admin=localhost:${admin.port}`, "--route", `/ws=http://127.0.0.1:${ws.port}`, "--inspect-addr", "127.0.0.1:0"],
  });
  inspector = /Inspector\s+(http:\/\/\S+)/.exec(agent.output.text())![1]!;
});
afterAll(async () => {
  await agent?.stop();
  await server?.stop();
  for (const s of [front, api, admin, ws]) s.stop(true);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const get = async (path: string) => (await tunnelFetch(server.edgePort, "routed", path)).text();

describe("one name, several local services", () => {
  test("the longest matching prefix chooses the service, whole segments only, and the path goes on unchanged", async () => {
    const host = `routed.localhost:${server.edgePort}`;
    expect(await get("/")).toBe(`front / host=${host}`);
    expect(await get("/api")).toBe(`api /api host=${host}`);
    expect(await get("/api/v1/users?page=2")).toBe(`api /api/v1/users?page=2 host=${host}`);
    expect(await get("/api?x=1")).toBe(`api /api?x=1 host=${host}`);
    expect(await get("/apis")).toBe(`front /apis host=${host}`);
    expect(await get("/api/admin/users")).toBe(`admin /api/admin/users host=${host}`);
    expect(await get("/api/administrators")).toBe(`api /api/administrators host=${host}`);
    expect(await get("/ws/info")).toBe(`ws /ws/info host=${host}`);
  });

  test("curl on one connection: its requests go each to its own service, in order", async () => {
    const urls = ["/", "/api/a", "/ws/b", "/api/admin/c", "/d"].map((p) => `http://routed.localhost:${server.edgePort}${p}`);
    const p = Bun.spawn(["curl", "-sS", "--resolve", `routed.localhost:${server.edgePort}:127.0.0.1`, ...urls.flatMap((u) => [u, "-w", "\\n"])], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(out.trim().split("\n").map((l) => l.split(" ").slice(0, 2).join(" "))).toEqual(["front /", "api /api/a", "ws /ws/b", "admin /api/admin/c", "front /d"]);
  });

  test("a WebSocket upgrade follows its route", async () => {
    const socket = new WebSocket(`ws://127.0.0.1:${server.edgePort}/ws/socket`, { headers: { host: `routed.localhost:${server.edgePort}` } } as unknown as string[]);
    const got = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no echo within 5 s")), 5_000);
      socket.onopen = () => socket.send("hello");
      socket.onmessage = (ev) => {
        clearTimeout(timer);
        resolve(String(ev.data));
      };
      socket.onerror = () => reject(new Error("WebSocket failed"));
    });
    socket.close();
    expect(got).toBe("ws echoes hello");
  });

  test("the agent's lines and its inspector say which route served each request", async () => {
    await get("/api/said");
    await agent.output.waitFor(/GET\s+\/api\/said\s+200\s+\d+ ms\s+via \/api$/, 5_000);
    await get("/plain");
    await agent.output.waitFor(/GET\s+\/plain\s+200\s+\d+ ms$/, 5_000);
    let listed: { path: string; route: string | null }[] = [];
    await waitUntil(async () => {
      listed = ((await (await fetch(`${inspector}/api/requests`)).json()) as { requests: typeof listed }).requests;
      return listed.some((r) => r.path === "/plain");
    }, 5_000, "the inspector's captures");
    expect(listed.find((r) => r.path === "/api/said")?.route).toBe("/api");
    expect(listed.find((r) => r.path === "/plain")?.route).toBeNull();
  });

  test("--host-header rewrite gives each service its own address as Host", async () => {
    await using rewriting = await startAgent({
      kind: "http",
      target: front.port!,
      server: server.edgeUrl,
      token,
      args: ["--subdomain", "rewritten", "--skip-warning", "--host-header", "rewrite", "--route", `/api=${api.port}`, "--no-inspect"],
    });
    expect(await (await tunnelFetch(server.edgePort, "rewritten", "/x")).text()).toBe(`front /x host=localhost:${front.port}`);
    expect(await (await tunnelFetch(server.edgePort, "rewritten", "/api/x")).text()).toBe(`api /api/x host=localhost:${api.port}`);
    expect(rewriting.publicUrl).toContain("rewritten");
  });
});

describe("routes in burrow.yml", () => {
  test("config check lists them; burrow start serves them", async () => {
    writeFileSync(join(dir, "burrow.yml"), `tunnels:\n  shop:\n    proto: http\n    addr: ${front.port}\n    subdomain: shop\n    skip_warning: true\n    routes:\n      /api: ${api.port}\n      /ws/: "127.0.0.1:${ws.port}"\n`);
    const check = await runBurrow(["config", "check", "--config", join(dir, "burrow.yml")]);
    expect(check.code).toBe(0);
    expect(check.stdout).toContain(`/api -> localhost:${api.port}`);
    expect(check.stdout).toContain(`/ws -> 127.0.0.1:${ws.port}`);
    const started = Bun.spawn([process.execPath, join(import.meta.dir, "..", "..", "src", "main.ts"), "start", "shop", "--config", join(dir, "burrow.yml"), "--server", server.edgeUrl, "--token", token, "--no-inspect"], {
      stdout: "pipe",
      stderr: "pipe",
      env: { ...process.env, XDG_CONFIG_HOME: dir },
    });
    try {
      await waitUntil(async () => (await tunnelFetch(server.edgePort, "shop", "/api/y")).status === 200, 10_000, "the tunnel from burrow.yml");
      expect(await (await tunnelFetch(server.edgePort, "shop", "/api/y")).text()).toStartWith("api /api/y");
      expect(await (await tunnelFetch(server.edgePort, "shop", "/ws/z")).text()).toStartWith("ws /ws/z");
      expect(await (await tunnelFetch(server.edgePort, "shop", "/z")).text()).toStartWith("front /z");
    } finally {
      started.kill();
      await started.exited;
    }
  });

  test("a bad route names its line", async () => {
    writeFileSync(join(dir, "bad.yml"), "tunnels:\n  shop:\n    proto: http\n    addr: 3000\n    routes:\n      api: 8080\n");
    const out = await runBurrow(["config", "check", "--config", join(dir, "bad.yml")]);
    expect(out.code).toBe(2);
    expect(out.stderr).toContain("bad.yml:6: tunnels.shop.routes.api: the path 'api' must start with /");
    writeFileSync(join(dir, "twice.yml"), "tunnels:\n  shop:\n    proto: http\n    addr: 3000\n    routes:\n      /api: 8080\n      /api/: 8081\n");
    const twice = await runBurrow(["config", "check", "--config", join(dir, "twice.yml")]);
    expect(twice.code).toBe(2);
    expect(twice.stderr).toContain("the route /api is given twice");
    writeFileSync(join(dir, "tcp.yml"), "tunnels:\n  db:\n    proto: tcp\n    addr: 5432\n    routes:\n      /api: 8080\n");
    expect((await runBurrow(["config", "check", "--config", join(dir, "tcp.yml")])).stderr).toContain("tunnels.db.routes: is for http tunnels; this one is tcp");
  });
});

describe("bad routes on the command line: one line, exit 2, nothing connects", () => {
  const cases: [string, string[], string][] = [
    ["no leading slash", ["--route", "api=8080"], "--route the path 'api' must start with /"],
    ["no address", ["--route", "/api"], "--route must be PATH=PORT, PATH=HOST:PORT or PATH=URL"],
    ["a route for /", ["--route", "/=8080"], "--route a route for / is the tunnel's own address"],
    ["the same path twice", ["--route", "/api=8080", "--route", "/api/=8081"], "--route the route /api is given twice"],
    ["a bad address", ["--route", "/api=not-a-port"], "--route 'not-a-port' is not PORT or HOST:PORT"],
    ["a port out of range", ["--route", "/api=70000"], "--route '70000' is not PORT or HOST:PORT (port 1-65535)"],
    ["a query in the path", ["--route", "/api?x=8080"], "--route the path '/api?x' must start with / and hold no spaces, ?, # or ="],
  ];
  test.each(cases)("%s", async (_name, args, says) => {
    const out = await runBurrow(["http", "3000", "--server", "http://127.0.0.1:9", "--token", "brw_x", ...args]);
    expect(out.code).toBe(2);
    expect(out.stderr.trim().split("\n")).toHaveLength(1);
    expect(out.stderr).toContain(says);
  });
});
