/**
 * The edge's own pages: 404 for an unknown tunnel, 502 when the local
 * service refuses or never answers (after --response-timeout), a landing
 * page on the bare domain. All small, self-contained HTML.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import net from "node:net";
import { tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { within } from "../harness/wait.ts";

const WAIT_MS = 10_000;

/** An edge page is HTML, small, and loads nothing from anywhere else. */
function expectSelfContainedPage(res: Response, html: string) {
  expect(res.headers.get("content-type")).toStartWith("text/html");
  expect(html).toStartWith("<!doctype html>");
  expect(html).toContain("</html>");
  expect(html.length).toBeLessThan(8 * 1024);
  expect(html).not.toMatch(/(?:src|href|action|srcset)\s*=\s*["']?\s*(?:[a-z][a-z0-9+.-]*:)?\/\//i);
  expect(html).not.toMatch(/url\(\s*["']?\s*(?:https?:)?\/\//i);
  expect(html).not.toMatch(/@import/i);
  expect(html).not.toMatch(/<script[^>]+src=/i);
}

// -- local services ------------------------------------------------------------------------------------------

let hits = 0;
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: () => {
    hits++;
    return new Response("from the local service");
  },
});

/** Takes connections and requests and never answers; remembers which connections have closed. */
const silentSockets = new Set<net.Socket>();
let silentClosed = 0;
let onSilentClose: (() => void) | undefined;
const silent = net.createServer((socket) => {
  silentSockets.add(socket);
  socket.on("data", () => {});
  socket.on("error", () => {});
  socket.on("close", () => {
    silentSockets.delete(socket);
    silentClosed++;
    onSilentClose?.();
  });
});

/** Answers every request with a status no visitor can be given: HTTP/1.1 600, its body framed by the path. */
const weird = net.createServer((socket) => {
  socket.on("error", () => {});
  socket.on("data", (bytes) => {
    const path = /^\S+ (\S+)/.exec(bytes.toString("latin1"))?.[1];
    if (path === "/chunked") socket.write("HTTP/1.1 600 Weird\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n");
    else if (path === "/sized") socket.write("HTTP/1.1 600 Weird\r\nContent-Length: 1\r\n\r\nx");
    else socket.write("HTTP/1.1 600 Weird\r\nContent-Length: 0\r\n\r\n");
  });
});

/** A port with nothing listening on it. */
async function closedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((r) => probe.listen(0, "127.0.0.1", r));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise<void>((r) => probe.close(() => r()));
  return port;
}

let rig: Rig;
let refused: TestAgent;
let odd: TestAgent;

beforeAll(async () => {
  await new Promise<void>((r) => silent.listen(0, "127.0.0.1", r));
  await new Promise<void>((r) => weird.listen(0, "127.0.0.1", r));
  rig = await withServer({ server: { args: ["--response-timeout", "1"] }, username: "pager" });
  const start = (port: number, subdomain: string) => rig.startAgent({ kind: "http", target: `127.0.0.1:${port}`, args: ["--subdomain", subdomain] });
  [, refused, , odd] = await Promise.all([
    start(upstream.port!, "served"),
    start(await closedPort(), "refused"),
    start((silent.address() as net.AddressInfo).port, "hanging"),
    start((weird.address() as net.AddressInfo).port, "odd"),
  ]);
});

afterAll(async () => {
  await rig?.close();
  upstream.stop(true);
  for (const s of silentSockets) s.destroy();
  silent.close();
  weird.close();
});

// -- the tests ------------------------------------------------------------------------------------------------

test("a request for an unknown subdomain gets a 404 page", async () => {
  const res = await tunnelFetch(rig.server.edgePort, "nobody-here", "/some/page");
  const html = await res.text();
  expect(res.status).toBe(404);
  expectSelfContainedPage(res, html);
  expect(html).toContain(`nobody-here.localhost:${rig.server.edgePort}`);
  expect(html).toContain("No tunnel here");
});

test("a tunnel whose local service refuses connections gets a 502 page, and the agent logs it", async () => {
  const res = await tunnelFetch(rig.server.edgePort, "refused", "/refused-path");
  const html = await res.text();
  expect(res.status).toBe(502);
  expectSelfContainedPage(res, html);
  expect(html).toContain(`refused.localhost:${rig.server.edgePort}`);
  expect(html).toContain("connection refused");
  await refused.output.waitFor(/GET\s+\/refused-path\s+502 \(connection refused\)\s+\d+ ms/, 5_000);
});

test("a local service that answers with status 600 gets a 502 page naming it, with or without a body, and no error line", async () => {
  const from = rig.server.output.lines.length;
  for (const [method, path] of [["GET", "/chunked"], ["GET", "/sized"], ["GET", "/empty"], ["HEAD", "/chunked"]] as const) {
    const res = await tunnelFetch(rig.server.edgePort, "odd", path, { method });
    const html = await res.text();
    expect(`${method} ${path} ${res.status}`).toBe(`${method} ${path} 502`);
    if (method === "GET") {
      expectSelfContainedPage(res, html);
      expect(html).toContain("invalid status 600");
    }
    await odd.output.waitFor(new RegExp(`${method}\\s+${path}\\s+502 \\(invalid status 600\\)`), 5_000);
  }
  expect(rig.server.output.lines.slice(from).filter((l) => / error |Error: /.test(l))).toEqual([]);
});

test("a local service that never answers gets a 502 page after the server's --response-timeout", async () => {
  const started = performance.now();
  const res = await within(tunnelFetch(rig.server.edgePort, "hanging", "/never"), WAIT_MS, "the 502 for a silent service");
  const elapsed = performance.now() - started;
  const html = await res.text();
  expect(res.status).toBe(502);
  expectSelfContainedPage(res, html);
  expect(html).toContain("did not answer within 1 s");
  expect(elapsed).toBeGreaterThanOrEqual(900);
  expect(elapsed).toBeLessThan(5_000);
});

test("after the response timeout the agent gives up its request to the silent local service", async () => {
  const closedBefore = silentClosed;
  const closed = new Promise<void>((resolve) => (onSilentClose = () => silentClosed > closedBefore && resolve()));
  const res = await within(tunnelFetch(rig.server.edgePort, "hanging", "/abandoned"), WAIT_MS, "the 502 for a silent service");
  expect(res.status).toBe(502);
  await res.text();
  await within(closed, WAIT_MS, "the agent to close its connection to the silent service");
});

test("a visitor who leaves before the answer makes the agent drop its request to the local service", async () => {
  const closedBefore = silentClosed;
  const closed = new Promise<void>((resolve) => (onSilentClose = () => silentClosed > closedBefore && resolve()));
  const visitor = net.connect(rig.server.edgePort, "127.0.0.1");
  await within(new Promise((r) => visitor.once("connect", r)), WAIT_MS, "connect to the edge");
  const arrived = new Promise<void>((resolve) => silent.once("connection", (s) => s.once("data", () => resolve())));
  visitor.write(`GET /leaving HTTP/1.1\r\nHost: hanging.localhost:${rig.server.edgePort}\r\n\r\n`);
  await within(arrived, WAIT_MS, "the request to reach the local service");
  visitor.destroy();
  await within(closed, WAIT_MS, "the agent to close its connection to the local service");
});

test("an address shows the landing page, the bare domain the portal (docs/portal.md); neither reaches a tunnel", async () => {
  const before = hits;
  const landing = await fetch(`http://127.0.0.1:${rig.server.edgePort}/`, { headers: { host: `127.0.0.1:${rig.server.edgePort}` } });
  const html = await landing.text();
  expectSelfContainedPage(landing, html);
  expect(html).toContain("burrow tunnel server");
  expect(html).toContain("localhost");
  expect(html).not.toContain("from the local service");
  const portal = await fetch(`http://localhost:${rig.server.edgePort}/`);
  expect(portal.status).toBe(200);
  const page = await portal.text();
  expect(page).toContain('<div id="app">');
  expect(page).not.toContain("from the local service");
  expect(hits).toBe(before);
  // the tunnel itself still answers
  const res = await tunnelFetch(rig.server.edgePort, "served", "/");
  expect(await res.text()).toBe("from the local service");
  expect(hits).toBe(before + 1);
});

test("a name below a tunnel's name is not that tunnel", async () => {
  const before = hits;
  const res = await tunnelFetch(rig.server.edgePort, "deeper.served", "/");
  expect(res.status).toBe(404);
  expectSelfContainedPage(res, await res.text());
  expect(hits).toBe(before);
});
