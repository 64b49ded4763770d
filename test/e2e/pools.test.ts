/**
 * Pools (`burrow http PORT --subdomain api --pool`, `burrow tcp --remote-port
 * N --pool`): agents of one user behind one name or port, requests or
 * connections spread round robin or to the member with the fewest in
 * flight. Another user's agent, and one not asking to pool, are refused
 * the name; the name stays while any member is there; each member counts
 * toward max_tunnels.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, tunnelFetch } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
let token: string;
let secondToken: string;
let tcpRange: { first: number; last: number };

/** A local service that says its name; `/slow` waits `ms` first. */
function member(name: string, slowMs = 0) {
  return Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    async fetch(req) {
      if (new URL(req.url).pathname === "/slow") await Bun.sleep(slowMs);
      return new Response(name);
    },
  });
}
const a = member("a");
const b = member("b");
const slow = member("slow", 300);

beforeAll(async () => {
  tcpRange = freeRange(4);
  server = await startServer({ args: ["--tcp-ports", `${tcpRange.first}-${tcpRange.last}`] });
  api = await signedIn(server);
  const team = await api.createUser("team", { skip_warning: true, max_tunnels: 3 });
  token = await api.createToken(team, "one");
  secondToken = await api.createToken(team, "two");
});
afterAll(async () => {
  await server?.stop();
  for (const s of [a, b, slow]) s.stop(true);
});

/** The answers to `n` requests to the pool, counted by member. */
async function spread(name: string, n: number, path = "/"): Promise<Record<string, number>> {
  const counts: Record<string, number> = {};
  for (let i = 0; i < n; i++) {
    const text = await (await tunnelFetch(server.edgePort, name, path)).text();
    counts[text] = (counts[text] ?? 0) + 1;
  }
  return counts;
}

describe("an http pool", () => {
  test("two members of one user share the name: 200 requests are spread half and half", async () => {
    await using _one = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token, args: ["--subdomain", "apipool", "--pool", "--skip-warning"] });
    await using _two = await startAgent({ kind: "http", target: b.port!, server: server.edgeUrl, token: secondToken, args: ["--subdomain", "apipool", "--pool", "--skip-warning"] });
    expect(await spread("apipool", 200)).toEqual({ a: 100, b: 100 });
    const rows = ((await api.get("/api/tunnels/active")).body as { subdomain?: string; pool?: boolean; in_rotation?: boolean }[]).filter((t) => t.subdomain === "apipool");
    expect(rows).toEqual([expect.objectContaining({ pool: true, in_rotation: true }), expect.objectContaining({ pool: true, in_rotation: true })]);
  });

  test("another user's agent, and one not asking to pool, are refused the name", async () => {
    await using _one = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token, args: ["--subdomain", "shared", "--pool", "--skip-warning"] });
    const strangerToken = await api.createToken(await api.createUser("stranger"));
    expect(await refusal({ kind: "http", target: b.port!, server: server.edgeUrl, token: strangerToken, args: ["--subdomain", "shared", "--pool"] })).toMatch(/SUBDOMAIN_TAKEN/);
    expect(await refusal({ kind: "http", target: b.port!, server: server.edgeUrl, token: secondToken, args: ["--subdomain", "shared"] })).toMatch(/SUBDOMAIN_TAKEN/);
  });

  test("the name stays while any member is there; the last gone, it is free", async () => {
    const one = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token, args: ["--subdomain", "staying", "--pool", "--skip-warning"] });
    await using _two = await startAgent({ kind: "http", target: b.port!, server: server.edgeUrl, token: secondToken, args: ["--subdomain", "staying", "--pool", "--skip-warning"] });
    expect(await one.stop()).toBe(0);
    expect(await spread("staying", 10)).toEqual({ b: 10 });
  });

  test("least-requests sends new requests away from a member still busy with slow ones", async () => {
    await using _fast = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token, args: ["--subdomain", "least", "--pool", "--pool-balance", "least-requests", "--skip-warning"] });
    await using _slow = await startAgent({ kind: "http", target: slow.port!, server: server.edgeUrl, token: secondToken, args: ["--subdomain", "least", "--pool", "--skip-warning"] });
    // four slow requests at once: two stay in flight on the slow member for 300 ms...
    const held = Promise.all(Array.from({ length: 4 }, async () => (await tunnelFetch(server.edgePort, "least", "/slow")).text()));
    await Bun.sleep(100);
    // ...and meanwhile every new request goes to the member with none in flight
    const meanwhile: string[] = [];
    for (let i = 0; i < 8; i++) meanwhile.push(await (await tunnelFetch(server.edgePort, "least", "/")).text());
    expect(meanwhile).toEqual(Array(8).fill("a"));
    expect((await held).sort()).toEqual(["a", "a", "slow", "slow"]);
  });

  test("each member counts toward max_tunnels", async () => {
    await using _one = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token, args: ["--subdomain", "counted", "--pool", "--skip-warning"] });
    await using _two = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token, args: ["--subdomain", "counted", "--pool", "--skip-warning"] });
    await using _three = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token: secondToken, args: ["--subdomain", "counted", "--pool", "--skip-warning"] });
    expect(await refusal({ kind: "http", target: a.port!, server: server.edgeUrl, token: secondToken, args: ["--subdomain", "counted", "--pool"] })).toMatch(/TUNNEL_LIMIT/);
  });
});

