/**
 * Rules before live (the class of ngrok's old ingress controller, which put
 * a route live before its OAuth was applied): a tunnel never answers before
 * its access rules are in force. Three tunnels of real agents, one with
 * basic auth, one with an IP allow list the visitors are outside of, one
 * with OIDC sign-in (a real provider on loopback), are hammered by visitors
 * without credentials while the agents connect, while they reconnect (the
 * process killed and started again: the name taken back from grace), and
 * across a server restart (agents told DRAIN come back on the next server,
 * which holds their names: restart-holds.ts). Every answer must be the
 * rule's refusal (401, 403, the provider's sign-in) or a page of the edge
 * (404, 502, 503), never the service's body; and with credentials, or from
 * the allowed address, the service answers, so the tunnels were live.
 *
 * The same across nodes is in rules-before-live-cluster.test.ts.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { rmSync } from "node:fs";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { startOidcProvider, type TestProvider } from "../harness/oidc-provider.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil, within } from "../harness/wait.ts";
import { BASIC, hammerRuled, IP, judge, OIDC, refusedAgain, ruledAgents, servedWithRules, serveMarker } from "./ruled-tunnels.ts";
import { of } from "./visitor-hammer.ts";

setDefaultTimeout(120_000);

const service = serveMarker();
let provider: TestProvider;
let server: TestServer;
let token = "";
let adminCookie = "";
let agents: TestAgent[] = [];
const dataDirs: string[] = [];

beforeAll(async () => {
  provider = await startOidcProvider({ redirectUris: [`http://${OIDC}.localhost/_burrow/oidc/callback`], emails: {} });
  server = await startServer({ keepDataDir: true, args: ["--oidc-http-issuers", "loopback"] });
  dataDirs.push(server.dataDir);
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("rules-first", { skip_warning: true }));
  adminCookie = api.cookie!;
}, 60_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await server?.stop();
  await provider?.[Symbol.asyncDispose]();
  service.stop(true);
  for (const d of dataDirs) rmSync(d, { recursive: true, force: true });
});

const startAgents = async () => (agents = await Promise.all(ruledAgents(server.edgeUrl, token, service.port!, provider.issuer).map((a) => startAgent(a))));
/** Visitors at the server's port (read at each request: the next server of a restart takes the same). */
const hammerTunnels = () => hammerRuled(() => [server.edgePort]);

/** Agents connected to the edge now, by its metrics. */
async function agentsConnected(): Promise<number> {
  const e = await scrape(server.adminUrl, { cookie: adminCookie });
  return sample(e, 'burrow_agents_connected{transport="direct"}') + sample(e, 'burrow_agents_connected{transport="websocket"}');
}

describe("rules before live: no instant without the rules", () => {
  test("while the agents connect: visitors get 404, then the rules' refusals, never the service", async () => {
    const hammer = hammerTunnels();
    try {
      // visitors are there before any agent
      await hammer.until(() => hammer.shots.length >= 40, 30_000, "visitors before the agents");
      const live = refusedAgain(hammer);
      await startAgents();
      await hammer.until(live, 60_000, "each rule's refusal once the tunnels are live");
    } finally {
      await hammer.stop();
      judge(hammer, provider.issuer);
    }
    const shots = hammer.shots;
    for (const name of [BASIC, IP, OIDC]) expect(of(shots, name)[0]!.status).toBe(404);
    await servedWithRules(server.edgePort);
  });

  test("across an agent's reconnect (killed, started again, its name taken back from grace)", async () => {
    const hammer = hammerTunnels();
    try {
      await Promise.all(agents.map((a) => a.stop("SIGKILL")));
      // the edge has seen them go: their names are held in grace, with their rules still answering
      await waitUntil(async () => (await agentsConnected()) === 0, 30_000, "the edge to see the agents gone");
      await hammer.until(refusedAgain(hammer, 5), 30_000, "the rules' refusals while the agents are away");
      const back = refusedAgain(hammer);
      await startAgents();
      await hammer.until(back, 60_000, "each rule's refusal once the agents are back");
    } finally {
      await hammer.stop();
      judge(hammer, provider.issuer);
    }
    await servedWithRules(server.edgePort);
  });

  test("across a server restart: the next server holds the names, the agents come back to them with their rules", async () => {
    const first = server;
    const adminPort = new URL(first.adminUrl).port;
    const hammer = hammerTunnels();
    try {
      await hammer.until(refusedAgain(hammer, 5), 30_000, "the rules' refusals before the restart");
      first.proc.kill("SIGTERM");
      await first.output.waitFor(/told agents to connect again agents=3/, 10_000);
      // the successor takes the same ports and data while the first still drains
      server = await startServer({ dataDir: first.dataDir, args: ["--http-port", String(first.edgePort), "--agent-port", String(first.agentPort), "--admin-port", adminPort, "--oidc-http-issuers", "loopback"] });
      await server.output.waitFor(/holding names for the agents of the server before names=3/, 10_000);
      await within(first.stop(), 15_000, "the first server to exit");
      await within(
        (async () => {
          while (!agents.every((a) => (a.output.text().match(/Forwarding/g) ?? []).length >= 2)) await Bun.sleep(20);
        })(),
        30_000,
        "every agent's second Forwarding, on the new server",
      );
      await hammer.until(refusedAgain(hammer), 60_000, "each rule's refusal on the new server");
    } finally {
      await hammer.stop();
      judge(hammer, provider.issuer);
    }
    await servedWithRules(server.edgePort);
  });
});
