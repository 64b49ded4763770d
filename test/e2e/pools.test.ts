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
