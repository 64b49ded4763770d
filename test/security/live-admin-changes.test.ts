/**
 * Access checked at the handshake only (the class of chisel's GHSA-24fp):
 * every admin change that narrows what someone may do reaches the tunnels,
 * connectors and streams that are live now, within 5 s, on every node, with
 * the refusal code the handshake would give, which the agent prints. One
 * test per change on one node; then the same changes made on one node of
 * two (on PostgreSQL) reaching sessions on the other.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { echoThrough, startConnector, type TestConnector } from "../harness/connector.ts";
import { LineReader } from "../harness/lines.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { startTinyproxy, tinyproxyAvailable, type TestHttpProxy } from "../harness/tinyproxy.ts";
import { waitUntil } from "../harness/wait.ts";

/** What is promised: an admin change reaches what is live within this. */
const LIVE_EFFECT_MS = 5_000;
/** How long a test waits for it at most before it says what it saw (a liveness bound, above the promise). */
const WAIT_MS = 20_000;

const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`web ${new URL(req.url).pathname}`) });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
const dir = mkdtempSync(join(tmpdir(), "burrow-live-admin-"));
const children: { proc: Subprocess }[] = [];
const disposables: AsyncDisposable[] = [];

afterAll(async () => {
  for (const d of disposables.reverse()) await Promise.resolve(d[Symbol.asyncDispose]()).catch(() => {});
  for (const c of children) if (c.proc.exitCode === null) c.proc.kill("SIGKILL");
  web.stop(true);
  echo.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

/** Kept until the file ends (killed then, if still running). */
function keep<T extends AsyncDisposable>(thing: T): T {
  disposables.push(thing);
  return thing;
}

/** Waits for `pattern` in `out` and says how long after `since` (performance.now()) it came. */
async function toldAfter(out: LineReader, pattern: RegExp, since: number): Promise<{ line: string; ms: number }> {
  const line = await out.waitFor(pattern, WAIT_MS);
  return { line, ms: performance.now() - since };
}

/** The agent printed the session's refusal with `code` within the promise, and exited 1. */
async function closedWith(agent: { proc: Subprocess; output: LineReader }, code: string, since: number): Promise<string> {
  const { line, ms } = await toldAfter(agent.output, new RegExp(`refused(?: by the server)?: ${code}: \\S`), since);
  expect(ms).toBeLessThan(LIVE_EFFECT_MS);
  expect(await agent.proc.exited).toBe(1);
  return line;
}

async function activeRows(api: AdminClient): Promise<{ subdomain?: string; hostname?: string; port?: number; protocol: string; username: string; private?: { target: string } }[]> {
  const res = await api.get("/api/tunnels/active");
  expect(res.status).toBe(200);
  return res.body;
}

/** Whether a TCP visitor to 127.0.0.1:`port` gets its bytes echoed. */
async function echoes(port: number): Promise<boolean> {
  return (await echoThrough(port, "ping").catch(() => "")) === "ping";
}

describe("on one node", () => {
  let server: TestServer;
  let api: AdminClient;
  let n = 0;

  beforeAll(async () => {
    server = await startServer();
    api = await signedIn(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  async function user(settings: Record<string, unknown> = {}) {
    const username = `live${++n}`;
    const id = await api.createUser(username, { skip_warning: true, ...settings });
    return { id, username, token: await api.createToken(id) };
  }
  const http = (token: string, args: string[] = []) => startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--skip-warning", ...args] });
  const tcp = (token: string, args: string[] = []) => startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token, args });
  const connector = (token: string, target: string): TestConnector => keep(startConnector({ server: server.edgeUrl, token, target }));

  test("allowed_protocols narrowed: a live tcp tunnel closes with PROTOCOL_DENIED, no longer listed; the user's http tunnel stays", async () => {
    const u = await user();
    await using db = await tcp(u.token);
    await using site = await http(u.token);
    expect(await echoes(db.port!)).toBe(true);

    const t0 = performance.now();
    expect((await api.put(`/api/users/${u.id}`, { allowed_protocols: "http" })).status).toBe(200);
    await closedWith(db, "PROTOCOL_DENIED", t0);
    expect(await echoes(db.port!)).toBe(false);
    const rows = (await activeRows(api)).filter((t) => t.username === u.username);
    expect(rows.map((t) => t.protocol)).toEqual(["http"]);
    expect((await tunnelFetch(server.edgePort, site.subdomain!, "/still")).status).toBe(200);
  }, 60_000);

  test("allowed_protocols narrowed for a connector: its burrow connect closes with PROTOCOL_DENIED, and connects no more", async () => {
    const alice = await user();
    const bob = await user();
    await using _owner = await tcp(alice.token, ["--private", "--name", "db", "--share", bob.username]);
    const c = connector(bob.token, `${alice.username}/db`);
    expect(await echoThrough(await c.port(), "before")).toBe("before");

    const t0 = performance.now();
    await api.put(`/api/users/${bob.id}`, { allowed_protocols: "http" });
    await closedWith(c, "PROTOCOL_DENIED", t0);
    const again = connector(bob.token, `${alice.username}/db`);
    await closedWith(again, "PROTOCOL_DENIED", performance.now());
  }, 60_000);

  test("burrow start: a tunnel of a kind no longer allowed is closed alone; the others go on over the same connection", async () => {
    const u = await user();
    const cwd = join(dir, "start");
    Bun.spawnSync(["mkdir", "-p", cwd]);
    writeFileSync(join(cwd, "burrow.yml"), `server: ${server.edgeUrl}\ntoken: ${u.token}\ntunnels:\n  site:\n    proto: http\n    addr: ${web.port}\n    skip_warning: true\n  db:\n    proto: tcp\n    addr: ${echo.port}\n`);
    const proc = Bun.spawn([...burrowCommand(), "start", "--all"], { cwd, env: { ...process.env, XDG_CONFIG_HOME: join(cwd, ".xdg"), HTTPS_PROXY: "", ALL_PROXY: "" }, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    children.push({ proc });
    const out = new LineReader(proc);
    const site = /http:\/\/([^.]+)\./.exec(await out.waitFor(/Forwarding\s+site\s+http:\/\//, 15_000))![1]!;
    const dbPort = Number(/:(\d+) ->/.exec(await out.waitFor(/Forwarding\s+db\s+\S+:\d+/, 15_000))![1]);
    expect(await echoes(dbPort)).toBe(true);
    const connected = () => server.output.lines.filter((l) => l.includes("agent connected")).length;
    const before = connected();

    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { allowed_protocols: "http" });
    const { ms } = await toldAfter(out, /tunnel .db. refused by the server: PROTOCOL_DENIED: \S/, t0);
    expect(ms).toBeLessThan(LIVE_EFFECT_MS);
    expect(await echoes(dbPort)).toBe(false);
    // the session went on: no reconnect, no new handshake, the http tunnel answers
    expect((await tunnelFetch(server.edgePort, site, "/after")).status).toBe(200);
    expect(out.text()).not.toContain("reconnecting");
    expect(connected()).toBe(before);
    expect(proc.exitCode).toBeNull();
    expect((await activeRows(api)).filter((t) => t.username === u.username).map((t) => t.protocol)).toEqual(["http"]);
    proc.kill("SIGINT");
    expect(await proc.exited).toBe(0);
  }, 60_000);

  test("can_share turned off: the owner's connectors close with NOT_SHARED and a new connect is refused; the owner still reaches it", async () => {
    const alice = await user();
    const bob = await user();
    await using _owner = await tcp(alice.token, ["--private", "--name", "db", "--share", bob.username]);
    const c = connector(bob.token, `${alice.username}/db`);
    expect(await echoThrough(await c.port(), "shared")).toBe("shared");

    const t0 = performance.now();
    await api.put(`/api/users/${alice.id}`, { can_share: false });
    await closedWith(c, "NOT_SHARED", t0);
    await closedWith(connector(bob.token, `${alice.username}/db`), "NOT_SHARED", performance.now());
    const self = connector(alice.token, `${alice.username}/db`);
    expect(await echoThrough(await self.port(), "mine")).toBe("mine");
  }, 60_000);

  test("a share removed (the owner's agent says the list again without the user): that user's connector closes with NOT_SHARED", async () => {
    const alice = await user();
    const bob = await user();
    const carol = await user();
    const first = await tcp(alice.token, ["--private", "--name", "db", "--share", bob.username]);
    const c = connector(bob.token, `${alice.username}/db`);
    expect(await echoThrough(await c.port(), "shared")).toBe("shared");
    await first.stop("SIGKILL"); // dropped: its name waits in grace for the token

    const t0 = performance.now();
    await using _again = await tcp(alice.token, ["--private", "--name", "db", "--share", carol.username]);
    await closedWith(c, "NOT_SHARED", t0);
  }, 60_000);

  test("a custom hostname deleted: the admin API answers as before; the live tunnel on it closes with HOSTNAME_NOT_ALLOWED, is no longer listed, and the name answers 404", async () => {
    const u = await user();
    const made = await api.post("/api/hostnames", { hostname: "gone.live-admin.test", user_id: u.id, verified: true });
    expect(made.status).toBe(201);
    await using agent = await http(u.token, ["--hostname", "gone.live-admin.test"]);
    const visit = () => fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: "gone.live-admin.test" } });
    expect((await visit()).status).toBe(200);

    const t0 = performance.now();
    const deleted = await api.delete(`/api/hostnames/${made.body.id}`);
    expect(deleted.status).toBe(200);
    expect(deleted.body).toEqual({ status: "removed" });
    await closedWith(agent, "HOSTNAME_NOT_ALLOWED", t0);
    expect((await visit()).status).toBe(404);
    expect((await activeRows(api)).some((t) => t.hostname === "gone.live-admin.test")).toBe(false);
  }, 60_000);

  test("a wildcard deleted: the live tunnel on a name under it closes with HOSTNAME_NOT_ALLOWED", async () => {
    const u = await user();
    const made = await api.post("/api/hostnames", { hostname: "*.wild.live-admin.test", user_id: u.id, verified: true });
    await using agent = await http(u.token, ["--hostname", "pr-1.wild.live-admin.test"]);

    const t0 = performance.now();
    expect((await api.delete(`/api/hostnames/${made.body.id}`)).status).toBe(200);
    await closedWith(agent, "HOSTNAME_NOT_ALLOWED", t0);
    expect((await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: "pr-1.wild.live-admin.test" } })).status).toBe(404);
  }, 60_000);

  test("a subdomain reserved for another user: the live tunnel on it closes with SUBDOMAIN_RESERVED, and the new owner opens it", async () => {
    const holder = await user();
    const owner = await user();
    await using agent = await http(holder.token, ["--subdomain", "shop-live"]);
    expect((await tunnelFetch(server.edgePort, "shop-live", "/")).status).toBe(200);

    const t0 = performance.now();
    expect((await api.post("/api/domains", { subdomain: "shop-live", user_id: owner.id })).status).toBe(201);
    await closedWith(agent, "SUBDOMAIN_RESERVED", t0);
    await using mine = await http(owner.token, ["--subdomain", "shop-live"]);
    expect(mine.subdomain).toBe("shop-live");
  }, 60_000);

  test("max_tunnels lowered below the live count: the newest tunnels close with TUNNEL_LIMIT, the oldest stays", async () => {
    const u = await user();
    await using oldest = await http(u.token);
    await using middle = await http(u.token);
    await using newest = await http(u.token);

    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { max_tunnels: 1 });
    for (const agent of [middle, newest]) {
      // TUNNEL_LIMIT may pass (another tunnel may close): the agent says why and tries again
      const { ms } = await toldAfter(agent.output, /TUNNEL_LIMIT: \S/, t0);
      expect(ms).toBeLessThan(LIVE_EFFECT_MS);
    }
    const rows = (await activeRows(api)).filter((t) => t.username === u.username);
    expect(rows.map((t) => t.subdomain)).toEqual([oldest.subdomain]);
    expect((await tunnelFetch(server.edgePort, oldest.subdomain!, "/")).status).toBe(200);
    expect((await tunnelFetch(server.edgePort, newest.subdomain!, "/")).status).toBe(404);
  }, 60_000);

  test("max_devices lowered: the newest device's session closes with DEVICE_LIMIT, the oldest stays", async () => {
    const u = await user();
    const second = await api.createToken(u.id, "second");
    await using first = await http(u.token);
    await using later = await http(second);

    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { max_devices: 1 });
    const { ms } = await toldAfter(later.output, /DEVICE_LIMIT: \S/, t0);
    expect(ms).toBeLessThan(LIVE_EFFECT_MS);
    expect((await tunnelFetch(server.edgePort, first.subdomain!, "/")).status).toBe(200);
    expect(first.proc.exitCode).toBeNull();
  }, 60_000);

  test.skipIf(!tinyproxyAvailable())("can_use_proxy turned off: an agent connected through a proxy closes with PROXY_DENIED; one connected directly stays", async () => {
    await using proxy: TestHttpProxy = await startTinyproxy();
    const u = await user({ can_use_proxy: true });
    await using proxied = await http(u.token, ["--proxy", proxy.url]);
    await using direct = await http(u.token);

    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { can_use_proxy: false });
    await closedWith(proxied, "PROXY_DENIED", t0);
    expect((await tunnelFetch(server.edgePort, direct.subdomain!, "/")).status).toBe(200);
  }, 60_000);

  test("require_auth turned on: a tunnel without sign-in closes with AUTH_REQUIRED", async () => {
    const u = await user();
    await using bare = await http(u.token);
    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { require_auth: true });
    await closedWith(bare, "AUTH_REQUIRED", t0);
  }, 60_000);

  test("skip_warning turned off: a browser's first visit gets the warning page again", async () => {
    const u = await user({ skip_warning: true });
    await using agent = await http(u.token);
    const browser = { "user-agent": "Mozilla/5.0", accept: "text/html" };
    expect(await (await tunnelFetch(server.edgePort, agent.subdomain!, "/", { headers: browser })).text()).toBe("web /");

    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { skip_warning: false });
    await waitUntil(async () => (await (await tunnelFetch(server.edgePort, agent.subdomain!, "/", { headers: browser })).text()) !== "web /", WAIT_MS, "the warning page");
    expect(performance.now() - t0).toBeLessThan(LIVE_EFFECT_MS);
    expect(agent.proc.exitCode).toBeNull();
  }, 60_000);
});

