/**
 * A documented secret setting that is never read (chisel CVE-2024-43798:
 * an environment variable documented to set the server's credentials, which
 * the server never read, so it ran without any). For every flag, variable
 * and file that sets a secret, the server or the agent is started with it,
 * and the secret is shown to be enforced: the wrong one is refused, the
 * right one accepted. A value that cannot be parsed fails closed: the
 * program refuses to start, with a message naming the setting and never
 * the value, rather than run without the secret.
 *
 * The server's: BURROW_ADMIN_PASSWORD, --metrics-token / BURROW_METRICS_TOKEN,
 * --cluster-secret / BURROW_CLUSTER_SECRET, the password in --database /
 * BURROW_DATABASE_URL, admin API keys. The agent's: its token from --token,
 * BURROW_TOKEN, burrow login's config.json and burrow.yml's `token:`; a
 * tunnel's basic auth from --basic-auth, BURROW_BASIC_AUTH and burrow.yml's
 * `basic_auth`. The OpenID client secrets (the portal's, a tunnel's) are in
 * secret-settings-oidc.test.ts, signing in with a browser.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { LineReader } from "../harness/lines.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { nodeAuthorization } from "../../src/cluster/node-auth.ts";
import { NODE_PATH } from "../../src/protocol/wire.ts";

const dirs: string[] = [];
const tempDir = (what: string) => {
  const d = mkdtempSync(join(tmpdir(), `burrow-secret-${what}-`));
  dirs.push(d);
  return d;
};
afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** Every variable that sets a secret, blanked: only what a test gives counts (blank is unset to burrow). */
const NO_SECRETS = {
  BURROW_ADMIN_PASSWORD: "",
  BURROW_METRICS_TOKEN: "",
  BURROW_CLUSTER_SECRET: "",
  BURROW_DATABASE_URL: "",
  BURROW_TOKEN: "",
  BURROW_SERVER: "",
  BURROW_BASIC_AUTH: "",
  BURROW_OIDC_CLIENT_SECRET: "",
  BURROW_PORTAL_OIDC_CLIENT_SECRET: "",
  HTTPS_PROXY: "",
  ALL_PROXY: "",
  https_proxy: "",
  all_proxy: "",
};

interface Run {
  /** The process's exit code, or "running" once it came up (its ready line). */
  outcome: number | "running";
  text: string;
  stop(): Promise<void>;
}

