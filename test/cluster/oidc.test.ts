/**
 * OpenID Connect sign-in on several nodes: nodes sharing a --cluster-secret
 * derive the session keys from it, so a visitor signed in while the agent
 * was on one node stays signed in when the agent moves to another. A real provider (oidc-provider),
 * headless Chromium, two nodes on one PostgreSQL database.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type AgentStart } from "../harness/agent.ts";
import { loopbackOnly, signInAtProvider, startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestProvider } from "../harness/oidc-provider.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";

const SECRET = "oidc-cluster-secret-for-tests-0123456789";
const SUB = "sso-moving";
let pg: TestPostgres;
let nodes: TestServer[] = [];
let provider: TestProvider;
let browser: TestBrowser;
let token = "";

const service = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => Response.json({ email: req.headers.get("x-burrow-user-email") }),
});

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["o1", "o2"].map((id, i) =>
      startServer({
        args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET, "--oidc-http-issuers", "loopback"],
      }),
    ),
  );
  provider = await startOidcProvider({
    redirectUris: nodes.map((n) => `http://${SUB}.localhost:${n.edgePort}/_burrow/oidc/callback`),
    emails: { alice: "alice@example.com" },
  });
  const api = await signedIn(nodes[0]!);
  token = await api.createToken(await api.createUser("sso-mover", { skip_warning: true }));
  browser = await openBrowser();
  await loopbackOnly(browser.context);
}, 60_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await provider?.[Symbol.asyncDispose]();
  await Promise.all(nodes.map((n) => n.stop()));
  service.stop(true);
  await pg?.stop();
});

const agentOn = (node: TestServer): AgentStart => ({
  kind: "http",
  target: `127.0.0.1:${service.port}`,
  server: node.edgeUrl,
  token,
  args: ["--subdomain", SUB, "--skip-warning", "--no-inspect", "--oidc-issuer", provider.issuer, "--oidc-client-id", TEST_CLIENT_ID],
  env: { BURROW_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET },
});

test("signed in while the agent was on o1, still signed in after it moved to o2; a stranger is not", async () => {
  const [o1, o2] = nodes as [TestServer, TestServer];
  let session = "";
  {
    await using _first = await startAgent(agentOn(o1));
    const { page, context } = browser;
    await page.goto(`http://${SUB}.localhost:${o1.edgePort}/`);
    await signInAtProvider(page, provider, "alice");
    await page.waitForURL(`http://${SUB}.localhost:${o1.edgePort}/`, { timeout: 10_000 });
    expect(JSON.parse((await page.locator("body").innerText()).trim())).toEqual({ email: "alice@example.com" });
    session = (await context.cookies(`http://${SUB}.localhost:${o1.edgePort}`)).find((c) => c.name === "burrow_session")?.value ?? "";
    expect(session).not.toBe("");
  }
  // the agent leaves o1 (Ctrl-C frees its name at once) and comes back on o2
  await using _second = await startAgent(agentOn(o2));
  // the same address as before (a session is for its host, port included: behind a balancer every
  // node has the same), now relayed by o1 to o2, which checks the cookie o1 made
  const res = await tunnelFetch(o1.edgePort, SUB, "/", { headers: { cookie: `burrow_session=${session}` } });
  expect(res.status).toBe(200);
  expect(await res.json()).toEqual({ email: "alice@example.com" });
  const stranger = await tunnelFetch(o1.edgePort, SUB, "/", { headers: { accept: "application/json" } });
  expect(stranger.status).toBe(401);
  expect(provider.tokenRequests).toBe(1);
}, 60_000);
