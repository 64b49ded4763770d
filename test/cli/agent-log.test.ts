/**
 * The real agent's --log json and --log-level against a real server: every
 * line it writes is one JSON object; requests, TCP connections and a
 * refusal come with their fields; --log-level warn drops the request lines
 * and keeps the reconnecting one; bad values are usage errors.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

let server: TestServer;
let token: string;
const WRONG_TOKEN = "brw_" + "0".repeat(43);
const tcpPorts = freeRange(3);

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: async (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/slow") await Bun.sleep(150);
    return new Response(path, { status: path === "/missing" ? 404 : 200 });
  },
});
/** Says "hi" and closes when the visitor closes. */
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("hi"), data() {} } });
/** Takes WebSockets and echoes their messages. */
const sockets = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req, srv) => (srv.upgrade(req) ? undefined : new Response("no upgrade", { status: 400 })),
  websocket: { message: (ws, m) => void ws.send(m) },
});
/** A local port where nothing listens (found free, then let go). */
const deadPort = (() => {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
})();

beforeAll(async () => {
  server = await startServer({ args: ["--tcp-ports", `${tcpPorts.first}-${tcpPorts.last}`] });
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("json-user"));
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  echo.stop(true);
  sockets.stop(true);
});

/** Every line the agent wrote, as JSON; fails on the first line that is not. */
function parsed(lines: string[]): Record<string, any>[] {
  return lines.filter((l) => l !== "").map((l) => {
    try {
      return JSON.parse(l);
    } catch {
      throw new Error(`not a JSON line: ${l}`);
    }
  });
}

describe("--log json", () => {
  test("the inspector's address, connect, then a request event per request with method, path, status and duration; exit 0 on Ctrl-C", async () => {
    const inspectPort = freeRange(1).first;
    await using agent = await startAgent({
      kind: "http",
      target: upstream.port!,
      server: server.edgeUrl,
      token,
      args: ["--log", "json", "--inspect-addr", `127.0.0.1:${inspectPort}`],
      waitFor: /"event":"connect"/,
    });
    expect(parsed(agent.output.lines).find((e) => e.event === "inspector")).toMatchObject({ level: "info", url: `http://127.0.0.1:${inspectPort}` });
    const connect = parsed(agent.output.lines).find((e) => e.event === "connect")!;
    expect(connect).toMatchObject({ level: "info", user: "json-user", server: server.edgeUrl });
    expect(connect.tunnels).toHaveLength(1);
    const url: string = connect.tunnels[0].url;
    expect(connect.tunnels[0]).toMatchObject({ name: "http", protocol: "http", local: `localhost:${upstream.port}` });
    const sub = /^http:\/\/([a-z0-9]+)\./.exec(url)![1]!;
    for (const path of ["/one", "/missing", "/slow"]) expect((await tunnelFetch(server.edgePort, sub, path)).status).toBe(path === "/missing" ? 404 : 200);
    await waitUntil(() => parsed(agent.output.lines).filter((e) => e.event === "request").length === 3, 5_000, "three request events");
    expect(await agent.stop()).toBe(0);
    await agent.output.closed();
    const events = parsed(agent.output.lines);
    for (const e of events) {
      expect(new Date(e.time).toISOString()).toBe(e.time);
      expect(["debug", "info", "warn", "error"]).toContain(e.level);
    }
    const requests = events.filter((e) => e.event === "request");
    expect(requests.map((r) => [r.method, r.path, r.status])).toEqual([
      ["GET", "/one", 200],
      ["GET", "/missing", 404],
      ["GET", "/slow", 200],
    ]);
    for (const r of requests) {
      expect(r).toMatchObject({ level: "info", tunnel: "http" });
      expect(typeof r.duration_ms).toBe("number");
    }
    expect(requests[2]!.duration_ms).toBeGreaterThanOrEqual(140);
    // info by default: no debug events
    expect(events.some((e) => e.level === "debug")).toBe(false);
  }, 30_000);

  test("a TCP connection is a tcp_open and a tcp_close with its bytes; debug adds stream_open", async () => {
    await using agent = await startAgent({
      kind: "tcp",
      target: `127.0.0.1:${echo.port}`,
      server: server.edgeUrl,
      token,
      args: ["--log", "json", "--log-level", "debug"],
      waitFor: /"event":"connect"/,
    });
    const connect = parsed(agent.output.lines).find((e) => e.event === "connect")!;
    const port = Number(/:(\d+)$/.exec(connect.tunnels[0].url)![1]);
    const got = Promise.withResolvers<string>();
    const sock = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data: (_s, d) => got.resolve(d.toString()), error: (_s, e) => got.reject(e) } });
    sock.write("hello");
    expect(await got.promise).toBe("hi");
    sock.end();
    await waitUntil(() => parsed(agent.output.lines).some((e) => e.event === "tcp_close"), 5_000, "a tcp_close event");
    const events = parsed(agent.output.lines);
    expect(events.find((e) => e.event === "stream_open")).toMatchObject({ level: "debug", tunnel: "tcp", kind: "tcp" });
    expect(events.find((e) => e.event === "tcp_open")).toMatchObject({ level: "info", tunnel: "tcp" });
    const close = events.find((e) => e.event === "tcp_close")!;
    expect(close).toMatchObject({ tunnel: "tcp", bytes_in: 5, bytes_out: 2 });
    expect(typeof close.remote).toBe("string");
    expect(typeof close.duration_ms).toBe("number");
  }, 30_000);

  test("a refusal is a JSON line with its code, and the agent exits 1; BURROW_LOG=json asks for JSON too", async () => {
    const { proc, output } = spawnAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: WRONG_TOKEN, env: { BURROW_LOG: "json" } });
    const timer = setTimeout(() => proc.kill("SIGKILL"), 15_000);
    const code = await proc.exited;
    clearTimeout(timer);
    await output.closed();
    expect(code).toBe(1);
    const events = parsed(output.lines);
    const refusals = events.filter((e) => e.event === "refusal");
    expect(refusals).toHaveLength(1);
    expect(refusals[0]).toMatchObject({ level: "error", code: "AUTH_FAILED" });
    expect(typeof refusals[0]!.message).toBe("string");
    expect(events.at(-1)).toEqual(refusals[0]!);
  }, 30_000);
});

