/**
 * `burrow diagnose` as a person runs it, against real servers: each case
 * breaks one thing and the report names that check first, with exit code
 * 1; a healthy server passes every check, exit 0. The breaks are real: a
 * port nothing listens on, a certificate that expired (made here), an HTTP
 * proxy (tinyproxy) that refuses CONNECT to the server's port, a server
 * whose Date is 10 minutes off (its test-only BURROW_TEST_DATE_SKEW_S), a
 * revoked token, a tunnel whose name another user's agent holds; and with
 * --remote, the tunnels the server keeps for the token (set through the
 * admin API, or, for one this agent cannot read, written straight into the
 * database as a newer server could keep it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { freePort } from "../harness/ports.ts";
import { runBurrow } from "../harness/run.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startTinyproxy, tinyproxyAvailable } from "../harness/tinyproxy.ts";
import { CHECK_IDS } from "../../src/cli/diagnose/checks.ts";
import type { Report } from "../../src/cli/diagnose/report.ts";

const DAY_MS = 86_400_000;

let dir: string;
let caFile: string;
let server: TestServer;
let api: AdminClient;
let token: string;
let aliceId: number;
/** The edge as the agent names it: the certificate is for localhost. */
let httpsUrl: string;
let config: string;

const service = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-diagnose-"));
  // a certificate of its own CA flag, trusted below by NODE_EXTRA_CA_CERTS, valid 90 days
  const cert = await selfSignedCertificate({ names: ["localhost", "*.localhost"], notAfter: new Date(Date.now() + 90 * DAY_MS), ca: true });
  caFile = join(dir, "cert.pem");
  writeFileSync(caFile, cert.certPem);
  writeFileSync(join(dir, "key.pem"), cert.keyPem);
  server = await startServer({ args: ["--tls-cert", caFile, "--tls-key", join(dir, "key.pem")] });
  httpsUrl = `https://localhost:${server.edgePort}`;
  api = await signedIn(server);
  aliceId = await api.createUser("alice");
  token = await api.createToken(aliceId);
  config = join(dir, "burrow.yml");
  writeFileSync(config, `tunnels:\n  web: { proto: http, addr: ${service.port}, subdomain: diag-web }\n  db: { proto: tcp, addr: 5432 }\n`);
});

