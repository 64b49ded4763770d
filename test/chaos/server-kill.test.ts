/**
 * Chaos: kill -9 of the server in the middle of everything — a large
 * download through an http tunnel, a TCP stream through a tcp tunnel and a
 * run of admin writes — then a new server on the same data dir and ports.
 *
 * Promised:
 * - visitors caught in the kill see their connections end (no hang);
 * - the database the killed server left is whole (`PRAGMA integrity_check`
 *   on a copy taken before anyone reopens it), and so is it after the
 *   successor stops;
 * - the successor lists the same users, tokens and reserved subdomains as
 *   before, every admin write that was answered before the kill is there,
 *   and the admin's session cookie still works;
 * - both agents come back by themselves (backoff, no DRAIN: the server
 *   could not say goodbye) with the same subdomain and the same tcp port;
 * - traffic is counted up to the last flush: whatever the live counters
 *   showed one flush interval (FLUSH_INTERVAL_MS, 2 s) plus a margin before
 *   the kill is in the daily table afterwards. What is lost at most is what
 *   crossed after the last flush, i.e. under FLUSH_INTERVAL_MS of traffic
 *   (the meter keeps it in memory only); never more than what really crossed.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { Database } from "bun:sqlite";
import { copyFileSync, existsSync, mkdtempSync, rmSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FLUSH_INTERVAL_MS } from "../../src/edge/meter.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { echoThrough, freeRange, restartablePort } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { within } from "../harness/wait.ts";

const KiB = 1024;
const MiB = 1024 * KiB;
/** Heads and framing counted beside the bodies: generous, far below the bodies. */
const OVERHEAD = 64 * KiB;
/** A sample of the live counters this long before the kill must be in the table afterwards: one flush and a margin for timers. */
const FLUSHED_BY_MS = FLUSH_INTERVAL_MS + 500;
/** Liveness, not speed: a visitor caught in the kill sees its connection end within this (the kernel closes it at once; a hang never ends). */
const CUT_MS = 10_000;

// -- local services ------------------------------------------------------------------------------------

/** Deterministic bytes: a download can be checked by hash. */
const pattern = new Uint8Array(64 * KiB).map((_, i) => (i * 31 + 7) & 0xff);
const BIG = 4 * MiB;
const bigHash = (() => {
  const h = new Bun.CryptoHasher("sha256");
  for (let i = 0; i < BIG / pattern.length; i++) h.update(pattern);
  return h.digest("hex");
})();
/** Bytes of bodies the http service handed out, in all: an upper bound for what the edge can have counted out. */
let httpProduced = 0;

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === "/big") {
      httpProduced += BIG;
      return new Response(new Blob(Array.from({ length: BIG / pattern.length }, () => pattern)));
    }
    if (path === "/slow") {
      // 64 KiB every 10 ms (about 6 MiB/s) for up to 256 MiB: still running when the server dies
      let sent = 0;
      return new Response(
        new ReadableStream({
          async pull(c) {
            if (sent >= 256 * MiB) return c.close();
            await Bun.sleep(10); // pacing, not a wait for readiness
            c.enqueue(pattern);
            sent += pattern.length;
            httpProduced += pattern.length;
          },
        }),
      );
    }
    return new Response("ok");
  },
});

/** Greets, then echoes; counts what it received (what it sent back is the same plus the greeting). */
let echoReceived = 0;
const echo = createServer((s) => {
  s.on("error", () => {});
  s.on("data", (d) => void (echoReceived += d.length));
  s.write("ready\n");
  s.pipe(s);
});

// -- the servers ---------------------------------------------------------------------------------------

let dataDir: string;
let ports: { http: number; agent: number; admin: number; tcp: { first: number; last: number } };
const started: TestServer[] = [];
const agents: TestAgent[] = [];
const visitors: Socket[] = [];

const serve = async (keepDataDir = false) => {
  const s = await startServer({
    ...(dataDir ? { dataDir } : { keepDataDir }),
    args: [
      "--http-port", String(ports.http),
      "--agent-port", String(ports.agent),
      "--admin-port", String(ports.admin),
      "--tcp-ports", `${ports.tcp.first}-${ports.tcp.last}`,
    ],
  });
  started.push(s);
  return s;
};

beforeAll(async () => {
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
  ports = { http: restartablePort(), agent: restartablePort(), admin: restartablePort(), tcp: freeRange(4) };
});

