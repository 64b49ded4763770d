/**
 * A visitor on any node reaches a tunnel held by another: three nodes on one
 * PostgreSQL database, each with --node-url and the same --cluster-secret;
 * the visitor's node relays over an authenticated link to the agent's node.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { NODE_PATH, nodeAuthorization } from "../../src/cluster/node-auth.ts";
import { signedIn } from "../harness/admin.ts";
import { refusal, startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const SECRET = "relay-secret-for-tests-0123456789abcdef";
let pg: TestPostgres;
let nodes: TestServer[] = [];
let token: string;
const agents: TestAgent[] = [];
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req, server) {
    const url = new URL(req.url);
    if (url.pathname === "/ws" && server.upgrade(req)) return undefined;
    if (url.pathname === "/echo") return new Response(await req.arrayBuffer());
    return new Response(`hello from ${url.pathname}`, { headers: { "X-Upstream": "yes" } });
  },
  websocket: {
    message(ws, m) {
      ws.send(`echo:${m}`);
    },
  },
});

/** Nodes with a public port known before they start, so that each can say where it is (--node-url). */
async function startNodes(url: string, ids: string[]): Promise<TestServer[]> {
  const ports = freeRange(ids.length);
  return Promise.all(
    ids.map((id, i) =>
      startServer({
        args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET],
      }),
    ),
  );
}

beforeAll(async () => {
  pg = await startPostgres();
  nodes = await startNodes(await pg.newDatabase(), ["r1", "r2", "r3"]);
  const api = await signedIn(nodes[0]!);
  token = await api.createToken(await api.createUser("relayed", { skip_warning: true }));
  // one tunnel on each node
  for (const [i, n] of nodes.entries()) {
    agents.push(await startAgent({ kind: "http", target: upstream.port!, server: n.edgeUrl, token, args: ["--subdomain", `on-r${i + 1}`, "--skip-warning"] }));
  }
});
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await Promise.all(nodes.map((n) => n.stop()));
  upstream.stop(true);
  await pg?.stop();
});

