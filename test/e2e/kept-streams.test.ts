/**
 * An agent whose HELLO says `keep` is sent a visitor connection's requests
 * one after another on one h1 stream (protocol/messages.ts OpenMeta): seen
 * here from the wire, by an agent scripted frame by frame, and by a visitor
 * on one raw keep-alive connection.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect, type Socket } from "node:net";
import { encodeFrame, jsonPayload, type Frame } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { hostileWebSocket, type HostilePeer } from "../harness/fuzz.ts";
import { withTunnel } from "../harness/tunnel.ts";

/** Liveness, not speed: the longest wait here is for the 1 s response timeout, so ten times that and more. */
const WAIT_MS = 15_000;
let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startServer({ args: ["--response-timeout", "1"] });
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("kept"));
});
afterAll(async () => {
  await server?.stop();
});

/** An agent by hand, past its handshake; `keep`: its HELLO says it serves kept streams. */
async function scriptedAgent(keep: boolean): Promise<{ peer: HostilePeer; host: string } & Disposable> {
  const peer = await hostileWebSocket(server.edgePort, WAIT_MS);
  peer.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }], ...(keep ? { keep: true } : {}) })));
  const ready = () => peer.frames.find((f) => f.type === FrameType.READY);
  if (!(await peer.until(() => ready() !== undefined, WAIT_MS))) throw new Error("no READY for the scripted agent");
  const { subdomain } = JSON.parse(new TextDecoder().decode(ready()!.payload)).tunnels[0];
  return { peer, host: `${subdomain}.localhost:${server.edgePort}`, [Symbol.dispose]: () => peer.close() };
}