/** `burrow <args>` until it says `ready` or exits (20 s at most); stop() ends it. */
async function run(args: string[], ready: RegExp, opts: { env?: Record<string, string>; cwd?: string } = {}): Promise<Run> {
  const home = tempDir("home");
  const proc = Bun.spawn([...burrowCommand(), ...args], {
    cwd: opts.cwd,
    env: { ...process.env, ...NO_SECRETS, XDG_CONFIG_HOME: home, ...opts.env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = new LineReader(proc);
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGINT");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
    await proc.exited;
    clearTimeout(timer);
  };
  const killer = setTimeout(() => proc.kill("SIGKILL"), 20_000);
  // the ready line, or the exit (a wait for the line ends with the process, before its code is known)
  const came = await output.waitFor(ready, 20_000).then(
    () => true,
    () => false,
  );
  const outcome = came ? ("running" as const) : await proc.exited;
  clearTimeout(killer);
  if (outcome !== "running") await output.closed();
  return { outcome, text: output.text(), stop };
}

/** `burrow server` on ephemeral ports with a fresh data dir (or `dataDir`), up to its ready line or its exit. */
const server = (args: string[], env: Record<string, string> = {}, dataDir = tempDir("data")) =>
  run(["server", "--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--agent-port", "0", "--data-dir", dataDir, ...args], /admin api listening/, { env });

/** A refused start: exit `code`, a message that names `setting`, and `value` nowhere. */
function expectRefused(r: Run, code: number, setting: string, value: string): void {
  expect(r.outcome).toBe(code);
  expect(r.text).toContain(setting);
  expect(r.text).not.toContain(value);
}

describe("a documented secret setting never read: the server's", () => {
  test("BURROW_ADMIN_PASSWORD: the first admin signs in with it and nothing else; on a later start a value that no longer signs in is warned about, and one the server would not take stops it", async () => {
    const dataDir = tempDir("admin-pw");
    {
      await using s = await startServer({ dataDir, keepDataDir: true, env: { BURROW_ADMIN_PASSWORD: "chosen-admin-password-1" } });
      expect((await new AdminClient(s.adminUrl).login("admin", "chosen-admin-password-1")).status).toBe(200);
      expect((await new AdminClient(s.adminUrl).login("admin", "chosen-admin-password-2")).status).toBe(401);
      expect(s.output.text()).not.toContain("chosen-admin-password-1");
    }
    {
      await using s = await startServer({ dataDir, keepDataDir: true, env: { BURROW_ADMIN_PASSWORD: "another-admin-password" } });
      await s.output.waitFor(/BURROW_ADMIN_PASSWORD is set but does not sign in an admin/, 5_000);
      expect(s.output.text()).not.toContain("another-admin-password");
      expect((await new AdminClient(s.adminUrl).login("admin", "another-admin-password")).status).toBe(401);
      expect((await new AdminClient(s.adminUrl).login("admin", "chosen-admin-password-1")).status).toBe(200);
    }
    {
      // the value it holds signs the admin in: nothing to say
      await using s = await startServer({ dataDir, keepDataDir: true, env: { BURROW_ADMIN_PASSWORD: "chosen-admin-password-1" } });
      expect(s.output.text()).not.toContain("BURROW_ADMIN_PASSWORD");
    }
    expectRefused(await server([], { BURROW_ADMIN_PASSWORD: "7-chars" }, dataDir), 2, "BURROW_ADMIN_PASSWORD", "7-chars");
    expectRefused(await server([], { BURROW_ADMIN_PASSWORD: "x".repeat(2000) }, tempDir("data")), 2, "BURROW_ADMIN_PASSWORD", "x".repeat(2000));
  }, 60_000);

  test("--metrics-token and BURROW_METRICS_TOKEN: /metrics with the token, not with another; a token the server would not take stops it", async () => {
    for (const given of [{ args: ["--metrics-token", "metrics-token-from-flag-0123"], env: {}, token: "metrics-token-from-flag-0123" }, { args: [], env: { BURROW_METRICS_TOKEN: "metrics-token-from-env-0123" }, token: "metrics-token-from-env-0123" }]) {
      await using s = await startServer({ args: given.args, env: given.env });
      const scrape = (token: string) => fetch(`${s.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${token}` } }).then((r) => r.status);
      expect(await scrape(given.token)).toBe(200);
      expect(await scrape(`${given.token}x`)).toBe(401);
      expect(await scrape("metrics-token-that-was-never-set")).toBe(401);
      expect((await fetch(`${s.adminUrl}/metrics`)).status).toBe(401);
    }
    expectRefused(await server(["--metrics-token", "too-short"]), 2, "--metrics-token", "too-short");
    expectRefused(await server([], { BURROW_METRICS_TOKEN: "has a space in it, 0123" }), 2, "--metrics-token", "has a space in it");
  }, 60_000);

  test("admin API keys: a key works as its admin; a wrong or malformed key is 401, and never falls back to the session cookie beside it", async () => {
    await using s = await startServer();
    const admin = await signedIn(s);
    const key = (await admin.post("/api/keys", { name: "script" })).body.key as string;
    const withKey = (k: string, cookie?: string) => fetch(`${s.adminUrl}/api/users`, { headers: { Authorization: `Bearer ${k}`, ...(cookie ? { Cookie: cookie } : {}) } }).then((r) => r.status);
    expect(await withKey(key)).toBe(200);
    expect(await withKey(`${key.slice(0, -1)}${key.endsWith("A") ? "B" : "A"}`)).toBe(401);
    expect(await withKey("brk_short")).toBe(401);
    expect(await withKey(`${key.slice(0, -1)}!`, admin.cookie)).toBe(401);
  }, 30_000);
});

