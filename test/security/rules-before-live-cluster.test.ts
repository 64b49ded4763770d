/**
 * Rules before live (the class of ngrok's old ingress controller, which put
 * a route live before its OAuth was applied), on several nodes: two nodes
 * on one PostgreSQL database, the tunnels of rules-before-live.test.ts
 * (basic auth, an IP allow list, OIDC) on one node, visitors without
 * credentials hammering both. A visitor on the other node is relayed to the
 * tunnel's node, which applies the tunnel's rules (cluster/relay.ts: the
 * visitor's node holds no copy of them, so the owning node's are the only
 * ones, and they are never skipped); the address they judge is the one the
 * visitor's node saw. No answer through either node, while the agents
 * connect, while they are away, or when they come back on the other node,
 * is ever the service's body.
 *
 * And the admin's rules for the user (allow_cidrs, require_auth) changed
 * while an agent's handshake is under way, after admission read the user:
 * the tunnel goes live with the change, not with the rules admission read.
 * The handshake is held at that point by a lock on a table admission reads
 * next (PostgreSQL), so the change lands there every time.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { SQL } from "bun";
import { rmSync } from "node:fs";
import { signedIn } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startOidcProvider, type TestProvider } from "../harness/oidc-provider.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil, within } from "../harness/wait.ts";
import { hammerRuled, judge, MARKER, OIDC, refusedAgain, ruledAgents, servedWithRules, serveMarker } from "./ruled-tunnels.ts";
import type { Hammer } from "./visitor-hammer.ts";

setDefaultTimeout(120_000);

const SECRET = "rules-before-live-cluster-secret-0123456789";
const service = serveMarker();
let pg: TestPostgres;
let databaseUrl = "";
let provider: TestProvider;
let nodes: TestServer[] = [];
let token = "";
let agents: TestAgent[] = [];

beforeAll(async () => {
  pg = await startPostgres();
  const url = (databaseUrl = await pg.newDatabase());
  const ports = freeRange(2);
  provider = await startOidcProvider({ redirectUris: [`http://${OIDC}.localhost/_burrow/oidc/callback`], emails: {} });
  nodes = await Promise.all(
    ["rb1", "rb2"].map((id, i) =>
      startServer({
        args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET, "--oidc-http-issuers", "loopback"],
      }),
    ),
  );
  const api = await signedIn(nodes[0]!);
  token = await api.createToken(await api.createUser("rules-first-everywhere", { skip_warning: true }));
}, 90_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await Promise.all(nodes.map((n) => n.stop()));
  await provider?.[Symbol.asyncDispose]();
  service.stop(true);
  await pg?.stop();
});

const startAgentsOn = async (node: TestServer) => (agents = await Promise.all(ruledAgents(node.edgeUrl, token, service.port!, provider.issuer).map((a) => startAgent(a))));

/** One hammer a node, so that each node's answers are judged and waited for on their own. */
function hammerBoth(): Hammer[] {
  return nodes.map((n) => hammerRuled(() => [n.edgePort]));
}

async function untilRefusedOnBoth(hammers: Hammer[], what: string): Promise<void> {
  await Promise.all(hammers.map((h, i) => h.until(refusedAgain(h), 60_000, `${what} through rb${i + 1}`)));
}

async function stopAndJudge(hammers: Hammer[]): Promise<void> {
  await Promise.all(hammers.map((h) => h.stop()));
  for (const h of hammers) judge(h, provider.issuer);
}

describe("rules before live, on two nodes: the owning node's rules for every relayed visitor", () => {
  test("while the agents connect to rb1: visitors on rb1 and relayed from rb2 get only the rules' refusals and the edge's pages", async () => {
    const hammers = hammerBoth();
    try {
      await Promise.all(hammers.map((h) => h.until(() => h.shots.length >= 40, 30_000, "visitors before the agents")));
      const live = hammers.map((h) => refusedAgain(h));
      await startAgentsOn(nodes[0]!);
      await Promise.all(hammers.map((h, i) => h.until(live[i]!, 60_000, `each rule's refusal through rb${i + 1}`)));
    } finally {
      await stopAndJudge(hammers);
    }
    // relayed with the password, and from the allowed address (judged on rb1 as rb2 saw it): served
    await servedWithRules(nodes[1]!.edgePort);
    await servedWithRules(nodes[0]!.edgePort);
  });

  test("while the agents are killed on rb1 and come back on rb2 (their names taken from grace across nodes)", async () => {
    const hammers = hammerBoth();
    try {
      await untilRefusedOnBoth(hammers, "the rules' refusals before the move");
      await Promise.all(agents.map((a) => a.stop("SIGKILL")));
      await startAgentsOn(nodes[1]!);
      await untilRefusedOnBoth(hammers, "each rule's refusal after the move");
    } finally {
      await stopAndJudge(hammers);
    }
    await servedWithRules(nodes[0]!.edgePort);
    await servedWithRules(nodes[1]!.edgePort);
  });
});

