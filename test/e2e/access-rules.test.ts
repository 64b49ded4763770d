/**
 * Who may reach a tunnel, end to end: a real server listening on both
 * families (::, so 127.0.0.1, 127.0.0.2 and ::1 are three visitors), one
 * `burrow start` whose burrow.yml asks for basic auth, IP rules and header
 * rules, a `burrow http` that asks the same with flags, visitors driven with
 * the system curl, and refusals of bad settings on the wire.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { jsonPayload } from "../../src/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../../src/protocol/wire.ts";

const PASSWORD = "s3cret:with:colons";
const SECRET_IN_REFUSED_HELLO = "pw-never-echoed-7f3a";
let server: TestServer;
let token: string;
let agent: { proc: Subprocess; output: LineReader };
let tcpPort = 0;
const dir = mkdtempSync(join(tmpdir(), "burrow-access-"));

/** The local service: tells what it was sent. */
const service = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req, srv) {
    if (new URL(req.url).pathname === "/ws" && srv.upgrade(req)) return undefined;
    return Response.json({ headers: Object.fromEntries(req.headers) }, { headers: { "x-frame-options": "SAMEORIGIN" } });
  },
  websocket: { message: (ws, m) => void ws.send(m) },
});
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(`echo:${d}`) } });

beforeAll(async () => {
  // a dual-stack edge; 127.0.0.3 is a proxy whose X-Forwarded-For is believed
  server = await startServer({ args: ["--host", "::", "--trusted-proxies", "127.0.0.3/32"] });
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("gatekeeper"));
  writeFileSync(
    join(dir, "burrow.yml"),
    `server: ${server.edgeUrl}
token: ${token}
tunnels:
  locked:
    proto: http
    addr: 127.0.0.1:${service.port}
    subdomain: acc-locked
    basic_auth: ["alice:${PASSWORD}", "bob:hunter2"]
    request_header_add: ["X-From-Edge: yes"]
    request_header_remove: [X-Secret]
    response_header_add: ["X-Frame-Options: DENY"]
  v4only:
    proto: http
    addr: 127.0.0.1:${service.port}
    subdomain: acc-v4
    skip_warning: true
    allow_cidr: 127.0.0.1/32
  denied:
    proto: http
    addr: 127.0.0.1:${service.port}
    subdomain: acc-deny
    allow_cidr: [127.0.0.0/8, "::1"]
    deny_cidr: ["::1/128", 127.0.0.2]
  echo:
    proto: tcp
    addr: 127.0.0.1:${echo.port}
    deny_cidr: 127.0.0.2
`,
  );
  const proc = Bun.spawn([...burrowCommand(), "start", "--all", "--log", "text", "--no-inspect"], {
    cwd: dir,
    env: { ...process.env, XDG_CONFIG_HOME: join(dir, ".xdg"), BURROW_SERVER: undefined, BURROW_TOKEN: undefined, HTTPS_PROXY: "", ALL_PROXY: "" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  agent = { proc, output: new LineReader(proc) };
  const lines = await Promise.all(["locked", "v4only", "denied"].map((n) => agent.output.waitFor(new RegExp(`Forwarding\\s+${n}\\s`), 15_000)));
  expect(lines).toHaveLength(3);
  tcpPort = Number(/:(\d+) ->/.exec(await agent.output.waitFor(/Forwarding\s+echo\s+\S+:\d+/, 15_000))?.[1]);
});
afterAll(async () => {
  if (agent?.proc.exitCode === null) agent.proc.kill("SIGKILL");
  await server?.stop();
  service.stop(true);
  echo.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

interface CurlAnswer {
  status: number;
  headers: Headers;
  body: string;
}

/** One request with the system curl: `from` is the local address (127.0.0.x) or "::1" to come over IPv6. */
async function curl(sub: string, opts: { from?: string; path?: string; args?: string[] } = {}): Promise<CurlAnswer> {
  const v6 = opts.from === "::1";
  const url = v6 ? `http://[::1]:${server.edgePort}${opts.path ?? "/"}` : `http://127.0.0.1:${server.edgePort}${opts.path ?? "/"}`;
  const proc = Bun.spawn(
    ["curl", "-s", "-i", "--max-time", "5", "-H", `Host: ${sub}.localhost:${server.edgePort}`, ...(opts.from && !v6 ? ["--interface", opts.from] : []), ...(opts.args ?? []), "-g", url],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [out, code] = [await new Response(proc.stdout).text(), await proc.exited];
  if (code !== 0) throw new Error(`curl exited ${code}: ${await new Response(proc.stderr).text()}`);
  const end = out.indexOf("\r\n\r\n");
  const [statusLine, ...headerLines] = out.slice(0, end).split("\r\n");
  const headers = new Headers();
  for (const l of headerLines) headers.append(l.slice(0, l.indexOf(":")), l.slice(l.indexOf(":") + 1).trim());
  return { status: Number(statusLine!.split(" ")[1]), headers, body: out.slice(end + 4) };
}

/** What the local service was sent, from its JSON answer. */
const seen = (a: CurlAnswer): Record<string, string> => JSON.parse(a.body).headers;

describe("basic auth (burrow.yml basic_auth)", () => {
  test("no credentials: 401 with a Basic challenge, and nothing reaches the service", async () => {
    const a = await curl("acc-locked");
    expect(a.status).toBe(401);
    expect(a.headers.get("www-authenticate")).toMatch(/^Basic realm="acc-locked", charset="UTF-8"$/);
    expect(a.body).not.toContain("headers");
  });

  test("a wrong password or an unknown user: 401", async () => {
    expect((await curl("acc-locked", { args: ["-u", "alice:wrong"] })).status).toBe(401);
    expect((await curl("acc-locked", { args: ["-u", `mallory:${PASSWORD}`] })).status).toBe(401);
    expect((await curl("acc-locked", { args: ["-H", "Authorization: Basic !!notbase64"] })).status).toBe(401);
  });

  test("each listed user gets in (a password may hold ':'); the service never sees the tunnel's password", async () => {
    for (const cred of [`alice:${PASSWORD}`, "bob:hunter2"]) {
      const a = await curl("acc-locked", { args: ["-u", cred, "-H", "Accept: application/json"] });
      expect(a.status).toBe(200);
      expect(seen(a).authorization).toBeUndefined();
    }
  });

  test("a browser is asked to sign in before the warning page, and sees the warning after", async () => {
    const browser = ["-H", "User-Agent: Mozilla/5.0", "-H", "Accept: text/html"];
    const before = await curl("acc-locked", { args: browser });
    expect(before.status).toBe(401);
    expect(before.body).not.toContain("served through a tunnel");
    const after = await curl("acc-locked", { args: [...browser, "-u", "bob:hunter2"] });
    expect(after.status).toBe(200);
    expect(after.body).toContain("served through a tunnel");
  });

  test("a WebSocket upgrade without credentials is 401, with them it is carried", async () => {
    const upgrade = (auth?: string) =>
      new Promise<string>((resolve, reject) => {
        const sock = connect({ host: "127.0.0.1", port: server.edgePort }, () =>
          sock.write(
            `GET /ws HTTP/1.1\r\nHost: acc-locked.localhost:${server.edgePort}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
              `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n${auth ? `Authorization: Basic ${btoa(auth)}\r\n` : ""}\r\n`,
          ),
        );
        const timer = setTimeout(() => (sock.destroy(), reject(new Error("no answer to the upgrade"))), 5_000);
        sock.once("data", (d) => {
          clearTimeout(timer);
          sock.destroy();
          resolve(d.toString().split("\r\n")[0]!);
        });
        sock.on("error", reject);
      });
    expect(await upgrade()).toMatch(/^HTTP\/1\.1 401/);
    expect(await upgrade("alice:nope")).toMatch(/^HTTP\/1\.1 401/);
    expect(await upgrade("bob:hunter2")).toMatch(/^HTTP\/1\.1 101/);
  });
});

describe("header rules (request_header_add, request_header_remove, response_header_add)", () => {
  test("the service gets the added header in place of a forged one, not the removed one, and no visitor-sent identity", async () => {
    const a = await curl("acc-locked", {
      args: ["-u", "bob:hunter2", "-H", "X-From-Edge: forged", "-H", "X-Secret: do-not-pass", "-H", "X-Burrow-User-Email: ceo@example.com", "-H", "X-Other: kept"],
    });
    expect(a.status).toBe(200);
    const h = seen(a);
    expect(h["x-from-edge"]).toBe("yes");
    expect(h["x-secret"]).toBeUndefined();
    expect(h["x-burrow-user-email"]).toBeUndefined();
    expect(h["x-other"]).toBe("kept");
    // the response rule replaces the service's own header of that name
    expect(a.headers.get("x-frame-options")).toBe("DENY");
  });

  test("a tunnel without rules passes a visitor's X-Burrow-User-Email on to no one either", async () => {
    const a = await curl("acc-v4", { args: ["-H", "X-Burrow-User-Email: ceo@example.com"] });
    expect(a.status).toBe(200);
    expect(seen(a)["x-burrow-user-email"]).toBeUndefined();
  });
});

describe("IP rules (allow_cidr, deny_cidr) over IPv4 and IPv6 loopback", () => {
  test("allow 127.0.0.1/32: 127.0.0.1 gets in; 127.0.0.2 and ::1 get the 403 page", async () => {
    expect((await curl("acc-v4")).status).toBe(200);
    const other = await curl("acc-v4", { from: "127.0.0.2" });
    expect(other.status).toBe(403);
    expect(other.body).toContain("127.0.0.2");
    expect((await curl("acc-v4", { from: "::1" })).status).toBe(403);
  });

  test("deny wins over allow: 127.0.0.1 gets in, 127.0.0.2 and ::1 (both allowed, both denied) do not", async () => {
    const browser = ["-H", "Accept: application/json"];
    expect((await curl("acc-deny", { args: browser })).status).toBe(200);
    expect((await curl("acc-deny", { from: "127.0.0.2", args: browser })).status).toBe(403);
    expect((await curl("acc-deny", { from: "::1", args: browser })).status).toBe(403);
  });

  test("a visitor's own X-Forwarded-For is not believed; a trusted proxy's is", async () => {
    expect((await curl("acc-v4", { from: "127.0.0.2", args: ["-H", "X-Forwarded-For: 127.0.0.1"] })).status).toBe(403);
    // 127.0.0.3 is --trusted-proxies: it speaks for its client
    expect((await curl("acc-v4", { from: "127.0.0.3", args: ["-H", "X-Forwarded-For: 127.0.0.1"] })).status).toBe(200);
    expect((await curl("acc-v4", { from: "127.0.0.3", args: ["-H", "X-Forwarded-For: 127.0.0.2"] })).status).toBe(403);
  });

  test("a tcp tunnel closes a denied visitor's connection at accept; others are carried", async () => {
    const exchange = (from: string) =>
      new Promise<string>((resolve) => {
        let got = "";
        const sock = connect({ host: "127.0.0.1", port: tcpPort, localAddress: from }, () => sock.write("ping"));
        const timer = setTimeout(() => (sock.destroy(), resolve(`timeout:${got}`)), 5_000);
        sock.on("data", (d) => {
          got += d.toString();
          if (got === "echo:ping") sock.end();
        });
        sock.on("error", () => undefined);
        sock.on("close", () => (clearTimeout(timer), resolve(`closed:${got}`)));
      });
    expect(await exchange("127.0.0.1")).toBe("closed:echo:ping");
    expect(await exchange("127.0.0.2")).toBe("closed:");
  });
});

describe("the same settings as flags of burrow http", () => {
  test("--basic-auth, --allow-cidr, --deny-cidr, --request-header-add/-remove, --response-header-add", async () => {
    await using flagged = await startAgent({
      kind: "http",
      target: `127.0.0.1:${service.port}`,
      server: server.edgeUrl,
      token,
      args: [
        ...["--subdomain", "acc-flags", "--log", "text", "--no-inspect"],
        ...["--basic-auth", "carol:pw-1", "--basic-auth", "dave:pw-2"],
        ...["--allow-cidr", "127.0.0.0/8", "--allow-cidr", "::1", "--deny-cidr", "127.0.0.2"],
        ...["--request-header-add", "X-Team: blue", "--request-header-remove", "Cookie", "--response-header-add", "Cache-Control: no-store"],
      ],
    });
    expect((await curl("acc-flags")).status).toBe(401);
    const a = await curl("acc-flags", { from: "::1", args: ["-u", "dave:pw-2", "-H", "Cookie: a=b"] });
    expect(a.status).toBe(200);
    expect(seen(a)["x-team"]).toBe("blue");
    expect(seen(a).cookie).toBeUndefined();
    expect(a.headers.get("cache-control")).toBe("no-store");
    expect((await curl("acc-flags", { from: "127.0.0.2", args: ["-u", "dave:pw-2"] })).status).toBe(403);
    expect(await flagged.stop()).toBe(0);
  });

  test("a bad flag is the agent's usage error (exit 2) and says which flag, never the password", async () => {
    for (const [args, want] of [
      [["--allow-cidr", "10.0.0.300/8"], /--allow-cidr '10\.0\.0\.300\/8' is not an IPv4 or IPv6/],
      [["--basic-auth", "erin:"], /--basic-auth the basic-auth password of 'erin' is empty/],
      [["--request-header-add", "Host: evil"], /--request-header-add the header Host is set by the edge/],
      [["--oidc-issuer", "https://id.example.com"], /--oidc-issuer needs --oidc-client-id/],
    ] as const) {
      const proc = Bun.spawn([...burrowCommand(), "http", "3000", "--server", server.edgeUrl, "--token", token, "--log", "text", ...args], { stdout: "pipe", stderr: "pipe" });
      const [code, err] = [await proc.exited, await new Response(proc.stderr).text()];
      expect(code).toBe(2);
      expect(err).toMatch(want);
    }
  });
});

describe("the edge checks the settings of every HELLO", () => {
  const hello = (tunnels: unknown[], partial = false) =>
    sayHello({ port: server.edgePort, via: "websocket", from: "127.0.0.5", payload: jsonPayload({ version: PROTOCOL_VERSION, token, tunnels, partial }) });

  test("each bad setting refuses the tunnel with its code, in words that repeat no secret", async () => {
    const cases: [unknown, string][] = [
      [{ protocol: "http", access: { allowCidrs: ["10.0.0.0/33"], basicAuth: [{ user: "u", password: SECRET_IN_REFUSED_HELLO }] } }, "CIDR_INVALID"],
      [{ protocol: "tcp", access: { denyCidrs: ["nope"] } }, "CIDR_INVALID"],
      [{ protocol: "http", access: { basicAuth: [{ user: "u", password: "" }] } }, "BASIC_AUTH_INVALID"],
      [{ protocol: "http", access: { requestHeaderAdd: [["X-Api-Key", `${SECRET_IN_REFUSED_HELLO}\r\nX-Injected: 1`]] } }, "HEADER_RULE_INVALID"],
      [{ protocol: "http", access: { oidc: { issuer: "ftp://id.example.com", clientId: "c", clientSecret: SECRET_IN_REFUSED_HELLO } } }, "OIDC_INVALID"],
      // plain http is refused before anything is fetched (the server was not given --oidc-http-issuers loopback)
      [{ protocol: "http", access: { oidc: { issuer: "http://127.0.0.1:9", clientId: "c", clientSecret: SECRET_IN_REFUSED_HELLO } } }, "OIDC_INVALID"],
      [{ protocol: "http", access: { oidc: { issuer: "https://127.0.0.1:9", clientId: "c", clientSecret: SECRET_IN_REFUSED_HELLO } } }, "OIDC_DISCOVERY_FAILED"],
      // a password in the issuer's URL is refused before anything is fetched, and never quoted back
      [{ protocol: "http", access: { oidc: { issuer: `https://u:${SECRET_IN_REFUSED_HELLO}@127.0.0.1:9`, clientId: "c", clientSecret: "s" } } }, "OIDC_INVALID"],
      [{ protocol: "http", access: { oidc: { issuer: `http://u:${SECRET_IN_REFUSED_HELLO}@id.example.com`, clientId: "c", clientSecret: "s" } } }, "OIDC_INVALID"],
    ];
    for (const [tunnel, code] of cases) {
      const answer = await hello([tunnel]);
      expect(answer.refusal?.code).toBe(code);
      expect(answer.refusal?.message).not.toContain(SECRET_IN_REFUSED_HELLO);
    }
    expect(server.output.text()).not.toContain(SECRET_IN_REFUSED_HELLO);
  });

  test("a HELLO whose access settings do not fit the schema is a protocol error that names the field, not its value", async () => {
    const answer = await hello([{ protocol: "http", access: { basicAuth: [{ user: "u", password: 424242424242 }] } }]);
    expect(answer.refusal?.code).toBe("PROTOCOL_ERROR");
    expect(answer.refusal?.message).toBe("bad HELLO: tunnels.0.access.basicAuth.0.password is not valid");
    expect(server.output.text()).not.toContain("424242424242");
  });

  test("a partial HELLO: the good tunnel is granted (marked access: true), the bad one refused by index", async () => {
    const answer = await hello(
      [
        { protocol: "http", access: { basicAuth: [{ user: "u", password: "p" }] } },
        { protocol: "http", access: { allowCidrs: ["300.1.1.1"] } },
        { protocol: "http" },
      ],
      true,
    );
    expect(answer.type).toBe("READY");
    expect(answer.ready.tunnels.map((t: { index: number; access?: boolean }) => [t.index, t.access ?? false])).toEqual([
      [0, true],
      [2, false],
    ]);
    expect(answer.ready.refused).toEqual([{ index: 1, code: "CIDR_INVALID", message: expect.stringContaining("300.1.1.1") }]);
  });
});