/** A visitor's one connection (to `port`, this file's server by default): write requests, read what has come so far. */
async function visitor(port = server.edgePort): Promise<{ socket: Socket; text: () => string; closed: () => boolean; until(check: () => boolean): Promise<boolean> } & Disposable> {
  const socket = connect(port, "127.0.0.1");
  await new Promise<void>((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  let got = "";
  let ended = false;
  const waiters = new Set<() => void>();
  socket.on("data", (b: Buffer) => {
    got += b.toString("latin1");
    for (const w of waiters) w();
  });
  socket.on("close", () => {
    ended = true;
    for (const w of waiters) w();
  });
  socket.on("error", () => {});
  const until = (check: () => boolean) =>
    new Promise<boolean>((resolve) => {
      if (check()) return resolve(true);
      const timer = setTimeout(() => (waiters.delete(w), resolve(false)), WAIT_MS);
      const w = () => {
        if (!check()) return;
        clearTimeout(timer);
        waiters.delete(w);
        resolve(true);
      };
      waiters.add(w);
    });
  return { socket, text: () => got, closed: () => ended, until, [Symbol.dispose]: () => socket.destroy() };
}

const decode = (b: Uint8Array) => new TextDecoder("latin1").decode(b);
const framesOf = (peer: HostilePeer, stream: number, type: number) => peer.frames.filter((f) => f.stream === stream && f.type === type);
/** Everything the edge sent on `stream` as DATA, in order. */
const dataOn = (peer: HostilePeer, stream: number) => framesOf(peer, stream, FrameType.DATA).map((f) => decode(f.payload)).join("");
const opens = (peer: HostilePeer) => peer.frames.filter((f) => f.type === FrameType.OPEN);
const metaOf = (f: Frame) => JSON.parse(decode(f.payload));
const data = (stream: number, text: string, fin = false) => encodeFrame(FrameType.DATA, stream, new TextEncoder().encode(text), fin);
const reply = (stream: number) => encodeFrame(FrameType.REPLY, stream, jsonPayload({}));
const ok = (body: string, extra = "") => `HTTP/1.1 200 OK\r\nContent-Length: ${body.length}\r\n${extra}\r\n${body}`;
const request = (host: string, path: string, extra = "") => `GET ${path} HTTP/1.1\r\nHost: ${host}\r\nX-Burrow-Skip-Warning: 1\r\n${extra}\r\n`;

/** The visitor's first request on its connection, answered on the stream it opened (kept: no FIN); its stream id. */
async function firstAnswered(agent: { peer: HostilePeer; host: string }, v: Awaited<ReturnType<typeof visitor>>): Promise<number> {
  v.socket.write(request(agent.host, "/one"));
  expect(await agent.peer.until(() => opens(agent.peer).length === 1, WAIT_MS)).toBe(true);
  const s = opens(agent.peer)[0]!.stream;
  agent.peer.send(Buffer.concat([reply(s), data(s, ok("first"))]));
  expect(await v.until(() => v.text().endsWith("first"))).toBe(true);
  return s;
}

test("three requests on one visitor connection go on one stream: the first head in OPEN (keep, no FIN), the next ones in DATA once each response has ended", async () => {
  using agent = await scriptedAgent(true);
  using v = await visitor();
  v.socket.write(request(agent.host, "/one"));
  expect(await agent.peer.until(() => opens(agent.peer).length === 1, WAIT_MS)).toBe(true);
  const open = opens(agent.peer)[0]!;
  const s = open.stream;
  expect(metaOf(open).keep).toBe(true);
  expect(metaOf(open).head).toStartWith("GET /one HTTP/1.1\r\n");
  expect(open.fin).toBe(false);
  agent.peer.send(Buffer.concat([reply(s), data(s, ok("first"))]));
  expect(await v.until(() => v.text().endsWith("first"))).toBe(true);

  v.socket.write(request(agent.host, "/two"));
  expect(await agent.peer.until(() => dataOn(agent.peer, s).includes("GET /two HTTP/1.1\r\n"), WAIT_MS)).toBe(true);
  // a head as the local service is to read it: the visitor's fields but the edge's own, its X-Forwarded-*, X-Real-IP and Forwarded after them
  expect(dataOn(agent.peer, s)).toBe(
    `GET /two HTTP/1.1\r\nHost: ${agent.host}\r\nX-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\nX-Forwarded-Host: ${agent.host}\r\n` +
      `X-Real-IP: 127.0.0.1\r\nForwarded: for=127.0.0.1;proto=http;host="${agent.host}"\r\n\r\n`,
  );
  agent.peer.send(data(s, ok("second")));
  expect(await v.until(() => v.text().endsWith("second"))).toBe(true);

  v.socket.write(request(agent.host, "/three"));
  expect(await agent.peer.until(() => dataOn(agent.peer, s).includes("GET /three "), WAIT_MS)).toBe(true);
  agent.peer.send(data(s, ok("third")));
  expect(await v.until(() => v.text().endsWith("third"))).toBe(true);
  expect(opens(agent.peer).length).toBe(1);
  expect(v.text().match(/HTTP\/1\.1 200 OK/g)?.length).toBe(3);

  // the visitor leaves: the edge ends the stream (FIN), its last request long answered
  v.socket.end();
  expect(await agent.peer.until(() => framesOf(agent.peer, s, FrameType.FIN).length === 1, WAIT_MS)).toBe(true);
  expect(framesOf(agent.peer, s, FrameType.RST)).toEqual([]);
});

test("a request body follows its head on the kept stream, with the visitor's framing", async () => {
  using agent = await scriptedAgent(true);
  using v = await visitor();
  const s = await firstAnswered(agent, v);
  v.socket.write(`POST /form HTTP/1.1\r\nHost: ${agent.host}\r\nX-Burrow-Skip-Warning: 1\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nbody\r\n0\r\n\r\n`);
  expect(await agent.peer.until(() => dataOn(agent.peer, s).endsWith("\r\n\r\n4\r\nbody\r\n0\r\n\r\n"), WAIT_MS)).toBe(true);
  agent.peer.send(data(s, ok("got it")));
  expect(await v.until(() => v.text().endsWith("got it"))).toBe(true);
  expect(opens(agent.peer).length).toBe(1);
});

test("an agent that FINs with a response's last byte (it cannot carry another): the next request opens a new stream, and nothing is lost", async () => {
  using agent = await scriptedAgent(true);
  using v = await visitor();
  v.socket.write(request(agent.host, "/one"));
  expect(await agent.peer.until(() => opens(agent.peer).length === 1, WAIT_MS)).toBe(true);
  const first = opens(agent.peer)[0]!.stream;
  agent.peer.send(Buffer.concat([reply(first), data(first, ok("first"), true)]));
  expect(await v.until(() => v.text().endsWith("first"))).toBe(true);
  v.socket.write(request(agent.host, "/two"));
  expect(await agent.peer.until(() => opens(agent.peer).length === 2, WAIT_MS)).toBe(true);
  const second = opens(agent.peer)[1]!;
  expect(metaOf(second).head).toStartWith("GET /two ");
  expect(dataOn(agent.peer, first)).toBe("");
  agent.peer.send(Buffer.concat([reply(second.stream), data(second.stream, ok("second"))]));
  expect(await v.until(() => v.text().endsWith("second"))).toBe(true);
  expect(v.closed()).toBe(false);
});

test("a later request whose answer never starts gets the slow-service page when its response timeout passes, like the first", async () => {
  using agent = await scriptedAgent(true);
  using v = await visitor();
  const s = await firstAnswered(agent, v);
  const before = v.text().length;
  v.socket.write(request(agent.host, "/slow"));
  // this server's --response-timeout is 1 s: well within WAIT_MS
  expect(await v.until(() => v.text().slice(before).includes("</html>"))).toBe(true);
  expect(v.text().slice(before)).toStartWith("HTTP/1.1 502 ");
  expect(v.text().slice(before)).toContain("did not answer within 1 s");
  expect(await agent.peer.until(() => framesOf(agent.peer, s, FrameType.RST).length === 1, WAIT_MS)).toBe(true);
});

test("an agent whose HELLO does not say keep gets a stream per request, each with its FIN, as before", async () => {
  using agent = await scriptedAgent(false);
  using v = await visitor();
  for (const [n, path] of ["/one", "/two"].entries()) {
    v.socket.write(request(agent.host, path));
    expect(await agent.peer.until(() => opens(agent.peer).length === n + 1, WAIT_MS)).toBe(true);
    const open = opens(agent.peer)[n]!;
    expect(metaOf(open).keep).toBeUndefined();
    expect(open.fin).toBe(true);
    agent.peer.send(Buffer.concat([reply(open.stream), data(open.stream, ok(`answer ${n}`), true)]));
    expect(await v.until(() => v.text().endsWith(`answer ${n}`))).toBe(true);
  }
});

test("bytes from the agent between requests break the protocol: the stream is reset, and the visitor's next request still gets an answer", async () => {
  using agent = await scriptedAgent(true);
  using v = await visitor();
  const s = await firstAnswered(agent, v);
  agent.peer.send(data(s, "HTTP/1.1 302 Found\r\nLocation: http://evil.example/\r\n\r\n"));
  expect(await agent.peer.until(() => framesOf(agent.peer, s, FrameType.RST).length === 1, WAIT_MS)).toBe(true);
  expect(v.text()).not.toContain("evil.example");
  v.socket.write(request(agent.host, "/two"));
  expect(await agent.peer.until(() => opens(agent.peer).length === 2, WAIT_MS)).toBe(true);
  const second = opens(agent.peer)[1]!.stream;
  agent.peer.send(Buffer.concat([reply(second), data(second, ok("second"))]));
  expect(await v.until(() => v.text().endsWith("second"))).toBe(true);
  expect(v.text()).not.toContain("evil.example");
});

test("with a real agent, each visitor connection's requests reach the service on a connection of their own, as they would directly", async () => {
  // the service answers every request with the number of the connection it came on
  let accepted = 0;
  const service = Bun.listen<{ n: number; buffer: string }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open: (sock) => void (sock.data = { n: ++accepted, buffer: "" }),
      data(sock, bytes) {
        sock.data.buffer += bytes.toString("latin1");
        for (let end = sock.data.buffer.indexOf("\r\n\r\n"); end >= 0; end = sock.data.buffer.indexOf("\r\n\r\n")) {
          sock.data.buffer = sock.data.buffer.slice(end + 4);
          sock.write(ok(`conn ${sock.data.n};`));
        }
      },
    },
  });
  await using tunnel = await withTunnel({ username: "kept-real", upstream: service.port });
  try {
    const host = `${tunnel.agent.subdomain}.localhost:${tunnel.server.edgePort}`;
    using a = await visitor(tunnel.server.edgePort);
    using b = await visitor(tunnel.server.edgePort);
    const ask = async (v: typeof a, n: number) => {
      v.socket.write(request(host, "/"));
      expect(await v.until(() => (v.text().match(/conn \d+;/g) ?? []).length === n)).toBe(true);
    };
    // A, then B while A's connection stays open, then A again: A's second request goes where its first did
    await ask(a, 1);
    await ask(b, 1);
    await ask(a, 2);
    await ask(b, 2);
    expect(a.text().match(/conn \d+;/g)).toEqual(["conn 1;", "conn 1;"]);
    expect(b.text().match(/conn \d+;/g)).toEqual(["conn 2;", "conn 2;"]);
  } finally {
    service.stop(true);
  }
});