afterAll(async () => {
  for (const v of visitors) v.destroy();
  for (const a of agents) await a.stop("SIGKILL");
  for (const s of started) await s.stop("SIGKILL");
  upstream.stop(true);
  echo.close();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

// -- what the admin API shows --------------------------------------------------------------------------

interface Snapshot {
  users: unknown[];
  domains: unknown[];
  tokens: Record<number, unknown[]>;
}

/** Users, reserved subdomains and every user's tokens (without last_used, which a reconnecting agent moves). */
async function snapshot(api: AdminClient): Promise<Snapshot> {
  const users = await api.get("/api/users");
  const domains = await api.get("/api/domains");
  expect(users.status).toBe(200);
  expect(domains.status).toBe(200);
  const tokens: Record<number, unknown[]> = {};
  for (const u of users.body as { id: number }[]) {
    const res = await api.get(`/api/users/${u.id}/tokens`);
    expect(res.status).toBe(200);
    tokens[u.id] = (res.body as Record<string, unknown>[]).map(({ last_used: _, ...rest }) => rest);
  }
  return { users: users.body, domains: domains.body, tokens };
}

/** A user's traffic over the last two UTC days (a run across midnight still adds up). */
async function stored(api: AdminClient, userId: number): Promise<{ in: number; out: number }> {
  const res = await api.get(`/api/analytics/traffic?user_id=${userId}&days=2`);
  expect(res.status).toBe(200);
  const days = res.body as { bytes_in: number; bytes_out: number }[];
  return { in: days.reduce((a, d) => a + d.bytes_in, 0), out: days.reduce((a, d) => a + d.bytes_out, 0) };
}

interface Live {
  at: number;
  httpOut: number;
  tcpIn: number;
  tcpOut: number;
}

async function live(api: AdminClient, httpUser: number, tcpUser: number): Promise<Live> {
  const res = await api.get("/api/tunnels/active");
  expect(res.status).toBe(200);
  const list = res.body as { user_id: number; bytes_in: number; bytes_out: number }[];
  const of = (id: number) => list.find((t) => t.user_id === id) ?? { bytes_in: 0, bytes_out: 0 };
  return { at: performance.now(), httpOut: of(httpUser).bytes_out, tcpIn: of(tcpUser).bytes_in, tcpOut: of(tcpUser).bytes_out };
}

function integrity(dbPath: string): { integrity: string; foreignKeys: unknown[]; users: number } {
  const db = new Database(dbPath);
  try {
    const integrity = (db.query("PRAGMA integrity_check").all() as { integrity_check: string }[]).map((r) => r.integrity_check).join("; ");
    const foreignKeys = db.query("PRAGMA foreign_key_check").all();
    const users = (db.query("SELECT count(*) AS n FROM users").get() as { n: number }).n;
    return { integrity, foreignKeys, users };
  } finally {
    db.close();
  }
}

/** Waits (bounded) for the agent's n-th "Forwarding" line. */
async function nthForwarding(agent: TestAgent, n: number, ms: number): Promise<string> {
  const lines = () => agent.output.lines.filter((l) => l.startsWith("Forwarding"));
  const deadline = performance.now() + ms;
  while (lines().length < n) {
    if (performance.now() > deadline) throw new Error(`no Forwarding line #${n} after ${ms} ms:\n${agent.output.text()}`);
    await Bun.sleep(20);
  }
  return lines()[n - 1]!;
}

// -- the kill ------------------------------------------------------------------------------------------

test("kill -9 mid-transfer: visitors are cut, the data survives, agents come back to the successor by themselves, traffic is counted up to the last flush", async () => {
  const first = await serve(true);
  dataDir = first.dataDir;
  const api = await signedIn(first);

  // -- state worth keeping: users with limits, tokens (one revoked), reserved subdomains
  const alice = await api.createUser("alice", { max_tunnels: 5, traffic_limit: 10 * 1024 * MiB });
  const bob = await api.createUser("bob", { allowed_protocols: "tcp", traffic_period: "daily" });
  const carol = await api.createUser("carol", { max_devices: 3 });
  const aliceToken = await api.createToken(alice, "laptop");
  await api.createToken(alice, "phone");
  const bobToken = await api.createToken(bob, "server");
  const revoked = await api.post(`/api/users/${carol}/tokens`, { device_name: "old" });
  expect((await api.delete(`/api/tokens/${revoked.body.token_id}`)).status).toBe(200);
  expect((await api.post("/api/domains", { subdomain: "alice-site", user_id: alice })).status).toBe(201);
  expect((await api.post("/api/domains", { subdomain: "carol-site", user_id: carol })).status).toBe(201);
  const before = await snapshot(api);

  const web = await startAgent({ kind: "http", target: upstream.port!, server: first.edgeUrl, token: aliceToken, args: ["--subdomain", "alice-site"] });
  agents.push(web);
  const raw = await startAgent({ kind: "tcp", target: (echo.address() as { port: number }).port, server: first.edgeUrl, token: bobToken, args: ["--remote-port", String(ports.tcp.first + 1)] });
  agents.push(raw);
  expect(raw.port).toBe(ports.tcp.first + 1);

  // -- warm traffic, then wait past a flush: the table holds what the live counters show
  const warm = await tunnelFetch(ports.http, "alice-site", "/big");
  expect(new Bun.CryptoHasher("sha256").update(await warm.arrayBuffer()).digest("hex")).toBe(bigHash);
  expect(await echoThrough(raw.port!, "x".repeat(100 * KiB))).toBe("x".repeat(100 * KiB));
  const warmed = await live(api, alice, bob);
  expect(warmed.httpOut).toBeGreaterThanOrEqual(BIG);
  const flushDeadline = performance.now() + FLUSH_INTERVAL_MS + 3_000;
  let flushed = await stored(api, alice);
  while (flushed.out < warmed.httpOut && performance.now() < flushDeadline) {
    await Bun.sleep(100);
    flushed = await stored(api, alice);
  }
  expect(flushed.out).toBe(warmed.httpOut);

  // -- mid-transfer: a paced download, a TCP stream, admin writes, live counters sampled
  const download = (async () => {
    let bytes = 0;
    try {
      const res = await tunnelFetch(ports.http, "alice-site", "/slow");
      for await (const chunk of res.body!) bytes += chunk.byteLength;
      return { bytes, error: undefined as string | undefined, at: performance.now() };
    } catch (err) {
      return { bytes, error: String(err), at: performance.now() };
    }
  })();

  let tcpEchoed = 0;
  let tcpWritten = 0;
  const tcpVisitor = connect({ host: "127.0.0.1", port: raw.port! });
  visitors.push(tcpVisitor);
  const tcpEnded = new Promise<number>((resolve) => {
    tcpVisitor.on("error", () => {});
    tcpVisitor.on("close", () => resolve(performance.now()));
  });
  const chunk = Buffer.alloc(32 * KiB, 0x74);
  const writer = setInterval(() => {
    // 32 KiB every 10 ms while the socket takes it (about 3 MiB/s); pacing, not a readiness wait
    if (!tcpVisitor.destroyed && tcpVisitor.writableLength < MiB) {
      tcpVisitor.write(chunk);
      tcpWritten += chunk.length;
    }
  }, 10);
  tcpVisitor.on("data", (d) => void (tcpEchoed += d.length));

  let stopWrites = false;
  const acked: number[] = [];
  const writesUntil = performance.now() + 30_000;
  const adminWrites = (async () => {
    for (let i = 0; i < 50_000 && !stopWrites && performance.now() < writesUntil; i++) {
      try {
        const res = await api.post(`/api/users/${carol}/tokens`, { device_name: `d${i}` });
        if (res.status !== 201) return `status ${res.status}`;
        acked.push(res.body.token_id);
      } catch {
        return "connection gone";
      }
    }
    return "stopped";
  })();

  const samples: Live[] = [];
  const sampling = (async () => {
    for (let i = 0; i < 200 && !stopWrites; i++) {
      try {
        samples.push(await live(api, alice, bob));
      } catch {
        return;
      }
      await Bun.sleep(150); // the sampling period
    }
  })();

  try {
    // both transfers flowing, and long enough that a sample one flush interval old exists
    await within(
      (async () => {
        while (tcpEchoed < MiB || samples.length === 0 || samples.at(-1)!.httpOut < warmed.httpOut + 4 * MiB) await Bun.sleep(20);
      })(),
      10_000,
      "the download and the tcp stream to be flowing",
    );
    await Bun.sleep(FLUSHED_BY_MS + 1_000); // the span before the kill, transfers running: not a readiness wait
    const lastFlushed = await stored(api, alice);

    const killedAt = performance.now();
    first.proc.kill("SIGKILL");
    expect(await within(first.proc.exited, 5_000, "the killed server to be gone")).not.toBe(0);
    stopWrites = true;
    // the writes went on until the server vanished under them
    expect(await adminWrites).toBe("connection gone");
    await sampling;

    // -- visitors caught in the kill are cut, not left hanging
    const d = await within(download, CUT_MS, "the visitor's download to end after the kill");
    // a body cut short is an error for the visitor, never a clean (silently truncated) end
    expect(d.error).toBeDefined();
    expect(d.bytes).toBeGreaterThan(4 * MiB);
    expect(d.bytes).toBeLessThan(256 * MiB);
    expect(d.at - killedAt).toBeLessThan(CUT_MS);
    const tcpClosedAt = await within(tcpEnded, CUT_MS, "the tcp visitor's connection to close after the kill");
    expect(tcpClosedAt - killedAt).toBeLessThan(CUT_MS);
    clearInterval(writer);

    // -- the file the killed server left is whole (a copy, opened before the successor touches it)
    const crashCopy = mkdtempSync(join(tmpdir(), "burrow-crash-copy-"));
    try {
      for (const suffix of ["", "-wal", "-shm"]) {
        const f = join(dataDir, `burrow.db${suffix}`);
        if (existsSync(f)) copyFileSync(f, join(crashCopy, `burrow.db${suffix}`));
      }
      const crashed = integrity(join(crashCopy, "burrow.db"));
      expect(crashed.integrity).toBe("ok");
      expect(crashed.foreignKeys).toEqual([]);
      expect(crashed.users).toBe(before.users.length);
    } finally {
      rmSync(crashCopy, { recursive: true, force: true });
    }

    // -- the successor: same ports, same data
    const second = await serve();
    expect(second.adminUrl).toBe(first.adminUrl);
    const api2 = await signedIn(second);
    // the session made on the first server is in the database: the old cookie still works
    expect((await api.get("/api/auth/me")).status).toBe(200);

    // -- traffic, read before anything crosses the successor: everything counted one flush
    // interval before the kill is in the table, and nothing that did not cross
    const old = samples.filter((s) => s.at <= killedAt - FLUSHED_BY_MS).at(-1);
    expect(old).toBeDefined();
    expect(old!.httpOut).toBeGreaterThan(warmed.httpOut); // a sample from during the download
    const aliceStored = await stored(api2, alice);
    const bobStored = await stored(api2, bob);
    expect(aliceStored.out).toBeGreaterThanOrEqual(old!.httpOut);
    expect(aliceStored.out).toBeGreaterThanOrEqual(lastFlushed.out);
    expect(aliceStored.out).toBeLessThanOrEqual(httpProduced + OVERHEAD);
    expect(bobStored.in).toBeGreaterThanOrEqual(old!.tcpIn);
    expect(bobStored.out).toBeGreaterThanOrEqual(old!.tcpOut);
    expect(bobStored.in).toBeLessThanOrEqual(tcpWritten + 100 * KiB); // the stream and the warm-up echo
    expect(bobStored.out).toBeLessThanOrEqual(echoReceived + 2 * "ready\n".length);

    // -- the database: as before, plus every write that was answered
    const now = await snapshot(api2);
    expect(now.users).toEqual(before.users);
    expect(now.domains).toEqual(before.domains);
    for (const u of [alice, bob]) expect(now.tokens[u]).toEqual(before.tokens[u]!);
    const carolIds = (now.tokens[carol] as { id: number }[]).map((t) => t.id);
    expect(carolIds.slice(0, before.tokens[carol]!.length)).toEqual((before.tokens[carol] as { id: number }[]).map((t) => t.id));
    expect(acked.length).toBeGreaterThan(0);
    const listed = new Set(carolIds);
    expect(acked.filter((id) => !listed.has(id))).toEqual([]);
    // at most the one write in flight at the kill is there without having been answered
    expect(carolIds.length - before.tokens[carol]!.length - acked.length).toBeLessThanOrEqual(1);

    // -- agents come back by themselves (backoff: the server could not tell them), same name and port
    expect(await nthForwarding(web, 2, 15_000)).toBe(`Forwarding  http://alice-site.localhost:${ports.http} -> localhost:${upstream.port}   (user alice)`);
    expect(await nthForwarding(raw, 2, 15_000)).toBe(await nthForwarding(raw, 1, 0));
    expect(web.output.text()).toContain("lost the connection to the server; reconnecting in");
    const after = await tunnelFetch(ports.http, "alice-site", "/big");
    expect(new Bun.CryptoHasher("sha256").update(await after.arrayBuffer()).digest("hex")).toBe(bigHash);
    expect(await echoThrough(ports.tcp.first + 1, "after the kill")).toBe("after the kill");
    expect(web.proc.exitCode).toBeNull();
    expect(raw.proc.exitCode).toBeNull();

    // -- a clean stop of the successor leaves a whole file
    for (const a of agents.splice(0)) await a.stop();
    expect(await second.stop()).toBe(0);
    const final = integrity(join(dataDir, "burrow.db"));
    expect(final.integrity).toBe("ok");
    expect(final.foreignKeys).toEqual([]);
    expect(final.users).toBe(before.users.length);
  } finally {
    clearInterval(writer);
    stopWrites = true;
  }
}, 50_000);
