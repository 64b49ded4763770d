/**
 * Private tunnels with the software people put behind them, on the compiled
 * executable (server, owner's agent and `burrow connect` alike): psql and
 * pgbench to a private Postgres (Debian's postgresql), an ssh login and scp
 * both ways to a private OpenSSH server (Debian's openssh-server), and a
 * private web app in Chromium, whose service reads who is connecting from
 * X-Burrow-User (a header the page forges is dropped). Meanwhile nothing on
 * any of the edge's public ports answers for them.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { connect as tcpConnect } from "node:net";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { startConnector, type TestConnector } from "../harness/connector.ts";
import { freeRange } from "../harness/ports.ts";
import { postgresAvailable, POSTGRES_MISSING, startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { sshdSkipReason, startSshd, type TestSshd } from "../harness/sshd.ts";
import { openBrowser } from "../panel/browser.ts";

let binary: string;
let server: TestServer;
let admin: AdminClient;
const tokens: Record<string, string> = {};
const owned: (TestAgent | TestConnector)[] = [];
const tcpPorts = freeRange(4);
const udpPorts = freeRange(4);

beforeAll(async () => {
  binary = await compiledBurrow();
  server = await startServer({ executable: binary, args: ["--tcp-ports", `${tcpPorts.first}-${tcpPorts.last}`, "--udp-ports", `${udpPorts.first}-${udpPorts.last}`] });
  admin = await signedIn(server);
  for (const name of ["alice", "bob", "eve"]) tokens[name] = await admin.createToken(await admin.createUser(name, { allowed_protocols: "http,tcp,udp" }), `${name}-laptop`);
}, 120_000);

afterAll(async () => {
  for (const o of owned.reverse()) await o[Symbol.asyncDispose]();
  await server?.stop();
});

async function privateTunnel(kind: "tcp" | "http", target: number, name: string, share: string): Promise<TestAgent> {
  const agent = await startAgent({ executable: binary, kind, target, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", name, "--share", share] });
  owned.push(agent);
  return agent;
}

async function connectAs(who: string, target: string): Promise<number> {
  const c = startConnector({ executable: binary, server: server.edgeUrl, token: tokens[who]!, target });
  owned.push(c);
  return c.port();
}

/** Runs a client program to its end (bounded in time); its exit code and output. */
async function run(cmd: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn(cmd, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const code = await proc.exited;
  clearTimeout(timer);
  return { code, out: out + err };
}

describe.skipIf(postgresAvailable() === undefined)("psql and pgbench through burrow connect", () => {
  let pg: TestPostgres;
  beforeAll(async () => {
    pg = await startPostgres();
  }, 60_000);
  afterAll(async () => pg?.stop());

  test("a private Postgres: psql answers a query, pgbench initializes and runs its transactions", async () => {
    await privateTunnel("tcp", pg.port, "pg", "bob");
    const port = await connectAs("bob", "alice/pg");
    const url = new URL(pg.url);
    url.port = String(port);
    const psql = await run([join(pg.bin, "psql"), url.href, "-At", "-c", "SELECT 6 * 7"]);
    expect(psql).toEqual({ code: 0, out: "42\n" });
    const env = { PGPASSWORD: decodeURIComponent(url.password) };
    const conn = ["-h", "127.0.0.1", "-p", String(port), "-U", url.username, url.pathname.slice(1)];
    const init = await run([join(pg.bin, "pgbench"), "-i", "-s", "1", "-q", ...conn], env);
    expect(init.code).toBe(0);
    const bench = await run([join(pg.bin, "pgbench"), "-c", "4", "-j", "2", "-t", "200", "-n", ...conn], env);
    expect(bench.code).toBe(0);
    expect(bench.out).toContain("number of transactions actually processed: 800/800");
    expect(bench.out).toContain("number of failed transactions: 0");
  }, 120_000);
});

const noSshd = sshdSkipReason();
if (noSshd) console.error(`ssh through burrow connect skipped: ${noSshd}`);

describe.skipIf(Boolean(noSshd))("ssh and scp through burrow connect", () => {
  let sshd: TestSshd;
  beforeAll(async () => {
    sshd = await startSshd();
  }, 30_000);
  afterAll(async () => sshd?.stop());

  test("a private OpenSSH server: a login runs a command, and scp copies a file there and back intact", async () => {
    await privateTunnel("tcp", sshd.port, "ssh", "bob");
    const port = await connectAs("bob", "alice/ssh");
    const login = await run(["ssh", ...sshd.clientOptions, "-p", String(port), `${sshd.user}@127.0.0.1`, "echo logged in as $(id -un)"]);
    expect(login).toEqual({ code: 0, out: `logged in as ${sshd.user}\n` });
    const file = join(sshd.dir, "payload.bin");
    const bytes = new Uint8Array(2 * 1024 * 1024).map((_, i) => (i * 31 + 7) & 0xff);
    writeFileSync(file, bytes);
    const there = join(sshd.dir, "copied.bin");
    const up = await run(["scp", ...sshd.clientOptions, "-P", String(port), file, `${sshd.user}@127.0.0.1:${there}`]);
    expect(up.code).toBe(0);
    const back = join(sshd.dir, "back.bin");
    const down = await run(["scp", ...sshd.clientOptions, "-P", String(port), `${sshd.user}@127.0.0.1:${there}`, back]);
    expect(down.code).toBe(0);
    expect(Buffer.compare(readFileSync(back), Buffer.from(bytes))).toBe(0);
    // the owner's sshd saw the connections come from its own machine: the owner's agent
    expect(sshd.logs()).toContain("Accepted publickey");
  }, 120_000);
});

describe("a private web app in Chromium", () => {
  test("the page is served through burrow connect; its service knows the user, and a header the page forges is dropped", async () => {
    const app = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const user = req.headers.get("x-burrow-user") ?? "nobody";
        if (new URL(req.url).pathname === "/whoami") return Response.json({ user });
        return new Response(
          `<!doctype html><title>team app</title><h1 id="hello">hello ${user}</h1><p id="forged">…</p>
<script>fetch("/whoami", { headers: { "X-Burrow-User": "admin" } }).then((r) => r.json()).then((j) => (document.getElementById("forged").textContent = "fetch as " + j.user));</script>`,
          { headers: { "content-type": "text/html; charset=utf-8" } },
        );
      },
    });
    try {
      await privateTunnel("http", app.port!, "app", "bob");
      const port = await connectAs("bob", "alice/app");
      await using browser = await openBrowser();
      await browser.page.goto(`http://127.0.0.1:${port}/`);
      expect(await browser.page.locator("#hello").textContent()).toBe("hello bob");
      await browser.page.getByText("fetch as bob").waitFor();
      expect(browser.pageErrors).toEqual([]);
    } finally {
      app.stop(true);
    }
  }, 120_000);
});