describe("a documented secret setting never read: the server's, on PostgreSQL", () => {
  let pg: TestPostgres;
  let url: string;
  beforeAll(async () => {
    pg = await startPostgres();
    url = await pg.newDatabase();
  }, 60_000);
  afterAll(async () => {
    await pg?.stop();
  });

  test("--cluster-secret and BURROW_CLUSTER_SECRET: another node's link is taken with an HMAC under the secret and refused under another; a secret the server would not take stops it", async () => {
    for (const given of [{ args: ["--cluster-secret", "cluster-secret-from-flag-0123"], env: {}, secret: "cluster-secret-from-flag-0123" }, { args: [], env: { BURROW_CLUSTER_SECRET: "cluster-secret-from-env-0123" }, secret: "cluster-secret-from-env-0123" }]) {
      await using s = await startServer({ args: ["--database", url, "--node-id", "n1", ...given.args], env: given.env });
      const link = async (authorization?: string) => {
        const head =
          `GET ${NODE_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${s.edgePort}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${btoa("0123456789abcdef")}\r\nSec-WebSocket-Version: 13\r\n${authorization ? `Authorization: ${authorization}\r\n` : ""}\r\n`;
        return (await rawHttp(s.edgePort, head, 2_000)).status;
      };
      expect(await link(nodeAuthorization(given.secret, "n2"))).toBe(101);
      expect(await link(nodeAuthorization("not-the-cluster-secret-0123", "n2"))).toBe(401);
      expect(await link(nodeAuthorization(`${given.secret}x`, "n2"))).toBe(401);
      expect(await link()).toBe(401);
    }
    expectRefused(await server(["--database", url, "--cluster-secret", "short-secret"]), 2, "--cluster-secret", "short-secret");
    expectRefused(await server(["--database", url], { BURROW_CLUSTER_SECRET: "tab\there-cluster-secret" }), 2, "--cluster-secret", "tab\there");
    // without a database there is no cluster to keep it for: said, not ignored
    expectRefused(await server([], { BURROW_CLUSTER_SECRET: "cluster-secret-without-db-0123" }), 2, "--cluster-secret", "cluster-secret-without-db-0123");
  }, 90_000);

  test("--database and BURROW_DATABASE_URL: the right password starts the server, a wrong one stops it saying so, the password never shown; a URL it cannot read stops it", async () => {
    const wrong = url.replace(/:\/\/([^:]+):([^@]+)@/, "://$1:not-the-password-0123@");
    expect(wrong).not.toBe(url);
    for (const given of [{ args: ["--database", wrong], env: {} as Record<string, string> }, { args: [], env: { BURROW_DATABASE_URL: wrong } }]) {
      const r = await server(given.args, given.env);
      await r.stop();
      expect(r.outcome).toBe(1);
      expect(r.text).toMatch(/password|authentication/i);
      expect(r.text).not.toContain("not-the-password-0123");
    }
    const right = await server([], { BURROW_DATABASE_URL: url });
    await right.stop();
    expect(right.outcome).toBe("running");
    expectRefused(await server(["--database", "mysql://user:secret-db-password@host/db"]), 2, "--database", "secret-db-password");
  }, 90_000);
});

