/**
 * An allow rule is not authentication (the class of Pangolin #1704, where a
 * rule meant to let an address in skipped the sign-in): an allow rule
 * narrows who may try; it never skips authentication, and nothing the docs
 * do not name as a way around sign-in is one. Real agents and the system
 * curl, visitors from 127.0.0.1 (inside every allow list here) and
 * 127.0.0.2 (outside them):
 *
 * - a tunnel's own --allow-cidr with --basic-auth, and with OIDC: an allowed
 *   visitor without credentials gets 401 or the provider's sign-in, by
 *   every method, on an upgrade, with the warning's skip header, on the
 *   warning's continue path; one outside the list gets 403 even with the
 *   password; its own X-Forwarded-For names no address that counts;
 * - a user's allow_cidrs (the admin API) with the tunnel's basic auth or
 *   OIDC, set before the agent connects and changed while it is live;
 * - require_auth: a tunnel that only has an allow list is refused
 *   AUTH_REQUIRED, at the handshake and when the admin turns it on live;
 * - the warning's skips (--skip-warning with the user's skip_warning, and
 *   X-Burrow-Skip-Warning) skip the warning page only;
 * - a tcp tunnel's allow list (its own and the user's): only the allowed
 *   address gets through, and a tcp tunnel never counts as authenticated.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { connect } from "node:net";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, type AgentStart, type TestAgent } from "../harness/agent.ts";
import { startOidcProvider, TEST_CLIENT_ID, TEST_CLIENT_SECRET, type TestProvider } from "../harness/oidc-provider.ts";
import { rawExchange } from "../harness/fuzz.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

setDefaultTimeout(60_000);

const MARKER = "behind-the-allow-list-5e2b";
const PASSWORD = "correct-staple-0921";
const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(`${MARKER}: served`) });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(`echo:${d}`) } });

let server: TestServer;
let api: AdminClient;
let provider: TestProvider;
const agents: TestAgent[] = [];
/** Users by role here: their ids and tokens. */
const users: Record<string, { id: number; token: string }> = {};

const BROWSER = ["-A", "Mozilla/5.0 (X11; Linux x86_64) Firefox/128.0", "-H", "Accept: text/html,application/xhtml+xml"];

async function user(name: string, fields: Record<string, unknown> = {}): Promise<{ id: number; token: string }> {
  const id = await api.createUser(name, fields);
  return (users[name] = { id, token: await api.createToken(id) });
}

function agent(owner: string, kind: AgentStart["kind"], args: string[], env: Record<string, string> = {}): Promise<TestAgent> {
  const target = kind === "tcp" ? echo.port : service.port!;
  return startAgent({ kind, target, server: server.edgeUrl, token: users[owner]!.token, args: [...args, "--no-inspect"], env }).then((a) => (agents.push(a), a));
}

const oidcArgs = () => ["--oidc-issuer", provider.issuer, "--oidc-client-id", TEST_CLIENT_ID];
const OIDC_ENV = { BURROW_OIDC_CLIENT_SECRET: TEST_CLIENT_SECRET };

let tcpOwnPort = 0;
let tcpUserPort = 0;