describe("nothing public", () => {
  test("with private tcp, http and udp tunnels up, no public port or name of the edge answers for them", async () => {
    const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
    const udpEcho = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d, p, a) => void s.send(d, p, a) } });
    try {
      await privateTunnel("tcp", echo.port, "scan-tcp", "bob");
      await privateTunnel("http", echo.port, "scan-web", "bob");
      const udpOwner = await startAgent({ executable: binary, kind: "udp", target: udpEcho.port, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "scan-udp", "--share", "bob"], waitFor: /Private\s/ });
      owned.push(udpOwner);
      // every port of the edge's tcp range refuses a connection
      for (let p = tcpPorts.first; p <= tcpPorts.last; p++) {
        const opened = await new Promise<boolean>((resolve) => {
          const s = tcpConnect(p, "127.0.0.1", () => (s.destroy(), resolve(true)));
          s.on("error", () => resolve(false));
          setTimeout(() => (s.destroy(), resolve(false)), 3_000);
        });
        expect({ port: p, opened }).toEqual({ port: p, opened: false });
      }
      // no port of its udp range answers
      const answers: string[] = [];
      // an ICMP "port unreachable" comes back as an error on the socket: no answer, as wanted
      const probe = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0, socket: { data: (_s, d, p) => void answers.push(`${p}: ${d}`), error: () => {} } });
      for (let p = udpPorts.first; p <= udpPorts.last; p++) {
        try {
          probe.send("anyone?", p, "127.0.0.1");
        } catch {
          // the port before said "port unreachable" (ICMP), which this send reports: that is no answer either
        }
      }
      await Bun.sleep(500);
      probe.close();
      expect(answers).toEqual([]);
      // no name on its HTTP port: the tunnels' names, the owner's, and both together
      for (const host of ["scan-web", "scan-tcp", "alice", "alice-scan-web", "scan-web.alice"]) {
        const res = await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `${host}.localhost:${server.edgePort}` } });
        expect({ host, status: res.status }).toEqual({ host, status: 404 });
      }
      // and a stranger gets the same NOT_SHARED as for a name that does not exist
      const eve = startConnector({ executable: binary, server: server.edgeUrl, token: tokens.eve!, target: "alice/scan-web" });
      owned.push(eve);
      expect(await eve.proc.exited).toBe(1);
      await eve.output.closed();
      expect(eve.output.text()).toContain("NOT_SHARED");
    } finally {
      echo.stop(true);
      udpEcho.close();
    }
  }, 120_000);
});