describe("on two nodes: a change made on one reaches the other", () => {
  const SECRET = "live-admin-changes-cluster-secret-0123456789";
  let pg: TestPostgres;
  let nodes: TestServer[] = [];
  let api: AdminClient;
  let n = 0;

  beforeAll(async () => {
    pg = await startPostgres();
    const url = await pg.newDatabase();
    const ports = freeRange(2);
    nodes = await Promise.all(
      ["a", "b"].map((id, i) =>
        startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET] }),
      ),
    );
    api = await signedIn(nodes[0]!);
  }, 90_000);
  afterAll(async () => {
    await Promise.all(nodes.map((node) => node.stop()));
    await pg?.stop();
  });

  async function user(settings: Record<string, unknown> = {}) {
    const username = `node${++n}`;
    const id = await api.createUser(username, { skip_warning: true, ...settings });
    const res = await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
    return { id, username, token: res.body.token as string, tokenId: res.body.token_id as number };
  }
  const on = (node: number, kind: "http" | "tcp", token: string, args: string[] = []): Promise<TestAgent> =>
    startAgent({ kind, target: kind === "http" ? web.port! : echo.port, server: nodes[node]!.edgeUrl, token, args: kind === "http" ? ["--skip-warning", ...args] : args });

  test("a token revoked on one node: its agent on the other closes with TOKEN_DISABLED", async () => {
    const u = await user();
    await using agent = await on(1, "http", u.token);
    const t0 = performance.now();
    await api.delete(`/api/tokens/${u.tokenId}`);
    await closedWith(agent, "TOKEN_DISABLED", t0);
  }, 60_000);

  test("a user disabled on one node: their agents on both close with USER_DISABLED", async () => {
    const u = await user();
    await using here = await on(0, "http", u.token);
    await using there = await on(1, "tcp", u.token);
    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { enabled: false });
    await closedWith(here, "USER_DISABLED", t0);
    await closedWith(there, "USER_DISABLED", t0);
  }, 60_000);

  test("allowed_protocols narrowed on one node: a tcp tunnel on the other closes with PROTOCOL_DENIED", async () => {
    const u = await user();
    await using db = await on(1, "tcp", u.token);
    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { allowed_protocols: "http" });
    await closedWith(db, "PROTOCOL_DENIED", t0);
  }, 60_000);

  test("a hostname deleted on one node: the tunnel on the other closes with HOSTNAME_NOT_ALLOWED, and neither node serves or lists it", async () => {
    const u = await user();
    const made = await api.post("/api/hostnames", { hostname: "far.live-admin.test", user_id: u.id, verified: true });
    await using agent = await on(1, "http", u.token, ["--hostname", "far.live-admin.test"]);
    const visit = (node: TestServer) => fetch(`http://127.0.0.1:${node.edgePort}/`, { headers: { host: "far.live-admin.test" } });
    await waitUntil(async () => (await visit(nodes[0]!)).status === 200, WAIT_MS, "the tunnel relayed from the first node");

    const t0 = performance.now();
    expect((await api.delete(`/api/hostnames/${made.body.id}`)).status).toBe(200);
    await closedWith(agent, "HOSTNAME_NOT_ALLOWED", t0);
    await waitUntil(async () => (await visit(nodes[0]!)).status === 404 && (await visit(nodes[1]!)).status === 404, LIVE_EFFECT_MS, "the name unserved on both nodes");
    for (const node of nodes) expect((await activeRows(await signedIn(node))).some((t) => t.hostname === "far.live-admin.test")).toBe(false);
  }, 60_000);

  test("a subdomain reserved on one node for another user: the tunnel on it on the other node closes with SUBDOMAIN_RESERVED", async () => {
    const holder = await user();
    const owner = await user();
    await using agent = await on(1, "http", holder.token, ["--subdomain", "far-shop"]);
    const t0 = performance.now();
    expect((await api.post("/api/domains", { subdomain: "far-shop", user_id: owner.id })).status).toBe(201);
    await closedWith(agent, "SUBDOMAIN_RESERVED", t0);
  }, 60_000);

  test("max_tunnels lowered with tunnels on both nodes: the newest over the cluster close, wherever they are", async () => {
    const u = await user();
    await using oldest = await on(1, "http", u.token);
    await using middle = await on(0, "http", u.token);
    await using newest = await on(1, "http", u.token);
    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { max_tunnels: 1 });
    for (const agent of [middle, newest]) {
      const { ms } = await toldAfter(agent.output, /TUNNEL_LIMIT: \S/, t0);
      expect(ms).toBeLessThan(LIVE_EFFECT_MS);
    }
    expect(oldest.output.text()).not.toContain("TUNNEL_LIMIT");
    expect(oldest.proc.exitCode).toBeNull();
  }, 60_000);

  test("skip_warning turned off: a browser relayed through the other node gets the warning page again", async () => {
    const u = await user({ skip_warning: true });
    await using agent = await on(1, "http", u.token);
    const browser = { "user-agent": "Mozilla/5.0", accept: "text/html", host: `${agent.subdomain}.localhost:${nodes[0]!.edgePort}` };
    const visit = async () => (await fetch(`http://127.0.0.1:${nodes[0]!.edgePort}/`, { headers: browser })).text();
    await waitUntil(async () => (await visit()) === "web /", WAIT_MS, "the tunnel relayed from the first node");

    const t0 = performance.now();
    await api.put(`/api/users/${u.id}`, { skip_warning: false });
    await waitUntil(async () => (await visit()) !== "web /", WAIT_MS, "the warning page through the first node");
    expect(performance.now() - t0).toBeLessThan(LIVE_EFFECT_MS);
  }, 60_000);

  test("can_share turned off on one node: a connector on the other, to a tunnel on the first, closes with NOT_SHARED", async () => {
    const alice = await user();
    const bob = await user();
    await using _owner = await on(0, "tcp", alice.token, ["--private", "--name", "db", "--share", bob.username]);
    const c = keep(startConnector({ server: nodes[1]!.edgeUrl, token: bob.token, target: `${alice.username}/db` }));
    expect(await echoThrough(await c.port(), "relayed")).toBe("relayed");
    const t0 = performance.now();
    await (await signedIn(nodes[1]!)).put(`/api/users/${alice.id}`, { can_share: false });
    await closedWith(c, "NOT_SHARED", t0);
  }, 60_000);
});