describe("a visitor on any node", () => {
  test("reaches the tunnel of every node, its own and the two others'", async () => {
    for (const visitorNode of nodes) {
      for (let i = 1; i <= 3; i++) {
        const res = await tunnelFetch(visitorNode.edgePort, `on-r${i}`, `/from-${i}`);
        expect(res.status).toBe(200);
        expect(res.headers.get("x-upstream")).toBe("yes");
        expect(await res.text()).toBe(`hello from /from-${i}`);
      }
    }
  });

  test("a request body of 3 MiB goes through the relay and back intact", async () => {
    const body = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 7) & 0xff);
    const res = await tunnelFetch(nodes[0]!.edgePort, "on-r2", "/echo", { method: "POST", body });
    const back = new Uint8Array(await res.arrayBuffer());
    expect(back.byteLength).toBe(body.byteLength);
    expect(Bun.hash(back)).toBe(Bun.hash(body));
  });

  test("a WebSocket through the relay", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${nodes[2]!.edgePort}/ws`, { headers: { Host: `on-r1.localhost:${nodes[2]!.edgePort}` } } as Bun.WebSocketOptions);
    const got = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no echo within 5 s")), 5_000);
      ws.onopen = () => ws.send("ping");
      ws.onmessage = (ev) => {
        clearTimeout(timer);
        resolve(String(ev.data));
      };
      ws.onerror = () => reject(new Error("websocket failed"));
    });
    ws.close();
    expect(got).toBe("echo:ping");
  });

  test("a custom hostname's tunnel on one node is reached through the others, and is one tunnel over the cluster", async () => {
    const api = await signedIn(nodes[0]!);
    const owner = await api.createUser("hostname-owner", { skip_warning: true });
    expect((await api.post("/api/hostnames", { hostname: "demo.cluster.test", user_id: owner, verified: true })).status).toBe(201);
    const ownerToken = await api.createToken(owner);
    await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[1]!.edgeUrl, token: ownerToken, args: ["--hostname", "demo.cluster.test", "--skip-warning"] });
    for (const node of nodes) {
      const res = await fetch(`http://127.0.0.1:${node.edgePort}/via-hostname`, { headers: { host: `demo.cluster.test:${node.edgePort}` } });
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("hello from /via-hostname");
    }
    // another agent of the same user on another node: the hostname is taken cluster-wide
    const second = await refusal({ kind: "http", target: upstream.port!, server: nodes[2]!.edgeUrl, token: await api.createToken(owner, "second"), args: ["--hostname", "demo.cluster.test"] });
    expect(second).toMatch(/HOSTNAME_IN_USE/);
    // listed once by every node, by its hostname
    for (const node of nodes) {
      const client = await signedIn(node);
      const mine = ((await client.get("/api/tunnels/active")).body as { username: string; hostname?: string }[]).filter((t) => t.username === "hostname-owner");
      expect(mine.map((t) => t.hostname)).toEqual(["demo.cluster.test"]);
    }
    // with a subdomain too: reached by both through any node, and still one tunnel (the hostname's row is the subdomain's twin)
    expect((await api.post("/api/hostnames", { hostname: "both.cluster.test", user_id: owner, verified: true })).status).toBe(201);
    await using _both = await startAgent({ kind: "http", target: upstream.port!, server: nodes[2]!.edgeUrl, token: ownerToken, args: ["--hostname", "both.cluster.test", "--subdomain", "both-sub", "--skip-warning"] });
    expect(await (await fetch(`http://127.0.0.1:${nodes[0]!.edgePort}/b`, { headers: { host: `both.cluster.test:${nodes[0]!.edgePort}` } })).text()).toBe("hello from /b");
    expect(await (await tunnelFetch(nodes[1]!.edgePort, "both-sub", "/s")).text()).toBe("hello from /s");
    for (const node of nodes) {
      const client = await signedIn(node);
      const mine = ((await client.get("/api/tunnels/active")).body as { username: string }[]).filter((t) => t.username === "hostname-owner");
      expect(mine).toHaveLength(2);
    }
  });

  test("1,000 requests spread over the three nodes, to tunnels on all three: every one answered", async () => {
    let ok = 0;
    const deadline = Date.now() + 60_000;
    for (let batch = 0; batch < 20 && Date.now() < deadline; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 50 }, async (_, k) => {
          const n = (batch * 50 + k) % 3;
          const target = ((batch * 50 + k) % 7) % 3;
          const res = await tunnelFetch(nodes[n]!.edgePort, `on-r${target + 1}`, `/n${k}`);
          return res.status === 200 && (await res.text()) === `hello from /n${k}`;
        }),
      );
      ok += answers.filter(Boolean).length;
    }
    expect(ok).toBe(1000);
  });

  test("relayed traffic is counted once, in the user's analytics", async () => {
    const api = await signedIn(nodes[1]!);
    const counted = await api.createUser("counted", { skip_warning: true });
    await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[2]!.edgeUrl, token: await api.createToken(counted), args: ["--subdomain", "counted", "--skip-warning"] });
    const body = new Uint8Array(200_000);
    const res = await tunnelFetch(nodes[0]!.edgePort, "counted", "/echo", { method: "POST", body });
    expect((await res.arrayBuffer()).byteLength).toBe(body.byteLength);
    // the visitor's node writes within 2 s: the 400 000 bytes of bodies plus the heads, not twice that
    let total = 0;
    for (let i = 0; i < 40 && total < 400_000; i++) {
      await Bun.sleep(250);
      total = await totalFor(api, counted);
    }
    await Bun.sleep(2_500); // and nothing more comes from the agent's node
    total = await totalFor(api, counted);
    expect(total).toBeGreaterThanOrEqual(400_000);
    expect(total).toBeLessThan(402_000);
  });
});

