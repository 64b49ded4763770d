/**
 * A sign-in an operator's change puts over open WebSocket pipes is checked
 * on the session cookie each pipe's upgrade carried: the pipes whose
 * cookie the new layers take go on, one whose cookie they refuse (forged,
 * or none) is cut. End to end: a real provider (`oidc-provider` on
 * loopback), a real server, agent and service, headless Chromium signing
 * in through the tunnel for the session cookie, WebSockets as the clients.
 *
 * The operator's openid-connect first covers /signin alone (and the
 * sign-in's own paths), where the browser signs in; then the policy is changed to cover every path while
 * three pipes opened under it (not covered then) are open.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { loopbackOnly, signInAtProvider, startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestProvider } from "../harness/oidc-provider.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { openBrowser, type TestBrowser } from "../panel/browser.ts";
import { endsWithin, wsStillEchoes } from "../harness/live-visits.ts";

/** The promise is 5 s; ten times that as the liveness bound. */
const WITHIN_MS = 50_000;
const SUB = "sso-pipes";

const wsEcho = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req, srv) => (srv.upgrade(req) ? undefined : new Response("signed in")),
  websocket: { message: (ws, m) => void ws.send(m) },
});

let server: TestServer;
let api: AdminClient;
let provider: TestProvider;
let browser: TestBrowser;
let token: string;

beforeAll(async () => {
  // the test provider is plain http on loopback, which a server allows only when told to
  server = await startServer({ args: ["--oidc-http-issuers", "loopback"] });
  api = await signedIn(server);
  const userId = await api.createUser("sso-pipes-owner", { skip_warning: true });
  token = await api.createToken(userId);
  provider = await startOidcProvider({ redirectUris: [`http://${SUB}.localhost:${server.edgePort}/_burrow/oidc/callback`], emails: { alice: "alice@example.com" } });
  browser = await openBrowser();
  await loopbackOnly(browser.context);
}, 60_000);
afterAll(async () => {
  await browser?.[Symbol.asyncDispose]();
  await server?.stop();
  await provider?.[Symbol.asyncDispose]();
  wsEcho.stop(true);
});

/** The operator's sign-in; `only`: the expression that limits it to some requests. */
const signIn = (only?: string) => ({
  on_http_request: [
    {
      ...(only ? { expressions: [only] } : {}),
      actions: [{ type: "openid-connect", config: { issuer_url: provider.issuer, client_id: TEST_CLIENT_ID, client_secret: TEST_CLIENT_SECRET, allow_emails: ["@example.com"], auth_id: "corp" } }],
    },
  ],
});

type Pipe = { ws: WebSocket; closed: Promise<void> };

async function pipe(path: string, cookie?: string): Promise<Pipe> {
  const edge = server.edgePort;
  const ws = new WebSocket(`ws://127.0.0.1:${edge}${path}`, { headers: { host: `${SUB}.localhost:${edge}`, ...(cookie ? { cookie } : {}) } } as any);
  const closed = new Promise<void>((resolve) => ws.addEventListener("close", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    ws.addEventListener("open", () => resolve());
    ws.addEventListener("close", () => reject(new Error(`the WebSocket to ${path} did not open`)));
  });
  expect(await wsStillEchoes(ws)).toBe(true);
  return { ws, closed };
}

describe("an operator's sign-in added over open WebSocket pipes checks the session cookie each carried", () => {
  test("the pipe with a good session cookie goes on; one with a forged cookie and one with none are cut", async () => {
    await using _agent = await startAgent({ kind: "http", target: wsEcho.port!, server: server.edgeUrl, token, args: ["--subdomain", SUB, "--no-inspect"] });
    const tunnelUrl = `http://${SUB}.localhost:${server.edgePort}`;
    const made = await api.post("/api/policies", { name: "corp sign-in", policy: signIn("req.url.path.startsWith('/signin') || req.url.path.startsWith('/_burrow/oidc/')") });
    expect(made.status).toBe(201);
    const id: number = made.body.id;
    const pipes: Pipe[] = [];
    try {
      // signs in where the policy asks it now, for the session cookie
      const { page } = browser;
      await page.goto(`${tunnelUrl}/signin`);
      await signInAtProvider(page, provider, "alice");
      await page.waitForURL(`${tunnelUrl}/signin`);
      // a browser is shown the warning once, after the sign-in
      await page.getByRole("link", { name: "Continue to the site" }).click();
      await page.waitForURL(`${tunnelUrl}/signin`);
      expect((await page.locator("body").innerText()).trim()).toBe("signed in");
      const session = (await browser.context.cookies(tunnelUrl)).find((c) => c.name === "burrow_session_corp");
      expect(session).toBeDefined();
      // the same session, its email changed: its seal no longer holds
      const [header, payload, signature] = session!.value.split(".");
      const forgedPayload = Buffer.from(JSON.stringify({ ...JSON.parse(Buffer.from(payload!, "base64url").toString()), email: "boss@example.com" })).toString("base64url");
      const forged = [header, forgedPayload, signature].join(".");
      // three pipes the sign-in does not cover yet
      const good = await pipe("/live", `burrow_session_corp=${session!.value}`);
      const tampered = await pipe("/live", `burrow_session_corp=${forged}`);
      const none = await pipe("/live");
      pipes.push(good, tampered, none);
      // the sign-in now covers every request: each pipe is judged by the cookie its upgrade carried
      const changed = await api.put(`/api/policies/${id}`, { policy: signIn() });
      expect(changed.status).toBe(200);
      expect(await endsWithin(tampered.closed, WITHIN_MS)).toBe(true);
      expect(await endsWithin(none.closed, WITHIN_MS)).toBe(true);
      expect(await wsStillEchoes(good.ws)).toBe(true);
      // a new upgrade without a session is refused (401), one with it is let through
      await expect(pipe("/live")).rejects.toThrow();
      pipes.push(await pipe("/again", `burrow_session_corp=${session!.value}`));
    } finally {
      for (const p of pipes) p.ws.close();
      await api.delete(`/api/policies/${id}`);
    }
  }, 120_000);
});
