/**
 * Visitor connections have a lifetime: an idle keep-alive connection closes
 * after --idle-timeout, a request head that does not arrive in time is cut,
 * and nothing in flight (a long poll, a silent event stream, a WebSocket)
 * is ever cut by either.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";
import { within } from "../harness/wait.ts";

/** The edge checks idle connections every second: 5 s closes an idle connection after 5 to 6 s. */
const IDLE_S = 5;
/**
 * How much later than IDLE_S a connection may be closed: a generous margin for a loaded machine,
 * still far from the default --idle-timeout (75 s) that would apply were the flag ignored.
 */
const LATE_S = 15;
let tunnel: Tunnel;

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  idleTimeout: 0,
  async fetch(req, srv) {
    const path = new URL(req.url).pathname;
    if (path === "/poll") {
      await Bun.sleep((IDLE_S + 2) * 1000);
      return new Response("poll answered");
    }
    if (path === "/events") {
      return new Response(
        new ReadableStream({
          async start(c) {
            c.enqueue(new TextEncoder().encode("data: one\n\n"));
            await Bun.sleep((IDLE_S + 2) * 1000);
            c.enqueue(new TextEncoder().encode("data: two\n\n"));
            c.close();
          },
        }),
        { headers: { "content-type": "text/event-stream" } },
      );
    }
    if (path === "/ws" && srv.upgrade(req)) return undefined;
    return new Response("ok");
  },
  websocket: { message: (ws, m) => void ws.send(`echo ${m}`) },
});

beforeAll(async () => {
  tunnel = await withTunnel({ server: { args: ["--idle-timeout", String(IDLE_S)] }, username: "idler", upstream: upstream.port!, args: ["--subdomain", "idle"] });
});
afterAll(async () => {
  await tunnel?.close();
  upstream.stop(true);
});

/** A raw visitor connection that records what it receives and when it closes. */
function visitor() {
  const socket: Socket = connect(tunnel.server.edgePort, "127.0.0.1");
  let received = "";
  let closedAt: number | undefined;
  const closed = new Promise<number>((resolve) => socket.on("close", () => resolve((closedAt = Date.now()))));
  socket.on("data", (d) => (received += d.toString("latin1")));
  socket.on("error", () => {});
  return {
    socket,
    closed,
    get received() {
      return received;
    },
    get isClosed() {
      return closedAt !== undefined;
    },
    send: (path: string) => socket.write(`GET ${path} HTTP/1.1\r\nHost: idle.localhost:${tunnel.server.edgePort}\r\n\r\n`),
    async waitFor(text: string, ms: number) {
      const deadline = Date.now() + ms;
      while (!received.includes(text) && Date.now() < deadline && closedAt === undefined) await Bun.sleep(20);
      expect(received).toContain(text);
    },
  };
}

test.concurrent("an idle keep-alive connection is closed after --idle-timeout: on a tunnel, on an address (the landing page), and a browser's on the portal", async () => {
  // the portal keeps a connection alive for a browser only (Sec-Fetch-Mode): it was handed the connection for good
  const hosts = [`idle.localhost:${tunnel.server.edgePort}`, `127.0.0.1:${tunnel.server.edgePort}`, `localhost:${tunnel.server.edgePort}\r\nSec-Fetch-Mode: navigate`];
  await Promise.all(hosts.map(async (host) => {
    const v = visitor();
    v.socket.write(`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
    const answered = Date.now();
    await v.waitFor("HTTP/1.1", 5_000);
    const closedAt = await within(v.closed, (IDLE_S + LATE_S + 5) * 1000, "the idle connection to be closed");
    const idleFor = (closedAt - answered) / 1000;
    expect(idleFor).toBeGreaterThanOrEqual(IDLE_S - 1.5);
    expect(idleFor).toBeLessThan(IDLE_S + LATE_S);
  }));
}, 45_000);

test.concurrent("a long poll that answers after more than the idle timeout is not cut, and the connection is reused after", async () => {
  const v = visitor();
  v.send("/poll");
  await v.waitFor("poll answered", (IDLE_S + 8) * 1000);
  expect(v.isClosed).toBe(false);
  v.send("/again");
  await v.waitFor("\r\n\r\nok", 5_000);
  // and from then on it is idle like any other
  await within(v.closed, (IDLE_S + LATE_S + 5) * 1000, "the connection, idle again, to be closed");
}, 45_000);

test.concurrent("an event stream silent for longer than the idle timeout is not cut", async () => {
  const v = visitor();
  v.send("/events");
  await v.waitFor("data: one", 5_000);
  await v.waitFor("data: two", (IDLE_S + 8) * 1000);
  expect(v.isClosed).toBe(false);
}, 30_000);

test.concurrent("a visitor WebSocket silent for longer than the idle timeout stays open", async () => {
  const ws = new WebSocket(`ws://127.0.0.1:${tunnel.server.edgePort}/ws`, { headers: { host: `idle.localhost:${tunnel.server.edgePort}` } } as unknown as string[]);
  const messages: string[] = [];
  let closed = false;
  ws.onmessage = (e) => messages.push(String(e.data));
  ws.onclose = () => (closed = true);
  await within(new Promise((r, j) => ((ws.onopen = r), (ws.onerror = j))), 5_000, "the WebSocket to open");
  await Bun.sleep((IDLE_S + 2) * 1000); // the silence under test, not a readiness wait
  expect(closed).toBe(false);
  ws.send("still there?");
  const deadline = Date.now() + 5_000;
  while (messages.length === 0 && Date.now() < deadline) await Bun.sleep(20);
  expect(messages).toEqual(["echo still there?"]);
  ws.close();
}, 30_000);

test.concurrent("a connection that sends nothing, and one whose head trickles in a byte a second, are cut within seconds", async () => {
  const silent = visitor();
  const trickle = visitor();
  const head = `GET / HTTP/1.1\r\nHost: idle.localhost:${tunnel.server.edgePort}\r\nX-Padding: ${"a".repeat(40)}\r\n\r\n`;
  const started = Date.now();
  const dripping = (async () => {
    for (const ch of head) {
      if (trickle.isClosed) return;
      trickle.socket.write(ch);
      await Bun.sleep(1_000);
    }
  })();
  // the trickled head would take some 100 s to arrive; cut, both go within IDLE_S and a sweep, plus LATE_S for a loaded machine
  const [a, b] = await within(Promise.all([silent.closed, trickle.closed]), (2 * IDLE_S + LATE_S + 5) * 1000, "both slow connections to be cut");
  expect((a - started) / 1000).toBeLessThan(2 * IDLE_S + LATE_S);
  expect((b - started) / 1000).toBeLessThan(2 * IDLE_S + LATE_S);
  expect(trickle.received).not.toContain("HTTP/1.1 200");
  await dripping;
}, 45_000);
