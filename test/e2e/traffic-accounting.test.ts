/**
 * Traffic accounting: the live counters of GET /api/tunnels/active (bytes_in
 * public -> local, bytes_out local -> public) and the daily table behind
 * analytics, the dashboard and a user's traffic_used, written every few
 * seconds, when a tunnel closes, and when the server shuts down.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const KB = 1024;
const MB = 1024 * KB;
/** Headers and framing counted beside the bodies: generous, but far below the bodies' sizes. */
const OVERHEAD = 16 * KB;

let server: TestServer;
let api: AdminClient;
let userCount = 0;

const big = new Uint8Array(MB).fill(0x62);
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const path = new URL(req.url).pathname;
    if (path === "/big") return new Response(big);
    if (path === "/upload") return new Response(String((await req.arrayBuffer()).byteLength));
    return new Response("ok");
  },
});
/** Greets first, then echoes: the visitor speaks only once the agent has reached it. */
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  echo.stop(true);
});

async function newUser(a: AdminClient = api) {
  const username = `tr${++userCount}`;
  const id = await a.createUser(username);
  const res = await a.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
  return { id, username, token: res.body.token as string, tokenId: res.body.token_id as number };
}

interface Active {
  subdomain?: string;
  port?: number;
  protocol: string;
  user_id: number;
  username: string;
  token_id: number;
  connected_at: string;
  bytes_in: number;
  bytes_out: number;
}

async function activeFor(userId: number, a: AdminClient = api): Promise<Active[]> {
  const res = await a.get("/api/tunnels/active");
  expect(res.status).toBe(200);
  return (res.body as Active[]).filter((t) => t.user_id === userId);
}

async function download(sub: string, path = "/big"): Promise<number> {
  const res = await tunnelFetch(server.edgePort, sub, path);
  expect(res.status).toBe(200);
  return (await res.arrayBuffer()).byteLength;
}

/** Today's analytics record of a user (the last of the per-day list). */
async function today(userId: number, a: AdminClient = api): Promise<{ date: string; bytes_in: number; bytes_out: number; total: number }> {
  const res = await a.get(`/api/analytics/traffic?user_id=${userId}&days=1`);
  expect(res.status).toBe(200);
  expect(res.body).toHaveLength(1);
  return res.body[0];
}

/** Polls `read` every 100 ms until `ok`, for at most `ms`; returns the last value read. */
async function until<T>(read: () => Promise<T>, ok: (v: T) => boolean, ms: number): Promise<T> {
  const deadline = performance.now() + ms;
  for (;;) {
    const v = await read();
    if (ok(v) || performance.now() > deadline) return v;
    await Bun.sleep(100);
  }
}

test("an http tunnel is listed as active with its owner, token, UTC connect time and byte counters", async () => {
  const u = await newUser();
  const before = Date.now();
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: u.token });
  const [t, ...rest] = await activeFor(u.id);
  expect(rest).toEqual([]);
  expect(Object.keys(t!).sort()).toEqual(["bytes_in", "bytes_out", "connected_at", "protocol", "subdomain", "token_id", "user_id", "username"]);
  expect(t).toMatchObject({ subdomain: agent.subdomain, protocol: "http", user_id: u.id, username: u.username, token_id: u.tokenId, bytes_in: 0, bytes_out: 0 });
  expect(t!.connected_at).toMatch(/^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$/);
  const at = Date.parse(t!.connected_at.replace(" ", "T") + "Z");
  expect(at).toBeGreaterThanOrEqual(Math.floor(before / 1000) * 1000 - 1000);
  expect(at).toBeLessThanOrEqual(Date.now() + 1000);
  // the dashboard counts the same live tunnels
  const [dashboard, all] = await Promise.all([api.get("/api/dashboard"), api.get("/api/tunnels/active")]);
  expect(dashboard.body.active_tunnels).toBe(all.body.length);
  expect(dashboard.body.active_tunnels).toBeGreaterThanOrEqual(1);
});

test("a tcp tunnel is listed with its port instead of a subdomain", async () => {
  const u = await newUser();
  await using agent = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: u.token });
  const [t] = await activeFor(u.id);
  expect(Object.keys(t!).sort()).toEqual(["bytes_in", "bytes_out", "connected_at", "port", "protocol", "token_id", "user_id", "username"]);
  expect(t).toMatchObject({ port: agent.port, protocol: "tcp", user_id: u.id, username: u.username, token_id: u.tokenId });
});