beforeAll(async () => {
  provider = await startOidcProvider({ redirectUris: ["http://ana-oidc.localhost/_burrow/oidc/callback"], emails: {} });
  server = await startServer({ args: ["--oidc-http-issuers", "loopback"] });
  api = await signedIn(server);
  // the tunnel's own allow list; the warning shown (skip_warning off)
  await user("own-list");
  await agent("own-list", "http", ["--subdomain", "ana-basic", "--allow-cidr", "127.0.0.1/32", "--basic-auth", `alice:${PASSWORD}`]);
  await agent("own-list", "http", ["--subdomain", "ana-oidc", "--allow-cidr", "127.0.0.1/32", ...oidcArgs()], OIDC_ENV);
  // the user's allow list, set before the agent connects; the warning skipped as the docs allow
  await user("user-list", { allow_cidrs: ["127.0.0.1"], skip_warning: true });
  await agent("user-list", "http", ["--subdomain", "ana-user-basic", "--basic-auth", `alice:${PASSWORD}`, "--skip-warning"]);
  await agent("user-list", "http", ["--subdomain", "ana-user-oidc", "--skip-warning", ...oidcArgs()], OIDC_ENV);
  // the user's allow list, set while the tunnels are live
  await user("live-list", { skip_warning: true });
  await agent("live-list", "http", ["--subdomain", "ana-live-basic", "--basic-auth", `alice:${PASSWORD}`, "--skip-warning"]);
  await agent("live-list", "http", ["--subdomain", "ana-live-oidc", "--skip-warning", ...oidcArgs()], OIDC_ENV);
  // tcp: its own allow list, and its user's
  await user("tcp-own");
  tcpOwnPort = (await agent("tcp-own", "tcp", ["--allow-cidr", "127.0.0.2/32"])).port!;
  await user("tcp-user", { allow_cidrs: ["127.0.0.2/32"] });
  tcpUserPort = (await agent("tcp-user", "tcp", [])).port!;
}, 90_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await server?.stop();
  await provider?.[Symbol.asyncDispose]();
  service.stop(true);
  echo.stop(true);
});

interface Answer {
  status: number;
  headers: Headers;
  body: string;
}

/** One request with the system curl from `from` (127.0.0.1 unless said), to the tunnel `sub`. */
async function curl(sub: string, opts: { from?: string; path?: string; args?: string[] } = {}): Promise<Answer> {
  const proc = Bun.spawn(
    ["curl", "-s", "-i", "--max-time", "5", "-H", `Host: ${sub}.localhost:${server.edgePort}`, "--interface", opts.from ?? "127.0.0.1", ...(opts.args ?? []), `http://127.0.0.1:${server.edgePort}${opts.path ?? "/"}`],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [out, code] = [await new Response(proc.stdout).text(), await proc.exited];
  if (code !== 0) throw new Error(`curl exited ${code}: ${await new Response(proc.stderr).text()}`);
  const end = out.indexOf("\r\n\r\n");
  const [statusLine, ...lines] = out.slice(0, end).split("\r\n");
  const headers = new Headers();
  for (const l of lines) headers.append(l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trim());
  return { status: Number(statusLine!.split(" ")[1]), headers, body: out.slice(end + 4) };
}

/** Whether a TCP visitor from `from` gets its bytes echoed (false: closed at accept, nothing through). */
function tcpEchoes(port: number, from: string): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = connect({ host: "127.0.0.1", port, localAddress: from }, () => sock.write("hi"));
    const timer = setTimeout(() => (sock.destroy(), resolve(false)), 5_000);
    sock.on("data", (d: Buffer) => (clearTimeout(timer), sock.destroy(), resolve(d.toString() === "echo:hi")));
    sock.on("error", () => undefined);
    sock.on("close", () => (clearTimeout(timer), resolve(false)));
  });
}

/** The refusal a visitor without credentials gets from a basic-auth tunnel: 401 with the Basic challenge, and none of the service. */
function expectBasicRefusal(a: Answer): void {
  expect(a.status).toBe(401);
  expect(a.headers.get("www-authenticate") ?? "").toStartWith("Basic ");
  expect(a.body).not.toContain(MARKER);
}

/** The refusal a visitor without a session gets from an OIDC tunnel: the provider's sign-in for a browser's page, 401 for anything else. */
function expectSignIn(a: Answer, page: boolean): void {
  if (page) {
    expect(a.status).toBe(302);
    expect(a.headers.get("location") ?? "").toStartWith(`${provider.issuer}/`);
  } else {
    expect(a.status).toBe(401);
  }
  expect(a.body).not.toContain(MARKER);
}