afterAll(async () => {
  await server?.stop();
  service.stop(true);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** burrow diagnose --json, with the test's CA trusted and no proxy from the outer environment. */
async function diagnose(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; report: Report; stderr: string }> {
  const out = await runBurrow(["diagnose", "--json", "--timeout", "5", ...args], {
    env: { NODE_EXTRA_CA_CERTS: caFile, HOME: dir, XDG_CONFIG_HOME: join(dir, "xdg"), HTTPS_PROXY: "", https_proxy: "", ALL_PROXY: "", all_proxy: "", ...env },
    timeoutMs: 60_000,
  });
  let report: Report;
  try {
    report = JSON.parse(out.stdout);
  } catch {
    throw new Error(`diagnose printed no JSON (exit ${out.code}): ${out.stdout}\n${out.stderr}`);
  }
  return { code: out.code, report, stderr: out.stderr };
}

const check = (r: Report, name: string) => r.checks.find((c) => (c.tunnel !== undefined ? `tunnel:${c.tunnel}` : c.id) === name)!;

test("a healthy server: every check passes (the proxy: none set), exit 0, the checks in their order", async () => {
  const { code, report } = await diagnose(["--server", httpsUrl, "--token", token, "--config", config]);
  const notPassed = report.checks.filter((c) => c.status !== "pass").map((c) => `${c.id}: ${c.status}: ${c.detail}`);
  expect(notPassed).toEqual(["proxy: skip: none set (--proxy, the config file's proxy:, HTTPS_PROXY or ALL_PROXY)"]);
  expect(code).toBe(0);
  expect(report.ok).toBe(true);
  expect(report.first_failure).toBeNull();
  // `remote` only with --remote
  expect(report.checks.map((c) => c.id)).toEqual([...CHECK_IDS.filter((id) => id !== "remote" && id !== "tunnel"), "tunnel", "tunnel"]);
  expect(check(report, "tls").detail).toContain("certificate for localhost");
  expect(check(report, "direct").detail).toContain(`port ${server.agentPort}`);
  expect(check(report, "token").detail).toContain("of user 'alice'");
  expect(check(report, "tunnel:web").detail).toContain("diag-web");
});

test("the report for people says the same, and exit 0", async () => {
  const out = await runBurrow(["diagnose", "--server", httpsUrl, "--token", token], { env: { NODE_EXTRA_CA_CERTS: caFile, HOME: dir, HTTPS_PROXY: "", ALL_PROXY: "" }, timeoutMs: 60_000 });
  expect(out.code).toBe(0);
  expect(out.stdout).toMatch(/^ {2}ok {4}tls {13}certificate for localhost/m);
  expect(out.stdout).toContain("Every check passed.");
  expect(out.stdout).not.toContain(token);
});

test("a wrong port: tcp fails (connection refused), what needs it is skipped, exit 1", async () => {
  const { code, report } = await diagnose(["--server", `https://localhost:${freePort()}`, "--token", token]);
  expect(code).toBe(1);
  expect(report.first_failure).toBe("tcp");
  expect(check(report, "tcp").code).toBe("ECONNREFUSED");
  expect(check(report, "tcp").advice).toContain("port");
  expect(check(report, "token").status).toBe("skip");
});

test("an expired certificate: tls fails and says when it expired, exit 1", async () => {
  const expired = await selfSignedCertificate({ names: ["localhost"], notBefore: new Date(Date.now() - 40 * DAY_MS), notAfter: new Date(Date.now() - 10 * DAY_MS), ca: true });
  const cert = join(dir, "expired.pem");
  writeFileSync(cert, expired.certPem);
  writeFileSync(join(dir, "expired-key.pem"), expired.keyPem);
  await using old = await startServer({ args: ["--tls-cert", cert, "--tls-key", join(dir, "expired-key.pem")] });
  // trusted, so that what fails is its dates, not its issuer
  const { code, report } = await diagnose(["--server", `https://localhost:${old.edgePort}`, "--token", token], { NODE_EXTRA_CA_CERTS: cert });
  expect(code).toBe(1);
  expect(report.first_failure).toBe("tls");
  expect(check(report, "tls").code).toBe("CERT_HAS_EXPIRED");
  expect(check(report, "tls").detail).toContain(`expired on ${new Date(Date.now() - 10 * DAY_MS).toISOString().slice(0, 10)}`);
  expect(check(report, "websocket").status).toBe("skip");
});

describe.skipIf(!tinyproxyAvailable())("through an HTTP proxy (tinyproxy)", () => {
  test("one that refuses CONNECT to the server's port: proxy fails with its answer, exit 1", async () => {
    await using proxy = await startTinyproxy({ connectPorts: [443] });
    const { code, report } = await diagnose(["--server", httpsUrl, "--token", token], { HTTPS_PROXY: proxy.url });
    expect(code).toBe(1);
    expect(report.first_failure).toBe("proxy");
    const p = check(report, "proxy");
    expect(p.code).toBe("PROXY_REFUSED");
    expect(p.detail).toContain("403");
    expect(p.detail).toContain("HTTPS_PROXY");
    expect(check(report, "tcp").status).toBe("skip");
  });

  test("one that lets it through: proxy passes, the WebSocket goes through it, the direct port is not for proxied agents", async () => {
    await using proxy = await startTinyproxy();
    const { code, report } = await diagnose(["--server", httpsUrl, "--token", token, "--proxy", proxy.url]);
    expect(report.first_failure).toBeNull();
    expect(code).toBe(0);
    expect(check(report, "proxy").status).toBe("pass");
    expect(check(report, "websocket").status).toBe("pass");
    expect(check(report, "direct").status).toBe("skip");
    expect(proxy.log.text()).toContain(`localhost:${server.edgePort}`);
  });
});

test("a server whose clock is 10 minutes ahead: clock fails, saying by how much, exit 1", async () => {
  await using skewed = await startServer({ env: { BURROW_TEST_DATE_SKEW_S: "600" } });
  const skewedApi = await signedIn(skewed);
  const skewedToken = await skewedApi.createToken(await skewedApi.createUser("bob"));
  const { code, report } = await diagnose(["--server", skewed.edgeUrl, "--token", skewedToken]);
  expect(code).toBe(1);
  expect(report.first_failure).toBe("clock");
  const clock = check(report, "clock");
  expect(clock.code).toBe("CLOCK_SKEW");
  // 600 s, give or take the second the Date header rounds to
  expect(clock.detail).toMatch(/clock is (599|600|601) s behind the server's/);
  // the rest still checked: only the clock is wrong
  expect(check(report, "token").status).toBe("pass");
  // within the tolerance asked for, it passes
  expect((await diagnose(["--server", skewed.edgeUrl, "--token", skewedToken, "--clock-tolerance", "700"])).code).toBe(0);
});

test("a revoked token: token fails with TOKEN_DISABLED and what to do, exit 1", async () => {
  const made = await api.post(`/api/users/${aliceId}/tokens`, { device_name: "old laptop" });
  expect((await api.delete(`/api/tokens/${made.body.token_id}`)).status).toBe(200);
  const { code, report } = await diagnose(["--server", httpsUrl, "--token", made.body.token, "--config", config]);
  expect(code).toBe(1);
  expect(report.first_failure).toBe("token");
  expect(check(report, "token").code).toBe("TOKEN_DISABLED");
  expect(check(report, "token").advice).toContain("new token");
  expect(check(report, "protocol").status).toBe("pass");
  expect(check(report, "tunnel:web").status).toBe("skip");
});

test("a tunnel whose name another user's agent holds fails by name; one this token's own agent holds passes", async () => {
  await using mine = await startAgent({ kind: "http", target: service.port!, server: httpsUrl, token, args: ["--subdomain", "diag-mine"], env: { NODE_EXTRA_CA_CERTS: caFile } });
  const carolToken = await api.createToken(await api.createUser("carol"));
  await using theirs = await startAgent({ kind: "http", target: service.port!, server: httpsUrl, token: carolToken, args: ["--subdomain", "diag-taken"], env: { NODE_EXTRA_CA_CERTS: caFile } });
  const both = join(dir, "both.yml");
  writeFileSync(both, `tunnels:\n  mine: { proto: http, addr: 3000, subdomain: diag-mine }\n  taken: { proto: http, addr: 3000, subdomain: diag-taken }\n`);
  const { code, report } = await diagnose(["--server", httpsUrl, "--token", token, "--config", both]);
  expect(code).toBe(1);
  expect(report.first_failure).toBe("tunnel:taken");
  expect(check(report, "tunnel:taken").code).toBe("SUBDOMAIN_TAKEN");
  expect(check(report, "tunnel:mine").status).toBe("pass");
  expect(check(report, "tunnel:mine").detail).toContain("held now by an agent of this token");
  // the check opened nothing: the running agents are as they were
  expect(mine.proc.exitCode).toBeNull();
  expect(theirs.proc.exitCode).toBeNull();
});

test("--bundle writes the report, the config file and the log given, secrets masked, mode 0600", async () => {
  const log = join(dir, "agent.log");
  const secretConfig = join(dir, "secret.yml");
  writeFileSync(secretConfig, `token: ${token}\ntunnels:\n  web: { proto: http, addr: ${service.port}, subdomain: diag-web, basic_auth: ["ann:hunter2"] }\n`);
  writeFileSync(
    log,
    [
      `2026-01-01T00:00:00Z INFO connected token=${token} url=${httpsUrl}`,
      "request GET / Cookie: session=c00kie-value",
      '{"level":"warn","msg":"proxy","proxy":"http://ann:pr0xy-pass@proxy:3128","password":"hunter2"}',
      "Authorization: Bearer eyJhbGciOi.secret",
      "the last line",
    ].join("\n"),
  );
  const bundle = join(dir, "support bundle.txt");
  const out = await runBurrow(["diagnose", "--server", httpsUrl, "--config", secretConfig, "--bundle", bundle, "--log-file", log], {
    env: { NODE_EXTRA_CA_CERTS: caFile, HOME: dir, HTTPS_PROXY: "", ALL_PROXY: "" },
    timeoutMs: 60_000,
  });
  expect(out.code).toBe(0);
  expect(out.stderr).toContain(`Wrote ${bundle} (mode 0600)`);
  expect(statSync(bundle).mode & 0o777).toBe(0o600);
  const text = readFileSync(bundle, "utf8");
  expect(text).toContain("===== report =====");
  expect(text).toContain('"first_failure": null');
  expect(text).toContain(`===== config file ${secretConfig} (secrets masked) =====`);
  expect(text).toContain("the last line");
  for (const secret of [token, token.slice(4), "hunter2", "c00kie-value", "pr0xy-pass", "eyJhbGciOi.secret"]) expect(text).not.toContain(secret);
  expect(text).toContain("[redacted]");
});

describe("--remote: the tunnels the server keeps for the token", () => {
  const tunnelsNamed = (r: Report, name: string) => r.checks.filter((c) => c.tunnel === name);

  test("read as the agent reads them and checked beside the file's: the server's wins a name, one another user has fails by name", async () => {
    const bob = await api.createUser("bob-remote");
    expect((await api.post("/api/domains", { subdomain: "diag-bobs", user_id: bob })).status).toBe(201);
    const made = await api.post(`/api/users/${aliceId}/tokens`, { device_name: "router" });
    const set = await api.put(`/api/tokens/${made.body.token_id}/config`, {
      tunnels: {
        site: { proto: "http", addr: 8080, subdomain: "diag-site", basic_auth: ["ann:remote-secret-pw"] },
        web: { proto: "http", addr: 8081, subdomain: "diag-server-web" },
        theirs: { proto: "http", addr: 8082, subdomain: "diag-bobs" },
      },
    });
    expect(set.status).toBe(200);
    const { code, report } = await diagnose(["--server", httpsUrl, "--token", made.body.token, "--config", config, "--remote"]);
    expect(code).toBe(1);
    expect(report.first_failure).toBe("tunnel:theirs");
    expect(check(report, "remote")).toMatchObject({ status: "pass", detail: "the server keeps version 1 for this token: 3 tunnels (site, web, theirs)" });
    expect(report.checks.map((c) => c.id)).toEqual([...CHECK_IDS.filter((id) => id !== "tunnel"), "tunnel", "tunnel", "tunnel", "tunnel", "tunnel"]);
    expect(check(report, "tunnel:site").status).toBe("pass");
    expect(check(report, "tunnel:site").detail).toContain("diag-site is free for it (the server's config)");
    expect(check(report, "tunnel:theirs")).toMatchObject({ status: "fail", code: "SUBDOMAIN_RESERVED" });
    // two named web: the server's is checked, the file's set aside
    const web = tunnelsNamed(report, "web");
    expect(web.map((c) => c.status)).toEqual(["pass", "skip"]);
    expect(web[0]!.detail).toContain("diag-server-web");
    expect(web[1]!.detail).toContain("set aside: the server's config has a tunnel of this name");
    // the file's own tunnel, not in the server's config, is checked as without --remote
    expect(check(report, "tunnel:db").status).toBe("pass");
    // the config's settings stay on the server: none in the report
    expect(JSON.stringify(report)).not.toContain("remote-secret-pw");
  });

  test("without --config no file is read, as burrow start --remote reads none; a token with no config is a warning, exit 0", async () => {
    const made = await api.post(`/api/users/${aliceId}/tokens`, { device_name: "fresh" });
    // a burrow.yml where the agent looks for one (the config directory): read without --remote, not with it
    const stray = join(dir, "xdg", "burrow", "burrow.yml");
    mkdirSync(dirname(stray), { recursive: true });
    writeFileSync(stray, `tunnels:\n  stray: { proto: http, addr: 3000 }\n`);
    try {
      expect(tunnelsNamed((await diagnose(["--server", httpsUrl, "--token", made.body.token])).report, "stray")).toHaveLength(1);
      const { code, report } = await diagnose(["--server", httpsUrl, "--token", made.body.token, "--remote"]);
      expect(code).toBe(0);
      expect(check(report, "remote")).toMatchObject({ status: "warn" });
      expect(check(report, "remote").detail).toContain("keeps no tunnels for this token");
      expect(report.checks.filter((c) => c.id === "tunnel")).toEqual([]);
    } finally {
      rmSync(stray);
    }
  });

  // a config this agent cannot read comes only from a newer server: written here straight into SQLite's file
  test.skipIf(process.env.BURROW_TEST_DATABASE === "postgres")("a config this agent cannot read fails the remote check, with the field; the file's tunnels are still checked", async () => {
    const made = await api.post(`/api/users/${aliceId}/tokens`, { device_name: "older agent" });
    expect((await api.put(`/api/tokens/${made.body.token_id}/config`, { tunnels: { site: { proto: "http", addr: 8080 } } })).status).toBe(200);
    const db = new Database(join(server.dataDir, "burrow.db"));
    try {
      db.exec("PRAGMA busy_timeout = 5000");
      db.query("UPDATE token_configs SET tunnels = ?, version = version + 1 WHERE token_id = ?").run(JSON.stringify({ site: { proto: "http", addr: 8080, from_the_future: true } }), made.body.token_id);
    } finally {
      db.close();
    }
    const { code, report } = await diagnose(["--server", httpsUrl, "--token", made.body.token, "--config", config, "--remote"]);
    expect(code).toBe(1);
    expect(report.first_failure).toBe("remote");
    expect(check(report, "remote")).toMatchObject({ status: "fail", code: "REMOTE_CONFIG_UNREADABLE" });
    expect(check(report, "remote").detail).toContain("(version 2) does not read here: tunnels.site.from_the_future");
    expect(check(report, "tunnel:web").status).toBe("pass");
  });
});
