/**
 * The command line of the real program: help and version, mistakes on the
 * command line (one "burrow:" line on stderr, exit 2, no server), settings
 * from BURROW_<FLAG> with flags winning, the first admin, readiness, and a
 * clean stop on SIGTERM/SIGINT that keeps the data and lets requests finish.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pkg from "../../package.json" with { type: "json" };
import { AdminClient, signedIn } from "../harness/admin.ts";
import { LineReader } from "../harness/lines.ts";
import { ADMIN_PASSWORD, startServer } from "../harness/server.ts";

const ROOT = join(import.meta.dir, "..", "..");
const QUICK_EXIT_MS = 8_000;
/** Per-test time limit: these tests start processes, some several in a row. */
const SLOW = 30_000;
const LISTENING = /admin api listening url=(\S+)/;

let scratch: string;
let dirCount = 0;
beforeAll(() => {
  scratch = mkdtempSync(join(tmpdir(), "burrow-cli-"));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** A fresh path under the scratch dir that does not exist yet. */
const newDir = (label = "d") => join(scratch, `${label}-${++dirCount}`);

/** The environment without any BURROW_ variable of the outer shell, plus `extra`. */
function cleanEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("BURROW_")) env[k] = v;
  Object.assign(env, extra);
  return Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined)) as Record<string, string>;
}

interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
  /** True when the process was still running after QUICK_EXIT_MS and had to be killed. */
  timedOut: boolean;
}

/** Runs `bun src/main.ts ...args` and waits (bounded) for it to exit. */
async function run(args: string[], env: Record<string, string | undefined> = {}): Promise<Exited> {
  const proc = Bun.spawn([process.execPath, "src/main.ts", ...args], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, QUICK_EXIT_MS);
  const [stdout, stderr, code] = await Promise.all([
    new Response(proc.stdout).text(),
    new Response(proc.stderr).text(),
    proc.exited,
  ]);
  clearTimeout(timer);
  return { code, stdout, stderr, timedOut };
}

/** A mistake on the command line: exit 2, one "burrow:" line on stderr, nothing on stdout, no server. */
function expectUsageError(out: Exited, mentions?: string) {
  expect(out.timedOut).toBe(false);
  expect(out.code).toBe(2);
  expect(out.stdout).toBe("");
  expect(out.stdout + out.stderr).not.toContain("listening");
  const lines = out.stderr.replace(/\n$/, "").split("\n");
  expect(lines).toHaveLength(1);
  expect(lines[0]!).toStartWith("burrow:");
  if (mentions) expect(lines[0]!).toContain(mentions);
}