/** Every way a request may come without credentials, from an allowed address. */
const WITHOUT_CREDENTIALS: { label: string; args: string[]; path?: string; page?: boolean }[] = [
  { label: "a GET", args: [] },
  { label: "a browser's page", args: BROWSER, page: true },
  { label: "a HEAD", args: ["-I"] },
  { label: "a POST", args: ["-X", "POST", "-d", "x=1"] },
  { label: "a CORS preflight (OPTIONS)", args: ["-X", "OPTIONS", "-H", "Origin: https://other.example", "-H", "Access-Control-Request-Method: POST"] },
  { label: "the warning's skip header", args: [...BROWSER, "-H", "X-Burrow-Skip-Warning: 1"], page: true },
  { label: "the warning's continue path", args: BROWSER, path: "/_burrow/continue?to=/", page: true },
  { label: "a forwarded-for header naming an allowed address", args: ["-H", "X-Forwarded-For: 127.0.0.1"] },
  { label: "a wrong password", args: ["-u", "alice:wrong-password"] },
];

describe("allow is not auth: a tunnel's own allow list with basic auth", () => {
  for (const way of WITHOUT_CREDENTIALS) {
    test(`an allowed visitor without credentials, ${way.label}: 401, not the service`, async () => {
      const a = await curl("ana-basic", { args: way.args, path: way.path });
      if (way.args.includes("-I")) expect(a.status).toBe(401);
      else expectBasicRefusal(a);
    });
  }

  test("a WebSocket upgrade from an allowed address without credentials: 401, no switch", async () => {
    const r = await rawExchange(server.edgePort, `GET /ws HTTP/1.1\r\nHost: ana-basic.localhost:${server.edgePort}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`, 5_000);
    expect(r.status).toBe(401);
  });

  test("with the password the allowed visitor gets the warning (a browser) or the service; outside the list, 403 even with the password", async () => {
    expect((await curl("ana-basic", { args: ["-u", `alice:${PASSWORD}`] })).body).toContain(MARKER);
    const warned = await curl("ana-basic", { args: [...BROWSER, "-u", `alice:${PASSWORD}`] });
    expect(warned.status).toBe(200);
    expect(warned.body).not.toContain(MARKER);
    expect(warned.body).toContain("/_burrow/continue");
    const outside = await curl("ana-basic", { from: "127.0.0.2", args: ["-u", `alice:${PASSWORD}`] });
    expect(outside.status).toBe(403);
    expect(outside.body).not.toContain(MARKER);
    // a visitor's own X-Forwarded-For does not move it into the list (no --trusted-proxies here)
    expect((await curl("ana-basic", { from: "127.0.0.2", args: ["-u", `alice:${PASSWORD}`, "-H", "X-Forwarded-For: 127.0.0.1"] })).status).toBe(403);
  });
});

describe("allow is not auth: a tunnel's own allow list with OIDC", () => {
  for (const way of WITHOUT_CREDENTIALS) {
    test(`an allowed visitor without a session, ${way.label}: the sign-in or 401, not the service`, async () => {
      const a = await curl("ana-oidc", { args: way.args, path: way.path });
      // a HEAD, a POST and a preflight are not a browser opening a page: 401
      expectSignIn(a, way.page === true);
    });
  }

  test("a forged session cookie from an allowed address: the sign-in, not the service", async () => {
    expectSignIn(await curl("ana-oidc", { args: [...BROWSER, "-H", "Cookie: burrow_session=eyJhbGciOiJIUzI1NiJ9.e30.forged"] }), true);
  });
});

