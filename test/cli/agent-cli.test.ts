/**
 * The agent's command line: `burrow login` saves server and token (mode
 * 0600) where `burrow http` / `burrow tcp` find them; BURROW_SERVER /
 * BURROW_TOKEN override the file and flags override both. Mistakes exit 2
 * with one line that starts "burrow:".
 */
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { LineReader } from "../harness/lines.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let token: string;
/** A well-formed token the server never issued. */
const WRONG_TOKEN = "brw_" + "0".repeat(43);
let deadServer: string;
const homes: string[] = [];

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

beforeAll(async () => {
  server = await startServer();
  const api = await signedIn(server);
  const id = await api.createUser("cli-user");
  token = await api.createToken(id);
  // an address where nothing listens (found free, then let go)
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  deadServer = `http://127.0.0.1:${l.port}`;
  l.stop(true);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  for (const h of homes) rmSync(h, { recursive: true, force: true });
});

/** A fresh, empty config home. */
function newHome(): string {
  const home = mkdtempSync(join(tmpdir(), "burrow-cli-home-"));
  homes.push(home);
  return home;
}

/** The environment of a clean machine: no BURROW_* and no proxy, config under `home`. */
function cleanEnv(home: string, extra: Record<string, string> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("BURROW_") && !/^(https?|all)_proxy$/i.test(k)) env[k] = v;
  }
  return { ...env, XDG_CONFIG_HOME: home, HOME: home, ...extra };
}