test("a 1 MB download counts as bytes_out, an upload as bytes_in, and both grow as traffic flows", async () => {
  const u = await newUser();
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: u.token });
  const sub = agent.subdomain!;

  expect(await download(sub)).toBe(MB);
  const [afterDownload] = await activeFor(u.id);
  expect(afterDownload!.bytes_out).toBeGreaterThanOrEqual(MB);
  expect(afterDownload!.bytes_out).toBeLessThan(MB + OVERHEAD);
  expect(afterDownload!.bytes_in).toBeLessThan(OVERHEAD);

  const upload = new Uint8Array(300 * KB).fill(0x63);
  const res = await tunnelFetch(server.edgePort, sub, "/upload", { method: "POST", body: upload });
  expect(await res.text()).toBe(String(upload.byteLength));
  const [afterUpload] = await activeFor(u.id);
  expect(afterUpload!.bytes_in - afterDownload!.bytes_in).toBeGreaterThanOrEqual(upload.byteLength);
  expect(afterUpload!.bytes_in).toBeLessThan(upload.byteLength + OVERHEAD);
  expect(afterUpload!.bytes_out).toBeGreaterThan(afterDownload!.bytes_out); // the response head and "307200"
  expect(afterUpload!.bytes_out - afterDownload!.bytes_out).toBeLessThan(OVERHEAD);

  expect(await download(sub)).toBe(MB);
  const [afterSecond] = await activeFor(u.id);
  expect(afterSecond!.bytes_out - afterUpload!.bytes_out).toBeGreaterThanOrEqual(MB);
});

test("bytes through a tcp tunnel count both ways", async () => {
  const u = await newUser();
  await using agent = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: u.token });
  const payload = "x".repeat(200 * KB);
  let got = 0;
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  const timer = setTimeout(() => reject(new Error(`echoed ${got} bytes in 10 s`)), 10_000);
  const sock = await Bun.connect({
    hostname: "127.0.0.1",
    port: agent.port!,
    socket: {
      data(s, d) {
        if (got === 0) s.write(payload); // after the greeting
        got += d.byteLength;
        if (got >= "ready\n".length + payload.length) resolve();
      },
      close: () => reject(new Error(`closed after ${got} bytes`)),
    },
  });
  try {
    await promise;
  } finally {
    clearTimeout(timer);
    sock.end();
  }
  const [t] = await activeFor(u.id);
  expect(t!.bytes_in).toBe(payload.length);
  expect(t!.bytes_out).toBe(payload.length + "ready\n".length);
});

test("traffic reaches analytics, the dashboard and the user's traffic_used within 5 s while the tunnel stays open", async () => {
  const u = await newUser();
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: u.token });
  expect(await download(agent.subdomain!)).toBe(MB);
  const [live] = await activeFor(u.id);

  const day = await until(() => today(u.id), (d) => d.bytes_out >= MB, 5_000);
  expect(day.date).toBe(new Date().toISOString().slice(0, 10));
  // the daily row holds exactly what the tunnel counted
  expect(day).toMatchObject({ bytes_in: live!.bytes_in, bytes_out: live!.bytes_out, total: live!.bytes_in + live!.bytes_out });

  const details = await api.get(`/api/users/${u.id}`);
  expect(details.body.traffic_used).toBe(day.total);
  const dashboard = await api.get("/api/dashboard");
  expect(dashboard.body.traffic_today).toBeGreaterThanOrEqual(day.total);
  const perUser = await api.get("/api/analytics/traffic?days=1");
  expect(perUser.body).toContainEqual({ user_id: u.id, username: u.username, bytes_in: day.bytes_in, bytes_out: day.bytes_out, total: day.total });
  expect(agent.proc.exitCode).toBeNull();
});

test("traffic is written when the tunnel closes", async () => {
  const u = await newUser();
  const agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: u.token });
  try {
    expect(await download(agent.subdomain!)).toBe(MB);
    const [live] = await activeFor(u.id);
    expect(await agent.stop()).toBe(0);
    // well inside the 2 s flush interval: the close itself wrote it
    const day = await until(() => today(u.id), (d) => d.bytes_out >= MB, 1_000);
    expect(day).toMatchObject({ bytes_in: live!.bytes_in, bytes_out: live!.bytes_out });
    expect(await activeFor(u.id)).toEqual([]);
  } finally {
    await agent.stop();
  }
});

test("traffic counted just before a SIGTERM is in the database after a restart", async () => {
  const dataDir = mkdtempSync(join(tmpdir(), "burrow-traffic-"));
  try {
    let userId: number;
    let counted: Active | undefined;
    {
      await using first = await startServer({ dataDir });
      const a = await signedIn(first);
      const u = await newUser(a);
      userId = u.id;
      await using agent = await startAgent({ kind: "http", target: upstream.port!, server: first.edgeUrl, token: u.token });
      const res = await tunnelFetch(first.edgePort, agent.subdomain!, "/big");
      expect((await res.arrayBuffer()).byteLength).toBe(MB);
      [counted] = (await a.get("/api/tunnels/active")).body as Active[];
      expect(counted?.bytes_out).toBeGreaterThanOrEqual(MB);
      expect(await first.stop()).toBe(0);
      await agent.stop();
    }
    await using second = await startServer({ dataDir });
    const b = await signedIn(second);
    const day = await today(userId, b);
    expect(day.bytes_out).toBe(counted!.bytes_out);
    expect(day.bytes_in).toBe(counted!.bytes_in);
    expect(day.bytes_out).toBeGreaterThanOrEqual(MB);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
});