describe("a documented secret setting never read: the agent's", () => {
  let s: TestServer;
  let admin: AdminClient;
  let token: string;
  let revoked: string;
  const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("the service") });

  beforeAll(async () => {
    s = await startServer();
    admin = await signedIn(s);
    const userId = await admin.createUser("agent-owner", { max_tunnels: 0, skip_warning: true });
    token = await admin.createToken(userId, "good");
    revoked = await admin.createToken(userId, "revoked");
    const tokens = (await admin.get(`/api/users/${userId}/tokens`)).body as { id: number; device_name: string }[];
    await admin.delete(`/api/tokens/${tokens.find((t) => t.device_name === "revoked")!.id}`);
  });
  afterAll(async () => {
    service.stop(true);
    await s?.stop();
  });

  const FORWARDING = /Forwarding\s+(\S+)/;
  const http = (args: string[], env: Record<string, string> = {}, cwd?: string) => run(["http", String(service.port), "--no-inspect", ...args], FORWARDING, { env, cwd });

  /** A burrow.yml in a directory of its own, for `burrow start`. */
  function project(yml: string): string {
    const cwd = tempDir("project");
    writeFileSync(join(cwd, "burrow.yml"), yml);
    return cwd;
  }

  test("the token from --token, BURROW_TOKEN, burrow login's file and burrow.yml: the right one connects, a wrong or revoked one is refused; a file that cannot be read stops the agent", async () => {
    const viaFlag = (t: string) => http(["--server", s.edgeUrl, "--token", t]);
    const viaEnv = (t: string) => http([], { BURROW_SERVER: s.edgeUrl, BURROW_TOKEN: t });
    const viaLogin = async (t: string) => {
      const home = tempDir("login-home");
      mkdirSync(join(home, "burrow"), { recursive: true });
      writeFileSync(join(home, "burrow", "config.json"), JSON.stringify({ server: s.edgeUrl, token: t }), { mode: 0o600 });
      return http([], { XDG_CONFIG_HOME: home });
    };
    const viaYml = (t: string) => run(["start", "--all"], FORWARDING, { cwd: project(`server: ${s.edgeUrl}\ntoken: ${t}\ntunnels:\n  web:\n    proto: http\n    addr: ${service.port}\n`) });
    for (const [how, start] of [["--token", viaFlag], ["BURROW_TOKEN", viaEnv], ["config.json", viaLogin], ["burrow.yml", viaYml]] as const) {
      const good = await start(token);
      await good.stop();
      expect({ how, outcome: good.outcome }).toEqual({ how, outcome: "running" });
      for (const [bad, code] of [[`brw_${"x".repeat(43)}`, "AUTH_FAILED"], [revoked, "TOKEN_DISABLED"], ["not-a-token", "AUTH_FAILED"]] as const) {
        const r = await start(bad);
        await r.stop();
        expect({ how, outcome: r.outcome }).toEqual({ how, outcome: 1 });
        expect(r.text).toContain(code);
      }
    }
    // a login file that is not one: the agent says which file, and does not go on without a token
    const home = tempDir("bad-login-home");
    mkdirSync(join(home, "burrow"), { recursive: true });
    writeFileSync(join(home, "burrow", "config.json"), `{"server": "${s.edgeUrl}", "token": 42}`, { mode: 0o600 });
    const r = await http([], { XDG_CONFIG_HOME: home });
    expect(r.outcome).toBe(2);
    expect(r.text).toContain("config.json");
  }, 120_000);

  test("a tunnel's basic auth from --basic-auth, BURROW_BASIC_AUTH and burrow.yml: visitors need the pair, a wrong one is 401; a pair that cannot be read stops the agent, the password never shown", async () => {
    const creds = `Basic ${btoa("alice:s3cret-pass")}`;
    const wrong = `Basic ${btoa("alice:s3cret-pasx")}`;
    const cases = [
      ["--basic-auth", (sub: string) => http(["--server", s.edgeUrl, "--token", token, "--subdomain", sub, "--basic-auth", "alice:s3cret-pass"])],
      ["BURROW_BASIC_AUTH", (sub: string) => http(["--server", s.edgeUrl, "--token", token, "--subdomain", sub], { BURROW_BASIC_AUTH: "alice:s3cret-pass" })],
      [
        "burrow.yml",
        (sub: string) =>
          run(["start", "--all"], FORWARDING, {
            cwd: project(`server: ${s.edgeUrl}\ntoken: ${token}\ntunnels:\n  web:\n    proto: http\n    addr: ${service.port}\n    subdomain: ${sub}\n    basic_auth: ["alice:s3cret-pass"]\n`),
          }),
      ],
    ] as const;
    for (const [how, start] of cases) {
      const sub = `basic-${how.replace(/[^a-z]/gi, "").toLowerCase()}`;
      const r = await start(sub);
      try {
        expect({ how, outcome: r.outcome }).toEqual({ how, outcome: "running" });
        const ask = (authorization?: string) => tunnelFetch(s.edgePort, sub, "/", { headers: authorization ? { authorization } : {} }).then((res) => res.status);
        expect({ how, none: await ask(), wrong: await ask(wrong), right: await ask(creds) }).toEqual({ how, none: 401, wrong: 401, right: 200 });
      } finally {
        await r.stop();
      }
    }
    // cannot be read: refused before connecting, the value never quoted back
    for (const refused of [
      await http(["--server", s.edgeUrl, "--token", token, "--basic-auth", "alice-s3cret-pass"]),
      await http(["--server", s.edgeUrl, "--token", token], { BURROW_BASIC_AUTH: "alice-s3cret-pass" }),
      await run(["start", "--all"], FORWARDING, { cwd: project(`server: ${s.edgeUrl}\ntoken: ${token}\ntunnels:\n  web:\n    proto: http\n    addr: ${service.port}\n    basic_auth: ["alice-s3cret-pass"]\n`) }),
      await run(["start", "--all"], FORWARDING, { cwd: project(`server: ${s.edgeUrl}\ntoken: ${token}\ntunnels:\n  web:\n    proto: http\n    addr: ${service.port}\n    basic_auth: {alice: s3cret-pass}\n`) }),
    ]) {
      await refused.stop();
      expect(refused.outcome).toBe(2);
      expect(refused.text).toMatch(/basic.auth/);
      expect(refused.text).not.toContain("s3cret-pass");
    }
  }, 120_000);
});