describe("allow is not auth: a user's allow_cidrs with the tunnel's authentication", () => {
  test("set before the agent connected: an allowed visitor without credentials gets 401 (basic) and the sign-in (OIDC)", async () => {
    for (const way of WITHOUT_CREDENTIALS) {
      const basic = await curl("ana-user-basic", { args: way.args, path: way.path });
      if (way.args.includes("-I")) expect(basic.status).toBe(401);
      else expectBasicRefusal(basic);
      expectSignIn(await curl("ana-user-oidc", { args: way.args, path: way.path }), way.page === true);
    }
    // the list still narrows: outside it, 403 whatever the credentials
    expect((await curl("ana-user-basic", { from: "127.0.0.2", args: ["-u", `alice:${PASSWORD}`] })).status).toBe(403);
    expect((await curl("ana-user-basic", { args: ["-u", `alice:${PASSWORD}`] })).body).toContain(MARKER);
  });

  test("changed while the tunnels are live: the new list narrows, the authentication stays", async () => {
    const { id } = users["live-list"]!;
    expectBasicRefusal(await curl("ana-live-basic"));
    expect((await api.put(`/api/users/${id}`, { allow_cidrs: ["127.0.0.1/32"] })).status).toBe(200);
    // applied at once to the live tunnels: the address outside the new list is refused
    await waitUntil(async () => (await curl("ana-live-basic", { from: "127.0.0.2", args: ["-u", `alice:${PASSWORD}`] })).status === 403, 5_000, "the new list on the live tunnel");
    for (const way of WITHOUT_CREDENTIALS) {
      const basic = await curl("ana-live-basic", { args: way.args, path: way.path });
      if (way.args.includes("-I")) expect(basic.status).toBe(401);
      else expectBasicRefusal(basic);
      expectSignIn(await curl("ana-live-oidc", { args: way.args, path: way.path }), way.page === true);
    }
    expect((await curl("ana-live-basic", { args: ["-u", `alice:${PASSWORD}`] })).body).toContain(MARKER);
    // and cleared: authentication still
    expect((await api.put(`/api/users/${id}`, { allow_cidrs: [] })).status).toBe(200);
    await waitUntil(async () => (await curl("ana-live-basic", { from: "127.0.0.2", args: ["-u", `alice:${PASSWORD}`] })).status === 200, 5_000, "the list cleared on the live tunnel");
    expectBasicRefusal(await curl("ana-live-basic", { from: "127.0.0.2" }));
    expectSignIn(await curl("ana-live-oidc", { from: "127.0.0.2", args: BROWSER }), true);
  });
});

describe("allow is not auth: require_auth counts only authentication", () => {
  test("a tunnel with only an allow list (its own, or the user's) is refused AUTH_REQUIRED at the handshake", async () => {
    const strict = await user("must-sign-in", { require_auth: true, allow_cidrs: ["127.0.0.1"] });
    for (const args of [["--allow-cidr", "127.0.0.1/32"], []]) {
      const line = await refusal({ kind: "http", target: service.port!, server: server.edgeUrl, token: strict.token, args });
      expect(line).toContain("AUTH_REQUIRED");
    }
  });

  test("turned on while a tunnel with only an allow list is live: its session is closed AUTH_REQUIRED", async () => {
    const u = await user("turned-strict", { skip_warning: true });
    const a = await agent("turned-strict", "http", ["--subdomain", "ana-only-allow", "--allow-cidr", "127.0.0.1/32", "--skip-warning"]);
    expect((await curl("ana-only-allow")).body).toContain(MARKER);
    expect((await api.put(`/api/users/${u.id}`, { require_auth: true })).status).toBe(200);
    await a.output.waitFor(/AUTH_REQUIRED/, 5_000);
    expect((await curl("ana-only-allow")).body).not.toContain(MARKER);
  });
});

describe("allow is not auth: a tcp tunnel gets only what its allow list says", () => {
  test("its own --allow-cidr: the allowed address gets through, another is closed at accept", async () => {
    expect(await tcpEchoes(tcpOwnPort, "127.0.0.2")).toBe(true);
    expect(await tcpEchoes(tcpOwnPort, "127.0.0.1")).toBe(false);
    expect(await tcpEchoes(tcpOwnPort, "127.0.0.3")).toBe(false);
  });

  test("its user's allow_cidrs: the same", async () => {
    expect(await tcpEchoes(tcpUserPort, "127.0.0.2")).toBe(true);
    expect(await tcpEchoes(tcpUserPort, "127.0.0.1")).toBe(false);
  });
});