describe("health and rolling restarts", () => {
  test("a failing health check takes a member out of rotation (the list says so) and back in after it recovers", async () => {
    let sick = false;
    const ailing = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req) => (new URL(req.url).pathname === "/healthz" ? new Response(sick ? "no" : "ok", { status: sick ? 503 : 200 }) : new Response("ailing")),
    });
    try {
      await using _well = await startAgent({ kind: "http", target: a.port!, server: server.edgeUrl, token, args: ["--subdomain", "health", "--pool", "--skip-warning"] });
      await using ill = await startAgent({ kind: "http", target: ailing.port!, server: server.edgeUrl, token: secondToken, args: ["--subdomain", "health", "--pool", "--health-check", "/healthz", "--health-interval", "1", "--skip-warning"] });
      expect(await spread("health", 10)).toEqual({ a: 5, ailing: 5 });
      sick = true;
      // two failed checks a second apart: out within a few seconds (15 s is the promise)
      await ill.output.waitFor(/out of the pool's rotation \(the health check answered 503\)/, 15_000);
      const deadline = Date.now() + 5_000;
      let answers = await spread("health", 10);
      while (answers.ailing && Date.now() < deadline) answers = await spread("health", 10);
      expect(answers).toEqual({ a: 10 });
      const rows = ((await api.get("/api/tunnels/active")).body as { subdomain?: string; in_rotation?: boolean }[]).filter((t) => t.subdomain === "health");
      expect(rows.map((r) => r.in_rotation).sort()).toEqual([false, true]);
      sick = false;
      await ill.output.waitFor(/back in the pool's rotation/, 15_000);
      const back = Date.now() + 5_000;
      answers = await spread("health", 10);
      while (!answers.ailing && Date.now() < back) answers = await spread("health", 10);
      expect(answers).toEqual({ a: 5, ailing: 5 });
    } finally {
      ailing.stop(true);
    }
  }, 60_000);

  test("a rolling restart of both members under continuous load: not one request fails", async () => {
    const start = (target: number, t: string) => startAgent({ kind: "http", target, server: server.edgeUrl, token: t, args: ["--subdomain", "rolling", "--pool", "--skip-warning"] });
    let one = await start(a.port!, token);
    let two = await start(b.port!, secondToken);
    let sent = 0;
    let failed = 0;
    const failures: string[] = [];
    let restarting = true;
    // four clients asking in a loop: 2,000 requests at least, and as many as the restarts take (20,000 at most)
    const load = Promise.all(
      Array.from({ length: 4 }, async () => {
        while ((restarting || sent < 2000) && sent < 20_000) {
          sent++;
          try {
            const res = await tunnelFetch(server.edgePort, "rolling", "/");
            const text = await res.text();
            if (res.status !== 200 || (text !== "a" && text !== "b")) {
              failed++;
              failures.push(`${res.status} ${text.slice(0, 80)}`);
            }
          } catch (err) {
            failed++;
            failures.push(String(err));
          }
        }
      }),
    );
    await Bun.sleep(300);
    // one member after the other: stopped (it leaves the rotation, finishes, disconnects), then started again
    expect(await one.stop()).toBe(0);
    one = await start(a.port!, token);
    await Bun.sleep(300);
    expect(await two.stop()).toBe(0);
    two = await start(b.port!, secondToken);
    await Bun.sleep(300);
    restarting = false;
    await load;
    await one.stop();
    await two.stop();
    expect(failures).toEqual([]);
    expect(failed).toBe(0);
    expect(sent).toBeGreaterThanOrEqual(2000);
  }, 60_000);
});

describe("a tcp pool", () => {
  test("connections to the port are spread over its members; --pool needs --remote-port", async () => {
    const echo = (name: string) => Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.end(name), data() {} } });
    const one = echo("one");
    const two = echo("two");
    try {
      const port = tcpRange.first + 1;
      await using _a = await startAgent({ kind: "tcp", target: one.port, server: server.edgeUrl, token, args: ["--remote-port", String(port), "--pool"] });
      await using _b = await startAgent({ kind: "tcp", target: two.port, server: server.edgeUrl, token: secondToken, args: ["--remote-port", String(port), "--pool"] });
      const said: string[] = [];
      for (let i = 0; i < 10; i++) {
        const { promise, resolve } = Promise.withResolvers<string>();
        let got = "";
        await Bun.connect({ hostname: "127.0.0.1", port, socket: { data: (_s, d) => void (got += d.toString()), close: () => resolve(got), error: () => resolve(got) } });
        said.push(await promise);
      }
      expect(said.filter((x) => x === "one").length).toBe(5);
      expect(said.filter((x) => x === "two").length).toBe(5);
    } finally {
      one.stop(true);
      two.stop(true);
    }
    expect(await refusal({ kind: "tcp", target: 5432, server: server.edgeUrl, token, args: ["--pool"] }).catch((e) => String(e))).toContain("needs --remote-port");
  });
});