describe("access rules, applied at the agent's node for relayed visitors too", () => {
  test("a user given allow_cidrs: refused at once on every node, their own and the others (403)", async () => {
    const api = await signedIn(nodes[0]!);
    const fenced = await api.createUser("fenced", { skip_warning: true });
    await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token: await api.createToken(fenced), args: ["--subdomain", "fenced", "--skip-warning"] });
    expect((await tunnelFetch(nodes[1]!.edgePort, "fenced", "/open")).status).toBe(200);
    expect((await api.put(`/api/users/${fenced}`, { allow_cidrs: ["10.0.0.0/8"] })).status).toBe(200);
    for (const n of nodes) {
      const res = await tunnelFetch(n.edgePort, "fenced", "/fenced");
      expect(res.status).toBe(403);
      expect(await res.text()).not.toContain("hello from");
    }
  });

  test("basic auth through another node: 401 with the challenge without the password, the service with it, and the password not passed on", async () => {
    const api = await signedIn(nodes[0]!);
    const guarded = await api.createUser("guarded", { skip_warning: true });
    const seen: (string | null)[] = [];
    const echo = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => (seen.push(req.headers.get("authorization")), new Response("inside")) });
    try {
      await using _agent = await startAgent({
        kind: "http",
        target: echo.port!,
        server: nodes[2]!.edgeUrl,
        token: await api.createToken(guarded),
        args: ["--subdomain", "guarded", "--skip-warning", "--basic-auth", "visitor:right-password-123"],
      });
      const without = await tunnelFetch(nodes[0]!.edgePort, "guarded", "/");
      expect(without.status).toBe(401);
      expect(without.headers.get("www-authenticate")).toContain("Basic");
      const wrong = await tunnelFetch(nodes[1]!.edgePort, "guarded", "/", { headers: { Authorization: `Basic ${btoa("visitor:wrong-password")}` } });
      expect(wrong.status).toBe(401);
      const right = await tunnelFetch(nodes[0]!.edgePort, "guarded", "/", { headers: { Authorization: `Basic ${btoa("visitor:right-password-123")}` } });
      expect(right.status).toBe(200);
      expect(await right.text()).toBe("inside");
      expect(seen).toEqual([null]);
    } finally {
      echo.stop(true);
    }
  });

  test("a WebSocket through another node to a tunnel with basic auth: the 401 with its challenge without the password (not a 502), open with it", async () => {
    const api = await signedIn(nodes[0]!);
    const user = await api.createUser("guarded-ws", { skip_warning: true });
    await using _agent = await startAgent({
      kind: "http",
      target: upstream.port!,
      server: nodes[1]!.edgeUrl,
      token: await api.createToken(user),
      args: ["--subdomain", "guarded-ws", "--skip-warning", "--basic-auth", "visitor:right-password-123"],
    });
    const upgrade = { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13" };
    const refused = await tunnelFetch(nodes[0]!.edgePort, "guarded-ws", "/ws", { headers: upgrade });
    expect(refused.status).toBe(401);
    expect(refused.headers.get("www-authenticate")).toContain("Basic");
    expect(await refused.text()).not.toContain("right-password");
    const port = nodes[2]!.edgePort;
    const ws = new WebSocket(`ws://127.0.0.1:${port}/ws`, {
      headers: { Host: `guarded-ws.localhost:${port}`, Authorization: `Basic ${btoa("visitor:right-password-123")}` },
    } as Bun.WebSocketOptions);
    const echoed = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("no echo within 5 s")), 5_000);
      ws.onopen = () => ws.send("knock");
      ws.onmessage = (ev) => (clearTimeout(timer), resolve(String(ev.data)));
      ws.onerror = () => (clearTimeout(timer), reject(new Error("websocket failed")));
    });
    ws.close();
    expect(echoed).toBe("echo:knock");
  });
});