describe("rules before live: an admin's change to the user's rules that lands while the handshake is under way", () => {
  /**
   * Holds the agent's handshake between its reading of the user and its
   * tunnels going live: admission reads the user's traffic of the period
   * after the user (a user with a traffic limit), and that table is locked
   * here until `during` is done.
   */
  async function duringHandshake(start: () => void, during: () => Promise<void>): Promise<void> {
    const sql = new SQL(databaseUrl, { max: 2 });
    const lock = await sql.reserve();
    try {
      await lock`BEGIN`;
      await lock`LOCK TABLE traffic_daily IN ACCESS EXCLUSIVE MODE`;
      start();
      const admissionWaits = async () =>
        (await sql`SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ILIKE 'select%traffic_daily%'`)[0].n > 0;
      await waitUntil(admissionWaits, 15_000, "the handshake's admission to wait on the traffic table");
      await during();
    } finally {
      await lock`COMMIT`.catch(() => {});
      lock.release();
      await sql.close();
    }
  }

  test("an allow list set meanwhile is in force from the tunnel's first visitor, on both nodes", async () => {
    const api = await signedIn(nodes[0]!);
    const id = await api.createUser("changed-mid-handshake", { skip_warning: true, traffic_limit: 10 * 2 ** 30 });
    const userToken = await api.createToken(id);
    let starting: Promise<TestAgent> | undefined;
    try {
      await duringHandshake(
        () => void (starting = startAgent({ kind: "http", target: service.port!, server: nodes[0]!.edgeUrl, token: userToken, args: ["--subdomain", "rb-mid", "--skip-warning", "--no-inspect"] })),
        async () => void expect((await api.put(`/api/users/${id}`, { allow_cidrs: ["127.0.0.2/32"] })).status).toBe(200),
      );
      await starting;
      for (const node of nodes) {
        const res = await tunnelFetch(node.edgePort, "rb-mid", "/");
        expect(res.status).toBe(403);
        expect(await res.text()).not.toContain(MARKER);
      }
    } finally {
      await starting?.then((a) => a.stop(), () => {});
    }
  });

  test("require_auth turned on meanwhile: the tunnel without sign-in never serves, its session is closed AUTH_REQUIRED", async () => {
    const api = await signedIn(nodes[0]!);
    const id = await api.createUser("strict-mid-handshake", { skip_warning: true, traffic_limit: 10 * 2 ** 30 });
    const userToken = await api.createToken(id);
    let agent: ReturnType<typeof spawnAgent> | undefined;
    try {
      await duringHandshake(
        () => void (agent = spawnAgent({ kind: "http", target: service.port!, server: nodes[0]!.edgeUrl, token: userToken, args: ["--subdomain", "rb-mid-strict", "--skip-warning", "--no-inspect"] })),
        async () => void expect((await api.put(`/api/users/${id}`, { require_auth: true })).status).toBe(200),
      );
      await agent!.output.waitFor(/AUTH_REQUIRED/, 15_000);
      expect(await within(agent!.proc.exited, 10_000, "the agent to exit")).toBe(1);
      for (const node of nodes) expect(await (await tunnelFetch(node.edgePort, "rb-mid-strict", "/")).text()).not.toContain(MARKER);
    } finally {
      agent?.proc.kill("SIGKILL");
      if (agent) rmSync(agent.home, { recursive: true, force: true });
    }
  });

  /** A change that is no access rule but a right (chisel GHSA-24fp's class at the handshake): the handshake is refused as if it came after it. */
  for (const [what, change, code] of [
    ["http taken out of allowed_protocols", (api: Awaited<ReturnType<typeof signedIn>>, id: number) => api.put(`/api/users/${id}`, { allowed_protocols: "tcp" }), "PROTOCOL_DENIED"],
    ["the token revoked", (api: Awaited<ReturnType<typeof signedIn>>, _id: number, tokenId: number) => api.delete(`/api/tokens/${tokenId}`), "TOKEN_DISABLED"],
  ] as const) {
    test(`${what} meanwhile: the tunnel never goes live, the agent is told ${code}`, async () => {
      const api = await signedIn(nodes[0]!);
      const id = await api.createUser(`mid-${code.toLowerCase().replace("_", "-")}`, { skip_warning: true, traffic_limit: 10 * 2 ** 30 });
      const made = await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
      const sub = `rb-mid-${code.toLowerCase().replace("_", "-")}`;
      let agent: ReturnType<typeof spawnAgent> | undefined;
      try {
        await duringHandshake(
          () => void (agent = spawnAgent({ kind: "http", target: service.port!, server: nodes[0]!.edgeUrl, token: made.body.token as string, args: ["--subdomain", sub, "--skip-warning", "--no-inspect"] })),
          async () => void expect((await change(api, id, made.body.token_id as number)).status).toBeLessThan(300),
        );
        await agent!.output.waitFor(new RegExp(code), 15_000);
        expect(await within(agent!.proc.exited, 10_000, "the agent to exit")).toBe(1);
        for (const node of nodes) expect(await (await tunnelFetch(node.edgePort, sub, "/")).text()).not.toContain(MARKER);
      } finally {
        agent?.proc.kill("SIGKILL");
        if (agent) rmSync(agent.home, { recursive: true, force: true });
      }
    });
  }
});