/** The agent's public address, from its connect event. */
function publicUrl(lines: string[]): string {
  return parsed(lines).find((e) => e.event === "connect")!.tunnels[0].url;
}

/** A WebSocket through the tunnel: resolves when it closed (after one echo, or at once when refused). */
async function webSocketThrough(sub: string): Promise<"echoed" | "refused"> {
  const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}/chat`, { headers: { host: `${sub}.localhost:${server.edgePort}` } } as any);
  const done = Promise.withResolvers<"echoed" | "refused">();
  let echoed = false;
  ws.onopen = () => ws.send("ping");
  ws.onmessage = () => {
    echoed = true;
    ws.close(1000);
  };
  ws.onclose = () => done.resolve(echoed ? "echoed" : "refused");
  ws.onerror = () => {};
  const timer = setTimeout(() => done.reject(new Error("the WebSocket neither echoed nor closed in 5 s")), 5_000);
  return done.promise.finally(() => clearTimeout(timer));
}

describe("what is open ends, every way it can end", () => {
  // the screen's "open" counter is stream_open minus the events that end a stream; each must come once
  const ends = (events: Record<string, any>[]) => events.filter((e) => (e.event === "request" && !e.websocket) || e.event === "websocket_close" || e.event === "tcp_close");

  test("a WebSocket: the upgrade's request event, then websocket_close; a request answered; both ended", async () => {
    await using agent = await startAgent({ kind: "http", target: sockets.port!, server: server.edgeUrl, token, args: ["--log", "json", "--log-level", "debug"], waitFor: /"event":"connect"/ });
    const sub = /^http:\/\/([a-z0-9]+)\./.exec(publicUrl(agent.output.lines))![1]!;
    expect(await webSocketThrough(sub)).toBe("echoed");
    expect((await tunnelFetch(server.edgePort, sub, "/plain")).status).toBe(400);
    await waitUntil(() => ends(parsed(agent.output.lines)).length === 2, 5_000, "two streams ended");
    const events = parsed(agent.output.lines);
    expect(events.filter((e) => e.event === "stream_open").map((e) => e.kind)).toEqual(["ws", "http"]);
    expect(events.find((e) => e.event === "request" && e.websocket)).toMatchObject({ method: "GET", path: "/chat", status: 101 });
    expect(events.find((e) => e.event === "websocket_close")).toMatchObject({ tunnel: "http", path: "/chat", opened: true });
  }, 30_000);

  test("a local service that is down: the request fails with 502, the WebSocket and the TCP connection close with why", async () => {
    await using web = await startAgent({ kind: "http", target: deadPort, server: server.edgeUrl, token, args: ["--log", "json", "--log-level", "debug"], waitFor: /"event":"connect"/ });
    await using tcp = await startAgent({
      kind: "tcp",
      target: `127.0.0.1:${deadPort}`,
      server: server.edgeUrl,
      token,
      args: ["--log", "json", "--log-level", "debug"],
      waitFor: /"event":"connect"/,
    });
    const sub = /^http:\/\/([a-z0-9]+)\./.exec(publicUrl(web.output.lines))![1]!;
    expect((await tunnelFetch(server.edgePort, sub, "/down")).status).toBe(502);
    expect(await webSocketThrough(sub)).toBe("refused");
    const port = Number(/:(\d+)$/.exec(publicUrl(tcp.output.lines))![1]);
    const closed = Promise.withResolvers<void>();
    await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {}, close: () => closed.resolve(), error: () => closed.resolve() } });
    await closed.promise;
    await waitUntil(() => ends(parsed(web.output.lines)).length === 2 && ends(parsed(tcp.output.lines)).length === 1, 5_000, "three streams ended");
    const webEvents = parsed(web.output.lines);
    expect(webEvents.filter((e) => e.event === "stream_open")).toHaveLength(2);
    expect(webEvents.find((e) => e.event === "request")).toMatchObject({ path: "/down", status: 502, error: "connection refused" });
    expect(webEvents.find((e) => e.event === "websocket_close")).toMatchObject({ path: "/chat", opened: false });
    const tcpEvents = parsed(tcp.output.lines);
    expect(tcpEvents.filter((e) => e.event === "stream_open")).toHaveLength(1);
    expect(tcpEvents.find((e) => e.event === "tcp_close")).toMatchObject({ bytes_in: 0, bytes_out: 0, error: "connection refused" });
  }, 30_000);
});

describe("--log text", () => {
  test("a line per WebSocket upgrade and close, and one for a handshake the local service refused", async () => {
    await using up = await startAgent({ kind: "http", target: sockets.port!, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    await using down = await startAgent({ kind: "http", target: deadPort, server: server.edgeUrl, token, args: ["--log", "text", "--no-inspect"] });
    expect(await webSocketThrough(up.subdomain!)).toBe("echoed");
    expect(await webSocketThrough(down.subdomain!)).toBe("refused");
    await up.output.waitFor(/WebSocket \/chat closed after [0-9.]+ m?s$/, 5_000);
    expect(up.output.text()).toMatch(/GET {5}\/chat {2}101 websocket {2}\d+ ms/);
    await down.output.waitFor(/GET {5}\/chat {2}502 \(WebSocket handshake failed\) {2}\d+ ms$/, 5_000);
  }, 30_000);
});

describe("--log-level", () => {
  test("warn: no request lines, but the reconnecting line when the server goes away", async () => {
    const own = await startServer();
    try {
      const api = await signedIn(own);
      const ownToken = await api.createToken(await api.createUser("warn-user"));
      // lines (not JSON), and nothing at info: the agent says nothing until something goes wrong
      const { proc, output } = spawnAgent({ kind: "http", target: upstream.port!, server: own.edgeUrl, token: ownToken, args: ["--log", "text", "--log-level", "warn"] });
      try {
        const active = async () => (await api.get<{ subdomain: string }[]>("/api/tunnels/active")).body;
        await waitUntil(async () => (await active()).length === 1, 10_000, "the tunnel to be live");
        const live = (await active())[0]!;
        expect((await tunnelFetch(own.edgePort, live.subdomain, "/quiet")).status).toBe(200);
        await own.stop("SIGKILL");
        await output.waitFor(/reconnecting in/, 10_000);
        expect(output.text()).not.toContain("/quiet");
        expect(output.text()).not.toContain("Forwarding");
      } finally {
        proc.kill("SIGKILL");
        await proc.exited;
      }
    } finally {
      await own.stop("SIGKILL");
    }
  }, 30_000);

  test("bad values exit 2 with one line naming the flag and what it takes", async () => {
    const cases: [string[], string][] = [
      [["--log", "yaml"], "burrow: --log must be one of screen, text, json (got 'yaml')"],
      [["--log-level", "loud"], "burrow: --log-level must be one of debug, info, warn, error (got 'loud')"],
    ];
    for (const [args, message] of cases) {
      const proc = Bun.spawn([...burrowCommand(), "http", String(upstream.port), "--server", server.edgeUrl, "--token", token, ...args], {
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
      });
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      clearTimeout(timer);
      expect(code).toBe(2);
      expect(stdout).toBe("");
      expect(stderr).toBe(`${message}\n`);
    }
  }, 30_000);
});