interface Spawned extends AsyncDisposable {
  url: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  output: LineReader;
  /** Sends the signal once, waits for the exit and returns the code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

/** Starts `burrow server ...args` exactly as given (no flags added) and waits for the listening line. */
async function spawnServer(args: string[], env: Record<string, string | undefined>): Promise<Spawned> {
  const proc = Bun.spawn([process.execPath, "src/main.ts", "server", ...args], {
    cwd: ROOT,
    env: cleanEnv(env),
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = new LineReader(proc);
  let stopped: Promise<number | null> | undefined;
  const stop = (signal: NodeJS.Signals = "SIGTERM") =>
    (stopped ??= (async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      const code = await proc.exited;
      clearTimeout(timer);
      return code;
    })());
  try {
    const line = await output.waitFor(LISTENING, 15_000);
    return { url: LISTENING.exec(line)![1]!, proc, output, stop, [Symbol.asyncDispose]: async () => void (await stop()) };
  } catch (err) {
    await stop("SIGKILL");
    throw new Error(`server did not start: ${(err as Error).message}\n${output.text()}`);
  }
}

/** A port that was free a moment ago (the OS picked it). */
function freePort(): number {
  const listener = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = listener.port;
  listener.stop(true);
  return port;
}

// BURROW_AGENT_PORT=0: a server started here takes any free direct port, never the default 4042
// another server (or another test run) on this machine may hold
const BASE_ENV = { BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD, BURROW_AGENT_PORT: "0" };

describe("help and version", () => {
  test("--help and -h print the usage and exit 0", async () => {
    for (const flag of ["--help", "-h"]) {
      const out = await run([flag]);
      expect({ flag, code: out.code }).toEqual({ flag, code: 0 });
      expect(out.stdout).toContain("Usage");
      expect(out.stdout).toContain("server");
      expect(out.stdout).toContain("--version");
      expect(out.stderr).toBe("");
    }
  }, SLOW);

  test("server --help prints the server's flags and exits 0 without starting a server", async () => {
    const dataDir = newDir();
    const out = await run(["server", "--help", "--admin-port", "0", "--data-dir", dataDir]);
    expect(out.timedOut).toBe(false);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain("Usage");
    for (const flag of ["--domain", "--http-port", "--admin-port", "--agent-port", "--host", "--data-dir", "--tcp-ports", "--system-subdomains"]) {
      expect(out.stdout).toContain(flag);
    }
    expect(out.stdout).toContain("BURROW_");
    expect(out.stdout).not.toContain("listening");
    expect(existsSync(dataDir)).toBe(false);
  }, SLOW);

  test("--version prints burrow and the package's version, then commit, build date, target and release key, and exits 0", async () => {
    const out = await run(["--version"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toMatch(/^burrow \d+\.\d+\.\d+\n/);
    const lines = out.stdout.trim().split("\n");
    expect(lines[0]).toBe(`burrow ${pkg.version}`);
    // run from source: no commit or date of a build, and it says so
    expect(lines.slice(1).map((l) => l.split(/\s+/)[0])).toEqual(["commit", "built", "target", "key"]);
    expect(lines[1]).toContain("not recorded");
    expect(lines[4]).toContain("none (an unsigned build");
    expect(out.stderr).toBe("");
  }, SLOW);
});

describe("a mistake on the command line", () => {
  const cases: { name: string; args: (dataDir: string) => string[]; mentions: string }[] = [
    { name: "an unknown flag", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--bogus"], mentions: "--bogus" },
    { name: "an unknown short flag", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "-z"], mentions: "-z" },
    { name: "--http-port abc", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--http-port", "abc"], mentions: "http-port" },
    { name: "--admin-port 70000", args: (d) => ["server", "--http-port", "0", "--data-dir", d, "--admin-port", "70000"], mentions: "admin-port" },
    { name: "--agent-port abc", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--agent-port", "abc"], mentions: "--agent-port must be a port number from 0 to 65535, or off" },
    { name: "--agent-port 70000", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--agent-port", "70000"], mentions: "--agent-port must be a port number from 0 to 65535" },
    { name: "--agent-port 4042x", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--agent-port", "4042x"], mentions: "agent-port" },
    { name: "--agent-port OFF", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--agent-port", "OFF"], mentions: "agent-port" },
    { name: "--tcp-ports 5-1", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--tcp-ports", "5-1"], mentions: "tcp-ports" },
    { name: "--tcp-ports x", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--tcp-ports", "x"], mentions: "tcp-ports" },
    { name: "--domain 'bad domain'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--domain", "bad domain"], mentions: "domain" },
    { name: "a flag without its value", args: (d) => ["server", "--http-port", "0", "--data-dir", d, "--admin-port"], mentions: "admin-port" },
    { name: "--system-subdomains with a bad label", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--system-subdomains", "ok,-bad"], mentions: "system-subdomains" },
    { name: "--idle-timeout '0'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--idle-timeout", "0"], mentions: "--idle-timeout must be a whole number of seconds from 5 to 255" },
    { name: "--idle-timeout '256'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--idle-timeout", "256"], mentions: "--idle-timeout must be a whole number of seconds from 5 to 255" },
    { name: "--idle-timeout '1.5'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--idle-timeout", "1.5"], mentions: "idle-timeout" },
    { name: "--max-conns-per-ip '0'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--max-conns-per-ip", "0"], mentions: "--max-conns-per-ip must be a positive whole number" },
    { name: "--max-conns-per-ip '-3'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--max-conns-per-ip", "-3"], mentions: "max-conns-per-ip" },
    { name: "--max-conns 'lots'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--max-conns", "lots"], mentions: "--max-conns must be a positive whole number, or auto" },
    { name: "--trusted-proxies '10.0.0.0/33'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--trusted-proxies", "10.0.0.0/33"], mentions: "--trusted-proxies must be a comma-separated list" },
    { name: "--trusted-proxies '127.0.0.1,proxy.example'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--trusted-proxies", "127.0.0.1,proxy.example"], mentions: "trusted-proxies" },
    { name: "--drain-timeout 'soon'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--drain-timeout", "soon"], mentions: "--drain-timeout must be a number of seconds" },
    { name: "--handshake-limit '0'", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--handshake-limit", "0"], mentions: "handshake-limit" },
    { name: "--admin-host ''", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--admin-host", ""], mentions: "admin-host" },
    { name: "--node-id without --database", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--node-id", "n1"], mentions: "--node-id is for several nodes on one PostgreSQL database" },
    { name: "--node-url without --cluster-secret", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--node-url", "http://10.0.0.2:8080"], mentions: "--node-url needs --cluster-secret" },
    { name: "--node-url with a path", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--node-url", "http://10.0.0.2:8080/x"], mentions: "--node-url must be http(s)://host:port" },
    { name: "--node-id with a space", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--node-id", "a b"], mentions: "--node-id must be 1 to 63" },
    { name: "--cluster-secret too short (not echoed)", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--cluster-secret", "shorty-secret"], mentions: "--cluster-secret must be 16 to 512" },
    { name: "--db-pool without --database", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--db-pool", "20"], mentions: "--db-pool is for several nodes on one PostgreSQL database" },
    { name: "--db-pool 2", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--db-pool", "2"], mentions: "--db-pool must be a number of connections from 4 to 1000" },
    { name: "--node-expiry 1", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--node-expiry", "1"], mentions: "--node-expiry must be a number of seconds from 3 to 3600" },
    { name: "--node-expiry 5s", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--node-expiry", "5s"], mentions: "--node-expiry must be a number of seconds" },
    { name: "--relay-lookups 0", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "--database", "postgres://u:p@127.0.0.1:1/db", "--relay-lookups", "0"], mentions: "--relay-lookups must be a number of lookups from 1 to 100000" },
    { name: "an extra positional argument", args: (d) => ["server", "--admin-port", "0", "--data-dir", d, "extra"], mentions: "extra" },
    { name: "an unknown command", args: (d) => ["frobnicate", "--admin-port", "0", "--data-dir", d], mentions: "frobnicate" },
    { name: "a flag in place of the command", args: (d) => ["--bogus", "server", "--admin-port", "0", "--data-dir", d], mentions: "--bogus" },
  ];

  for (const c of cases) {
    test(`${c.name} prints one 'burrow:' line on stderr, exits 2 and starts no server`, async () => {
      const dataDir = newDir();
      const out = await run(c.args(dataDir), { ...BASE_ENV, BURROW_HOST: "127.0.0.1", BURROW_HTTP_PORT: "0" });
      expectUsageError(out, c.mentions);
      expect(out.stderr).not.toContain("shorty-secret");
      expect(existsSync(dataDir)).toBe(false);
    }, SLOW);
  }
});

describe("settings from the environment", () => {
  test("BURROW_ADMIN_PORT, BURROW_DATA_DIR and BURROW_HOST are used when no flag is given", async () => {
    const port = freePort();
    const dataDir = newDir();
    await using s = await spawnServer([], {
      ...BASE_ENV,
      BURROW_ADMIN_PORT: String(port),
      BURROW_DATA_DIR: dataDir,
      BURROW_HOST: "127.0.0.1",
      BURROW_HTTP_PORT: "0",
    });
    expect(s.url).toBe(`http://127.0.0.1:${port}`);
    expect(existsSync(join(dataDir, "burrow.db"))).toBe(true);
    const res = await fetch(`http://127.0.0.1:${port}/api/auth/me`);
    expect(res.status).toBe(401);
  }, SLOW);

  test("BURROW_ADMIN_HOST=localhost is the host the admin API is announced on", async () => {
    await using s = await spawnServer([], {
      ...BASE_ENV,
      BURROW_ADMIN_HOST: "localhost",
      BURROW_ADMIN_PORT: "0",
      BURROW_HTTP_PORT: "0",
      BURROW_DATA_DIR: newDir(),
    });
    expect(new URL(s.url).hostname).toBe("localhost");
    expect((await fetch(s.url + "/api/auth/me")).status).toBe(401);
  }, SLOW);

  test("a flag wins over the environment", async () => {
    // the port from the environment is taken: the server only starts if the flag wins
    const busy = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const envDir = newDir("env");
      const flagDir = newDir("flag");
      await using s = await spawnServer(["--admin-port", "0", "--data-dir", flagDir, "--host", "127.0.0.1"], {
        ...BASE_ENV,
        BURROW_ADMIN_PORT: String(busy.port),
        BURROW_DATA_DIR: envDir,
        BURROW_HOST: "localhost",
        BURROW_HTTP_PORT: "0",
      });
      expect(new URL(s.url).hostname).toBe("127.0.0.1");
      expect(new URL(s.url).port).not.toBe(String(busy.port));
      expect(existsSync(join(flagDir, "burrow.db"))).toBe(true);
      expect(existsSync(envDir)).toBe(false);
    } finally {
      busy.stop(true);
    }
  }, SLOW);

  test("a flag wins over a bad value in the environment", async () => {
    await using s = await spawnServer(
      ["--admin-port", "0", "--http-port", "0", "--data-dir", newDir(), "--domain", "tunnels.example.com", "--tcp-ports", "30000-30010"],
      {
        ...BASE_ENV,
        BURROW_HOST: "127.0.0.1",
        BURROW_HTTP_PORT: "abc",
        BURROW_DOMAIN: "bad domain",
        BURROW_TCP_PORTS: "x",
      },
    );
    expect((await fetch(s.url + "/api/auth/me")).status).toBe(401);
  }, SLOW);

  const badEnv: [string, string, string][] = [
    ["BURROW_HTTP_PORT", "abc", "http-port"],
    ["BURROW_ADMIN_PORT", "70000", "admin-port"],
    ["BURROW_AGENT_PORT", "abc", "agent-port"],
    ["BURROW_TCP_PORTS", "5-1", "tcp-ports"],
    ["BURROW_DOMAIN", "bad domain", "domain"],
    ["BURROW_SYSTEM_SUBDOMAINS", "a,b_c", "system-subdomains"],
  ];
  for (const [name, value, mentions] of badEnv) {
    test(`${name}=${JSON.stringify(value)} is a mistake like the bad flag: one 'burrow:' line, exit 2, no server`, async () => {
      const dataDir = newDir();
      const out = await run(["server"], {
        ...BASE_ENV,
        BURROW_HOST: "127.0.0.1",
        BURROW_ADMIN_PORT: "0",
        BURROW_HTTP_PORT: "0",
        BURROW_DATA_DIR: dataDir,
        [name]: value,
      });
      expectUsageError(out, mentions);
      expect(existsSync(dataDir)).toBe(false);
    }, SLOW);
  }

  test("--agent-port and BURROW_AGENT_PORT: a port, or off; the flag wins over the environment", async () => {
    const agentPortOf = async (args: string[], env: Record<string, string | undefined>) => {
      await using s = await spawnServer(["--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--data-dir", newDir(), ...args], { ...BASE_ENV, ...env });
      return /agent_port=(\S+)/.exec(s.output.lines.find((l) => LISTENING.test(l))!)?.[1];
    };
    const port = freePort();
    expect(await agentPortOf(["--agent-port", "off"], {})).toBe("off");
    expect(await agentPortOf([], { BURROW_AGENT_PORT: "off" })).toBe("off");
    expect(await agentPortOf([], { BURROW_AGENT_PORT: String(port) })).toBe(String(port));
    expect(await agentPortOf(["--agent-port", "off"], { BURROW_AGENT_PORT: String(port) })).toBe("off");
    expect(await agentPortOf(["--agent-port", "0"], { BURROW_AGENT_PORT: "abc" })).toMatch(/^[1-9][0-9]*$/);
  }, SLOW);

  test("an --agent-port another program holds: 'cannot listen', exit 1, and nothing half started keeps the process alive", async () => {
    const busy = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    try {
      const out = await run(["server", "--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--data-dir", newDir(), "--agent-port", String(busy.port)], BASE_ENV);
      expect(out.timedOut).toBe(false);
      expect(out.code).toBe(1);
      expect(out.stderr).toMatch(/^burrow: cannot listen/m);
      expect(out.stdout).not.toContain("admin api listening");
    } finally {
      busy.stop(true);
    }
  }, SLOW);

  for (const held of ["admin", "http", "agent"] as const) {
    test(`a second burrow server on the ${held} port of a running one: 'cannot listen', exit 1, and the first keeps its port`, async () => {
      await using first = await spawnServer(
        ["--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--agent-port", "0", "--data-dir", newDir()],
        BASE_ENV,
      );
      const line = first.output.lines.find((l) => LISTENING.test(l))!;
      const ports = {
        admin: new URL(first.url).port,
        http: /edge_port=(\d+)/.exec(line)![1]!,
        agent: /agent_port=(\d+)/.exec(line)![1]!,
      };
      const out = await run(
        ["server", "--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--agent-port", "0", `--${held}-port`, ports[held], "--data-dir", newDir()],
        BASE_ENV,
      );
      expect(out.timedOut).toBe(false);
      expect(out.code).toBe(1);
      expect(out.stderr).toMatch(/^burrow: cannot listen/m);
      // the first server still answers on its admin port: nothing was shared with the second
      expect((await fetch(`${first.url}/api/auth/me`)).status).toBe(401);
    }, SLOW);
  }

  test("BURROW_SYSTEM_SUBDOMAINS sets the system names, and --system-subdomains wins over it", async () => {
    const base = { ...BASE_ENV, BURROW_HOST: "127.0.0.1", BURROW_ADMIN_PORT: "0", BURROW_HTTP_PORT: "0" };
    {
      await using s = await spawnServer([], { ...base, BURROW_DATA_DIR: newDir(), BURROW_SYSTEM_SUBDOMAINS: "alpha,beta" });
      const api = new AdminClient(s.url);
      expect((await api.login()).status).toBe(200);
      expect((await api.post("/api/domains", { subdomain: "www", user_id: 1 })).status).toBe(201);
      expect((await api.post("/api/domains", { subdomain: "alpha", user_id: 1 })).status).toBe(400);
      expect((await api.post("/api/domains", { subdomain: "beta", user_id: 1 })).status).toBe(400);
    }
    {
      await using s = await spawnServer(["--system-subdomains", "gamma"], {
        ...base,
        BURROW_DATA_DIR: newDir(),
        BURROW_SYSTEM_SUBDOMAINS: "alpha",
      });
      const api = new AdminClient(s.url);
      expect((await api.login()).status).toBe(200);
      expect((await api.post("/api/domains", { subdomain: "alpha", user_id: 1 })).status).toBe(201);
      expect((await api.post("/api/domains", { subdomain: "gamma", user_id: 1 })).status).toBe(400);
    }
  }, SLOW);
});

/** Whether something accepts TCP connections at host:port (127.0.0.2 is loopback too, but not 127.0.0.1). */
async function accepts(host: string, port: number): Promise<boolean> {
  try {
    const socket = await Bun.connect({ hostname: host, port, socket: { data() {} } });
    socket.end();
    return true;
  } catch {
    return false;
  }
}

describe("where the admin API listens", () => {
  test("on loopback by default, even when --host opens the public side to every interface", async () => {
    await using s = await spawnServer(["--host", "0.0.0.0", "--admin-port", "0", "--http-port", "0", "--data-dir", newDir()], BASE_ENV);
    expect(new URL(s.url).hostname).toBe("127.0.0.1");
    const adminPort = Number(new URL(s.url).port);
    const edgePort = Number(/edge_port=(\d+)/.exec(s.output.text())![1]);
    expect(await accepts("127.0.0.2", edgePort)).toBe(true);
    expect(await accepts("127.0.0.2", adminPort)).toBe(false);
    expect(await accepts("127.0.0.1", adminPort)).toBe(true);
    expect(s.output.text()).not.toContain("clear text");
  }, SLOW);

  test("--admin-host elsewhere than loopback listens there and warns that it is clear text", async () => {
    await using s = await spawnServer(["--admin-host", "0.0.0.0", "--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--data-dir", newDir()], BASE_ENV);
    const adminPort = Number(new URL(s.url).port);
    expect(await accepts("127.0.0.2", adminPort)).toBe(true);
    const warning = s.output.text().split("\n").find((l) => l.includes("clear text"));
    expect(warning).toContain(" warn ");
    expect(warning).toContain("admin_host=0.0.0.0");
  }, SLOW);
});

describe("the first admin", () => {
  const PRINTED = /password:?\s*([A-Za-z0-9_\-+/=!@#$%^&*.~]{8,})\s*$/i;

  function printedPassword(output: LineReader): string {
    const line = output.lines.find((l) => PRINTED.test(l));
    if (!line) throw new Error(`no generated password in the output:\n${output.text()}`);
    return PRINTED.exec(line)![1]!;
  }

  test("is created from BURROW_ADMIN_USERNAME and BURROW_ADMIN_PASSWORD, and the password is not printed", async () => {
    const password = "a-Given-passw0rd";
    await using s = await startServer({ env: { BURROW_ADMIN_USERNAME: "root", BURROW_ADMIN_PASSWORD: password } });
    const api = new AdminClient(s.adminUrl);
    const login = await api.login("root", password);
    expect(login.status).toBe(200);
    expect((await api.get("/api/auth/me")).body).toEqual({ id: 1, username: "root", role: "admin" });
    expect((await new AdminClient(s.adminUrl).login("admin", password)).status).toBe(401);
    expect(s.output.text()).not.toContain(password);
  }, SLOW);

  for (const [how, value] of [
    ["empty", ""],
    ["absent", undefined],
  ] as const) {
    test(`gets a generated strong password, printed once, when BURROW_ADMIN_PASSWORD is ${how}`, async () => {
      const dataDir = newDir();
      mkdirSync(dataDir);
      let password: string;
      {
        await using s = await startServer({ dataDir, env: { BURROW_ADMIN_PASSWORD: value } });
        password = printedPassword(s.output);
        expect(password.length).toBeGreaterThanOrEqual(16);
        expect(password).not.toBe(ADMIN_PASSWORD);
        expect(s.output.lines.filter((l) => l.includes(password))).toHaveLength(1);
        const api = new AdminClient(s.adminUrl);
        expect((await api.login("admin", password)).status).toBe(200);
        expect((await api.get("/api/auth/me")).body).toMatchObject({ username: "admin", role: "admin" });
        expect(await s.stop()).toBe(0);
      }
      {
        // the same data dir again: the admin exists, nothing is generated or printed
        await using s = await startServer({ dataDir, env: { BURROW_ADMIN_PASSWORD: value } });
        expect(s.output.text()).not.toContain(password);
        expect(s.output.lines.some((l) => PRINTED.test(l))).toBe(false);
        const api = new AdminClient(s.adminUrl);
        expect((await api.login("admin", password)).status).toBe(200);
        expect((await api.get("/api/users")).body).toHaveLength(1);
      }
    }, SLOW);
  }

  test("is generated anew for each new database", async () => {
    const passwords: string[] = [];
    for (let i = 0; i < 2; i++) {
      await using s = await startServer({ env: { BURROW_ADMIN_PASSWORD: "" } });
      passwords.push(printedPassword(s.output));
    }
    expect(passwords[0]).not.toBe(passwords[1]);
  }, SLOW);

  test("is not changed by BURROW_ADMIN_PASSWORD on a later start", async () => {
    const dataDir = newDir();
    mkdirSync(dataDir);
    {
      await using s = await startServer({ dataDir, env: { BURROW_ADMIN_PASSWORD: "first-password-1" } });
      expect((await new AdminClient(s.adminUrl).login("admin", "first-password-1")).status).toBe(200);
    }
    await using s = await startServer({ dataDir, env: { BURROW_ADMIN_PASSWORD: "second-password-2" } });
    expect((await new AdminClient(s.adminUrl).login("admin", "first-password-1")).status).toBe(200);
    expect((await new AdminClient(s.adminUrl).login("admin", "second-password-2")).status).toBe(401);
  }, SLOW);
});

describe("readiness", () => {
  test("/api/auth/me answers 401 as soon as the listening line is printed", async () => {
    for (let i = 0; i < 3; i++) {
      await using s = await spawnServer(["--host", "127.0.0.1", "--admin-port", "0", "--http-port", "0", "--data-dir", newDir()], BASE_ENV);
      const res = await fetch(s.url + "/api/auth/me");
      expect(res.status).toBe(401);
      expect(await res.json()).toEqual({ error: expect.any(String) });
    }
  }, SLOW);
});

describe("stopping", () => {
  for (const signal of ["SIGTERM", "SIGINT"] as const) {
    test(`${signal} makes the server exit 0, and the data survives a restart`, async () => {
      const dataDir = newDir();
      mkdirSync(dataDir);
      let user: unknown;
      let tokens: unknown;
      let domains: unknown;
      {
        const s = await startServer({ dataDir });
        try {
          const api = await signedIn(s);
          const id = await api.createUser("survivor", { max_tunnels: 3, traffic_period: "daily" });
          expect((await api.post(`/api/users/${id}/tokens`, { device_name: "laptop" })).status).toBe(201);
          expect((await api.post("/api/domains", { subdomain: "kept", user_id: id })).status).toBe(201);
          user = (await api.get(`/api/users/${id}`)).body;
          tokens = (await api.get(`/api/users/${id}/tokens`)).body;
          domains = (await api.get("/api/domains")).body;
        } finally {
          expect(await s.stop(signal)).toBe(0);
        }
        expect(s.proc.signalCode).toBeNull();
      }
      await using again = await startServer({ dataDir });
      const api = await signedIn(again);
      const users = (await api.get("/api/users")).body.map((u: { username: string }) => u.username);
      expect(users).toEqual(["admin", "survivor"]);
      const id = (user as { user: { id: number } }).user.id;
      expect((await api.get(`/api/users/${id}`)).body).toEqual(user);
      expect((await api.get(`/api/users/${id}/tokens`)).body).toEqual(tokens);
      expect((await api.get("/api/domains")).body).toEqual(domains);
      expect((await new AdminClient(again.adminUrl).login("survivor", "password-123")).status).toBe(403);
    }, SLOW);
  }

  test("a request in flight when SIGTERM arrives still completes", async () => {
    const s = await startServer();
    let code: number | null | undefined;
    try {
      const api = await signedIn(s);
      const { hostname, port } = new URL(s.adminUrl);
      const body = JSON.stringify({ username: "in-flight", password: "password-123" });

      let received = "";
      let closed = false;
      let wake = () => {};
      const changed = () => new Promise<void>((r) => (wake = r));
      const socket = await Bun.connect({
        hostname,
        port: Number(port),
        socket: {
          data(_s, chunk) {
            received += Buffer.from(chunk).toString("latin1");
            wake();
          },
          close() {
            closed = true;
            wake();
          },
          error() {
            closed = true;
            wake();
          },
        },
      });
      const until = async (done: () => boolean) => {
        while (!done()) {
          if (closed) throw new Error(`connection closed early; received: ${JSON.stringify(received)}`);
          await changed();
        }
      };

      // the headers, and a promise to send the body once the server asks for it
      socket.write(
        `POST /api/users HTTP/1.1\r\nHost: ${hostname}:${port}\r\nCookie: ${api.cookie}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\n\r\n`,
      );
      await until(() => received.includes("100 Continue"));

      // the server has the request; now it is told to stop, and only then gets the body
      const stopping = s.stop("SIGTERM");
      await s.output.waitFor(/shutting down/i);
      socket.write(body.slice(0, 10));
      socket.write(body.slice(10));
      await until(() => {
        const final = received.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "");
        const m = /\r\n\r\n/.exec(final);
        if (!m) return false;
        const len = /content-length:\s*(\d+)/i.exec(final.slice(0, m.index));
        return len !== null && final.length >= m.index + 4 + Number(len[1]);
      });
      const final = received.replace(/^HTTP\/1\.1 100 Continue\r\n\r\n/, "");
      expect(final).toStartWith("HTTP/1.1 201");
      const json = JSON.parse(final.slice(final.indexOf("\r\n\r\n") + 4));
      expect(json).toMatchObject({ username: "in-flight" });
      socket.end();
      code = await stopping;
    } finally {
      code ??= await s.stop("SIGKILL");
    }
    expect(code).toBe(0);
  }, SLOW);
});