describe("the browser warning for a relayed visitor", () => {
  const BROWSER = { accept: "text/html", "user-agent": "Mozilla/5.0 (X11; Linux x86_64)" };

  test("a tunnel without access rules: the warning, as on one node, then the service after Continue", async () => {
    const api = await signedIn(nodes[0]!);
    const user = await api.createUser("warned");
    await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[1]!.edgeUrl, token: await api.createToken(user), args: ["--subdomain", "warned"] });
    const first = await tunnelFetch(nodes[0]!.edgePort, "warned", "/page?x=1", { headers: BROWSER });
    expect(first.status).toBe(200);
    const page = await first.text();
    expect(page).toContain("Continue to the site");
    expect(page).toContain("warned");
    expect(page).toContain("/_burrow/continue?to=%2Fpage%3Fx%3D1");
    const cont = await tunnelFetch(nodes[0]!.edgePort, "warned", "/_burrow/continue?to=%2Fpage%3Fx%3D1", { headers: BROWSER });
    expect(cont.status).toBe(302);
    const cookie = cont.headers.get("set-cookie")!.split(";")[0]!;
    const after = await tunnelFetch(nodes[0]!.edgePort, "warned", "/page?x=1", { headers: { ...BROWSER, cookie } });
    expect(await after.text()).toBe("hello from /page");
    // a script is never warned
    expect(await (await tunnelFetch(nodes[2]!.edgePort, "warned", "/api")).text()).toBe("hello from /api");
  });

  test("a tunnel with basic auth: sign-in first (401, no warning), then the warning, then the service", async () => {
    const api = await signedIn(nodes[0]!);
    const user = await api.createUser("warned-guarded");
    await using _agent = await startAgent({
      kind: "http",
      target: upstream.port!,
      server: nodes[1]!.edgeUrl,
      token: await api.createToken(user),
      args: ["--subdomain", "warned-guarded", "--basic-auth", "visitor:right-password-123"],
    });
    const signIn = { ...BROWSER, authorization: `Basic ${btoa("visitor:right-password-123")}` };
    const anonymous = await tunnelFetch(nodes[0]!.edgePort, "warned-guarded", "/", { headers: BROWSER });
    expect(anonymous.status).toBe(401);
    expect(await anonymous.text()).not.toContain("Continue to the site");
    const signedInVisit = await tunnelFetch(nodes[0]!.edgePort, "warned-guarded", "/", { headers: signIn });
    expect(signedInVisit.status).toBe(200);
    expect(await signedInVisit.text()).toContain("Continue to the site");
    const past = await tunnelFetch(nodes[0]!.edgePort, "warned-guarded", "/", { headers: { ...signIn, cookie: "burrow_skip_warning=1" } });
    expect(await past.text()).toBe("hello from /");
  });
});

describe("the link between nodes", () => {
  test("refuses a stranger without the cluster secret, or with a wrong one", async () => {
    const port = nodes[0]!.edgePort;
    const plain = await fetch(`http://127.0.0.1:${port}${NODE_PATH}`, { headers: { Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13" } });
    expect(plain.status).toBe(401);
    const forged = await fetch(`http://127.0.0.1:${port}${NODE_PATH}`, {
      headers: { Authorization: nodeAuthorization("not-the-secret-at-all-0000", "r2"), Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13" },
    });
    expect(forged.status).toBe(401);
    const stale = await fetch(`http://127.0.0.1:${port}${NODE_PATH}`, {
      headers: { Authorization: nodeAuthorization(SECRET, "r2", Math.floor(Date.now() / 1000) - 3600), Upgrade: "websocket", Connection: "Upgrade", "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version": "13" },
    });
    expect(stale.status).toBe(401);
  });
});

async function totalFor(api: Awaited<ReturnType<typeof signedIn>>, user: number): Promise<number> {
  const rows = (await api.get(`/api/analytics/traffic?user_id=${user}&days=1`)).body as { total: number }[];
  return rows.reduce((n, r) => n + r.total, 0);
}