/** Runs a command that must finish by itself (bounded); returns exit code and output. */
async function run(args: string[], env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const proc = Bun.spawn([...burrowCommand(), ...args], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

const running: { kill(signal?: NodeJS.Signals | number): void; exited: Promise<number> }[] = [];
afterEach(async () => {
  for (const p of running.splice(0)) {
    p.kill("SIGKILL");
    await p.exited;
  }
});

/**
 * Starts `burrow http <upstream>` with exactly `args` and `env`; resolves with
 * its first telling line: "Forwarding ..." or a "burrow: ..." refusal.
 */
async function agentOutcome(args: string[], env: Record<string, string>): Promise<string> {
  const proc = Bun.spawn([...burrowCommand(), "http", String(upstream.port), ...args], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  running.push(proc);
  const output = new LineReader(proc);
  const line = await output.waitFor(/^(Forwarding|burrow:)|reconnecting/, 10_000);
  proc.kill("SIGINT");
  const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
  await proc.exited;
  clearTimeout(timer);
  return line;
}

const FORWARDING = /^Forwarding  http:\/\/[a-z0-9]{8}\.localhost:\d+ -> localhost:\d+ {3}\(user cli-user\)$/;

describe("burrow login", () => {
  test("writes the server and token to $XDG_CONFIG_HOME/burrow/config.json with mode 0600", async () => {
    const home = newHome();
    const r = await run(["login", "--server", server.edgeUrl, "--token", token], cleanEnv(home));
    expect(r.code).toBe(0);
    const path = join(home, "burrow", "config.json");
    expect(r.stdout).toContain(path);
    expect(r.stdout).not.toContain(token);
    expect(JSON.parse(readFileSync(path, "utf8"))).toEqual({ server: server.edgeUrl, token });
    expect(statSync(path).mode & 0o777).toBe(0o600);
    expect(statSync(join(home, "burrow")).mode & 0o077).toBe(0);
  });

  test("tightens an existing config file that others could read to 0600", async () => {
    const home = newHome();
    mkdirSync(join(home, "burrow"));
    const path = join(home, "burrow", "config.json");
    writeFileSync(path, "{}\n");
    chmodSync(path, 0o644);
    expect((await run(["login", "--server", server.edgeUrl, "--token", token], cleanEnv(home))).code).toBe(0);
    expect(statSync(path).mode & 0o777).toBe(0o600);
  });

  test("saves a server given without a scheme as http://", async () => {
    const home = newHome();
    const bare = server.edgeUrl.replace("http://", "");
    expect((await run(["login", "--server", bare, "--token", token], cleanEnv(home))).code).toBe(0);
    expect(JSON.parse(readFileSync(join(home, "burrow", "config.json"), "utf8")).server).toBe(server.edgeUrl);
  });
});

describe("where burrow http finds its server and token", () => {
  test("after burrow login, burrow http PORT needs neither --server nor --token", async () => {
    const home = newHome();
    await run(["login", "--server", server.edgeUrl, "--token", token], cleanEnv(home));
    expect(await agentOutcome([], cleanEnv(home))).toMatch(FORWARDING);
  });

  test("the saved token is what the agent presents when nothing overrides it", async () => {
    const home = newHome();
    await run(["login", "--server", server.edgeUrl, "--token", WRONG_TOKEN], cleanEnv(home));
    expect(await agentOutcome([], cleanEnv(home))).toMatch(/^burrow: refused by the server: AUTH_FAILED: /);
  });

  test("BURROW_TOKEN overrides the saved token", async () => {
    const home = newHome();
    await run(["login", "--server", server.edgeUrl, "--token", WRONG_TOKEN], cleanEnv(home));
    expect(await agentOutcome([], cleanEnv(home, { BURROW_TOKEN: token }))).toMatch(FORWARDING);
  });

  test("BURROW_SERVER overrides the saved server", async () => {
    const home = newHome();
    await run(["login", "--server", deadServer, "--token", token], cleanEnv(home));
    expect(await agentOutcome([], cleanEnv(home))).toMatch(/reconnecting/);
    expect(await agentOutcome([], cleanEnv(home, { BURROW_SERVER: server.edgeUrl }))).toMatch(FORWARDING);
  });

  test("BURROW_SERVER and BURROW_TOKEN alone are enough, with no saved file", async () => {
    const home = newHome();
    expect(await agentOutcome([], cleanEnv(home, { BURROW_SERVER: server.edgeUrl, BURROW_TOKEN: token }))).toMatch(FORWARDING);
  });

  test("--token overrides BURROW_TOKEN, and --server overrides BURROW_SERVER", async () => {
    const home = newHome();
    const env = cleanEnv(home, { BURROW_SERVER: deadServer, BURROW_TOKEN: WRONG_TOKEN });
    expect(await agentOutcome(["--server", server.edgeUrl], env)).toMatch(/^burrow: refused by the server: AUTH_FAILED: /);
    expect(await agentOutcome(["--token", token], env)).toMatch(/reconnecting/);
    expect(await agentOutcome(["--server", server.edgeUrl, "--token", token], env)).toMatch(FORWARDING);
  });

  test("flags work with a saved file that holds other values", async () => {
    const home = newHome();
    await run(["login", "--server", deadServer, "--token", WRONG_TOKEN], cleanEnv(home));
    expect(await agentOutcome(["--server", server.edgeUrl, "--token", token], cleanEnv(home))).toMatch(FORWARDING);
  });
});

describe("mistakes on the command line exit 2 with one line", () => {
  const cases: [string, string[], RegExp?][] = [
    ["burrow http without a port", ["http"], /port/],
    ["burrow tcp without a port", ["tcp"], /port/],
    ["port 0", ["http", "0"], /0/],
    ["port 70000", ["http", "70000"], /70000/],
    ["a port that is not a number", ["http", "abc"], /abc/],
    ["a tcp port of 70000", ["tcp", "70000"], /70000/],
    ["an unknown flag", ["http", "3000", "--bogus"], /--bogus/],
    ["a flag without its value", ["http", "3000", "--subdomain"], /--subdomain/],
    ["a second positional argument", ["http", "3000", "4000"], /4000/],
    ["--remote-port abc", ["tcp", "3000", "--remote-port", "abc"], /abc/],
    ["--remote-port 0", ["tcp", "3000", "--remote-port", "0"], /remote-port/],
    ["--remote-port 65536", ["tcp", "3000", "--remote-port", "65536"], /65536/],
    ["--remote-port on an http tunnel", ["http", "3000", "--remote-port", "2000"], /--remote-port/],
    ["a scheme on a tcp target", ["tcp", "http://localhost:3000"], /http:\/\/localhost:3000/],
    ["no server or token anywhere", ["http", "3000"], /server/],
    ["a server but no token", ["http", "3000", "--server", "http://127.0.0.1:9"], /token/],
    ["a server that is not a URL", ["http", "3000", "--server", "ftp://x", "--token", WRONG_TOKEN], /--server/],
    ["burrow login with a flag it does not take", ["login", "--server", "http://127.0.0.1:9", "--device", "x"], /--device/],
    ["burrow login without --server", ["login", "--token", WRONG_TOKEN], /--server/],
    ["burrow login with something that is not a token", ["login", "--server", "http://127.0.0.1:9", "--token", "hunter2"], /brw_/],
    ["a proxy of an unknown kind", ["http", "3000", "--server", "http://127.0.0.1:9", "--token", WRONG_TOKEN, "--proxy", "ftp://127.0.0.1:21"], /--proxy/],
    ["a host header with a line break", ["http", "3000", "--host-header", "evil.example\r\nX-Injected: 1"], /^burrow: --host-header needs 'rewrite' or a host name .*\(got 'evil\.example\?\?X-Injected: 1'\)$/],
    ["an Upgrade token that is none", ["http", "3000", "--allow-upgrade", "h2c, foo"], /^burrow: --allow-upgrade must be a protocol name as Upgrade says it, such as h2c \(got 'h2c, foo'\)$/],
    ["more Upgrade tokens than a handshake carries", ["http", "3000", ...Array.from({ length: 17 }, (_, i) => ["--allow-upgrade", `p${i}`]).flat()], /^burrow: --allow-upgrade at most 16 entries \(got 17\)$/],
  ];
  for (const [what, args, mentions] of cases) {
    test(`${what} exits 2 with one "burrow:" line`, async () => {
      const home = newHome();
      const r = await run(args, cleanEnv(home));
      expect(r.code).toBe(2);
      expect(r.stdout).toBe("");
      const lines = r.stderr.trimEnd().split("\n");
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(/^burrow: \S/);
      if (mentions) expect(lines[0]).toMatch(mentions);
    });
  }

  test("burrow login without --token, at an address that is not the server's domain (no portal there), writes no config file", async () => {
    const home = newHome();
    await run(["login", "--server", server.edgeUrl], cleanEnv(home));
    expect(() => statSync(join(home, "burrow", "config.json"))).toThrow();
  });

  test("a config file that is not JSON exits 2 and says to log in again", async () => {
    const home = newHome();
    mkdirSync(join(home, "burrow"));
    writeFileSync(join(home, "burrow", "config.json"), "not json");
    const r = await run(["http", "3000"], cleanEnv(home));
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd()).toMatch(/^burrow: .*config\.json.*login/);
  });
});

describe("help", () => {
  for (const cmd of ["http", "tcp", "login"]) {
    test(`burrow ${cmd} --help prints its usage and exits 0`, async () => {
      const r = await run([cmd, "--help"], cleanEnv(newHome()));
      expect(r.code).toBe(0);
      expect(r.stdout).toStartWith(`Usage: burrow ${cmd}`);
      expect(r.stderr).toBe("");
    });
  }

  test("burrow tcp -h names --remote-port and burrow http -h names --subdomain", async () => {
    expect((await run(["tcp", "-h"], cleanEnv(newHome()))).stdout).toContain("--remote-port");
    expect((await run(["http", "-h"], cleanEnv(newHome()))).stdout).toContain("--subdomain");
  });

  test("burrow http -h lists --server and the flags after it apart from who may reach the tunnel", async () => {
    const out = (await run(["http", "-h"], cleanEnv(newHome()))).stdout;
    const access = out.slice(out.indexOf("Who may reach it"));
    const rest = access.slice(access.indexOf("\n\n"));
    expect(access.slice(0, access.indexOf("\n\n"))).not.toContain("--server");
    expect(rest).toContain("--server URL");
    expect(rest).toContain("--no-inspect");
  });
});
