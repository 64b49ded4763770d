/**
 * Hostile peers at the agents' endpoint: whatever arrives on
 * /_burrow/connect, the edge answers with an ERROR frame naming the fault
 * (or just closes), and keeps serving everyone else.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, MAX_PAYLOAD, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { agentWebSocketPeer, refusalIn } from "../harness/agent-peer.ts";
import { faultLines, hostileWebSocket, type HostilePeer } from "../harness/fuzz.ts";
import { rawHttp, type RawReply } from "../harness/raw-http.ts";
import { within } from "../harness/wait.ts";

const WAIT_MS = 5_000;
/**
 * Liveness, not speed: a visitor answered "at once" gets its answer within this, however loaded
 * the machine (measured: a few ms), far below the --response-timeout (60 s) it must not wait for.
 */
const AT_ONCE_MS = 10_000;
let server: TestServer;
let api: AdminClient;
let token: string;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("still here") });

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  const id = await api.createUser("honest");
  token = await api.createToken(id);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
});

/** Sends `messages` to the agents' endpoint as an agent would, and reports what came back until it closed. */
const hostile = (messages: (string | Uint8Array)[]) => agentWebSocketPeer(server.edgePort, messages, WAIT_MS);

const hello = (extra: Record<string, unknown> = {}) =>
  encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token: "brw_x", tunnels: [{ protocol: "http" }], ...extra }));

test("a text message gets PROTOCOL_ERROR and the connection closes", async () => {
  const { frames, closed } = await hostile(["hello?"]);
  expect(refusalIn(frames)?.code).toBe("PROTOCOL_ERROR");
  expect(closed).toBe(true);
});

test("garbage bytes get PROTOCOL_ERROR and the connection closes", async () => {
  const { frames, closed } = await hostile([new Uint8Array([0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7])]);
  expect(refusalIn(frames)?.code).toBe("PROTOCOL_ERROR");
  expect(closed).toBe(true);
});

test("a frame that claims more than MAX_PAYLOAD is refused from its header", async () => {
  const header = encodeFrame(FrameType.HELLO, 0);
  new DataView(header.buffer).setUint32(5, MAX_PAYLOAD + 1);
  const { frames, closed } = await hostile([header]);
  expect(refusalIn(frames)?.message).toContain("exceeds");
  expect(closed).toBe(true);
});

test("a 1 MiB frame is refused and the connection closes", async () => {
  const big = new Uint8Array(1024 * 1024 + 9);
  big.set(encodeFrame(FrameType.HELLO, 0).subarray(0, 5));
  new DataView(big.buffer).setUint32(5, 1024 * 1024);
  const { frames, closed } = await hostile([big]);
  expect(refusalIn(frames)?.code).toBe("PROTOCOL_ERROR");
  expect(closed).toBe(true);
});

test("a message larger than the edge accepts at all is cut off without harm", async () => {
  const { closed } = await hostile([new Uint8Array(20 * 1024 * 1024)]);
  expect(closed).toBe(true);
});

test("a HELLO that is not JSON, or misses fields, gets PROTOCOL_ERROR", async () => {
  for (const bad of [encodeFrame(FrameType.HELLO, 0, new TextEncoder().encode("{nope")), encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: 1 }))]) {
    const { frames, closed } = await hostile([bad]);
    expect(refusalIn(frames)?.code).toBe("PROTOCOL_ERROR");
    expect(closed).toBe(true);
  }
});

test("a HELLO from another protocol version is refused with advice to update", async () => {
  const { frames } = await hostile([hello({ version: PROTOCOL_VERSION + 1 })]);
  const r = refusalIn(frames)!;
  expect(r.code).toBe("VERSION_MISMATCH");
  expect(r.message).toMatch(/update burrow/);
});

test("stream frames before the handshake, or a second HELLO, are refused", async () => {
  const early = await hostile([encodeFrame(FrameType.DATA, 2, new Uint8Array([1]))]);
  expect(refusalIn(early.frames)?.code).toBe("PROTOCOL_ERROR");
  const again = await hostile([encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }] })), hello()]);
  expect(again.frames.some((f) => f.type === FrameType.READY)).toBe(true);
  expect(refusalIn(again.frames)?.code).toBe("PROTOCOL_ERROR");
});

// -- an agent that says wrong things about a visitor's request -----------------------------------------

/** An agent by hand, past its handshake with a real token: its connection and its tunnel's Host. */
async function scriptedAgent(): Promise<{ peer: HostilePeer; host: string } & Disposable> {
  const peer = await hostileWebSocket(server.edgePort, WAIT_MS);
  peer.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }] })));
  const ready = () => peer.frames.find((f) => f.type === FrameType.READY);
  if (!(await peer.until(() => ready() !== undefined, WAIT_MS))) throw new Error("no READY for the scripted agent");
  const { subdomain } = JSON.parse(new TextDecoder().decode(ready()!.payload)).tunnels[0];
  return { peer, host: `${subdomain}.localhost:${server.edgePort}`, [Symbol.dispose]: () => peer.close() };
}

/** The id of the next stream the edge opens to `peer` (the n-th OPEN it sent, from 1). */
async function nthOpen(peer: HostilePeer, n: number): Promise<number> {
  const opens = () => peer.frames.filter((f) => f.type === FrameType.OPEN);
  if (!(await peer.until(() => opens().length >= n, WAIT_MS))) throw new Error("the edge sent no OPEN for the visitor's request");
  return opens()[n - 1]!.stream;
}

/**
 * A visitor's request (Connection: close) to the scripted agent's tunnel, answered with the frames
 * `answer` gives for its stream, in one message; resolves with what the visitor got by the close
 * (or by `timeoutMs`, with `closed: false`).
 */
async function visitAnswered(
  agent: { peer: HostilePeer; host: string },
  answer: (stream: number) => Uint8Array[],
  method = "GET",
  timeoutMs = WAIT_MS,
  /** More header lines (CRLF after each) and a body. */
  rest = "\r\n",
): Promise<RawReply> {
  const opened = agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length;
  const reply = rawHttp(server.edgePort, `${method} /scripted HTTP/1.1\r\nHost: ${agent.host}\r\nX-Burrow-Skip-Warning: 1\r\nConnection: close\r\n${rest}`, timeoutMs);
  const stream = await nthOpen(agent.peer, opened + 1);
  agent.peer.send(Buffer.concat(answer(stream)));
  return reply;
}

/** Fails if the server logs a fault (an error line, an unhandled error) within a moment after line `from`. */
async function expectNoFaultSince(from: number): Promise<void> {
  await server.output.waitFor(/^\S+ error |^(?:[A-Z]\w*Error|error): /, 300, from).catch(() => undefined);
  expect(faultLines(server.output.lines.slice(from))).toEqual([]);
}

const reply = (stream: number, head: unknown, fin = false) => encodeFrame(FrameType.REPLY, stream, jsonPayload(head), fin);

describe("a REPLY whose status no visitor can be given (1xx but 101, 600-999)", () => {
  test.each([100, 103, 199, 600, 999])("status %d gets the visitor a 502 naming it, whether a body follows or not, and no error line", async (status) => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    const answers: [string, string, (s: number) => Uint8Array[]][] = [
      ["GET", "no body", (s) => [reply(s, { status, headers: [] }, true)]],
      ["HEAD", "a HEAD", (s) => [reply(s, { status, headers: [["content-length", "5"]] }, true)]],
      ["GET", "a small body", (s) => [reply(s, { status, headers: [["content-length", "1"]] }), encodeFrame(FrameType.DATA, s, new Uint8Array([120]), true)]],
      ["GET", "a streamed body", (s) => [reply(s, { status, headers: [] }), encodeFrame(FrameType.DATA, s, new Uint8Array([120]), true)]],
    ];
    for (const [method, what, answer] of answers) {
      const res = await visitAnswered(agent, answer, method);
      expect(`${what}: ${res.status}`).toBe(`${what}: 502`);
      if (method === "GET") expect(res.body).toContain(`its local service sent an invalid status ${status}`);
    }
    await expectNoFaultSince(from);
  });
});

test.each([
  ["a bodyless GET", "GET", "\r\n"],
  ["a POST with its body", "POST", "Content-Length: 4\r\n\r\nbody"],
])("an agent that ends %s (FIN) without any REPLY: the visitor gets a 502 at once, not after --response-timeout", async (_, method, rest) => {
  using agent = await scriptedAgent();
  const from = server.output.lines.length;
  const started = performance.now();
  const res = await visitAnswered(agent, (s) => [encodeFrame(FrameType.FIN, s)], method, AT_ONCE_MS, rest);
  expect(res.status).toBe(502);
  expect(res.body).toContain("ended the request without an answer");
  expect(performance.now() - started).toBeLessThan(AT_ONCE_MS);
  await expectNoFaultSince(from);
});

describe("a stream reset in the same message as its REPLY", () => {
  const rst = (stream: number) => encodeFrame(FrameType.RST, stream, new TextEncoder().encode("CANCELLED"));
  /** A frame of no known type: a protocol error that closes the agent's connection, and with it every stream. */
  const fatal = () => new Uint8Array([0x7f, 0, 0, 0, 0, 0, 0, 0, 0]);

  test.each([
    ["a body of known length, then RST", (s: number) => [reply(s, { status: 200, headers: [["content-length", "5"]] }), rst(s)]],
    ["a streamed body, then RST", (s: number) => [reply(s, { status: 200, headers: [] }), rst(s)]],
    ["some of a streamed body, then RST", (s: number) => [reply(s, { status: 200, headers: [] }), encodeFrame(FrameType.DATA, s, new Uint8Array([120])), rst(s)]],
    ["a streamed body, then a protocol error", (s: number) => [reply(s, { status: 200, headers: [] }), fatal()]],
  ])("HTTP, REPLY with %s: the visitor gets a 502 at once", async (_, answer) => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    const started = performance.now();
    // well within the test's own time limit: a visitor left hanging fails here, not by a timeout
    const res = await visitAnswered(agent, answer, "GET", AT_ONCE_MS);
    expect(res.closed).toBe(true);
    expect(res.status).toBe(502);
    expect(performance.now() - started).toBeLessThan(AT_ONCE_MS);
    await expectNoFaultSince(from);
  });

  test.each([
    ["a body of known length", [["content-length", "5"]]],
    ["a streamed body", []],
  ])("HTTP, a whole response (REPLY, %s, FIN) and then a protocol error in the same message: the visitor still gets all of it", async (_, headers) => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    // a POST whose body is not all there yet: the edge's side of the stream is still open when the agent's connection closes
    const answer = (s: number) => [reply(s, { status: 200, headers }), encodeFrame(FrameType.DATA, s, new TextEncoder().encode("hello"), true), fatal()];
    // the answer comes in a few hundred ms and the connection closes after it: the bound is liveness only
    const res = await visitAnswered(agent, answer, "POST", AT_ONCE_MS, "Content-Length: 10\r\n\r\nhalf");
    expect(res.status).toBe(200);
    // Bun may send a body it already has whole with a length, or chunked: either way all of it, and its end
    expect(res.body).toBe(/transfer-encoding: chunked/i.test(res.head) ? "5\r\nhello\r\n0\r\n\r\n" : "hello");
    await expectNoFaultSince(from);
  });

  test.each([
    ["REPLY, then RST", (s: number) => [reply(s, {}), rst(s)]],
    ["REPLY, then a protocol error", (s: number) => [reply(s, {}), fatal()]],
    ["DATA that is no WebSocket record, then REPLY", (s: number) => [encodeFrame(FrameType.DATA, s, new Uint8Array([9, 9, 9, 9, 9, 9])), reply(s, {})]],
  ])("a visitor's WebSocket, %s: the upgrade is refused with a 502, not left open", async (_, answer) => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    const opened = agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length;
    const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}/scripted`, { headers: { Host: agent.host } } as any);
    let wasOpen = false;
    const ended = new Promise<boolean>((resolve) => {
      ws.onopen = () => (wasOpen = true);
      ws.onclose = () => resolve(true);
      setTimeout(() => resolve(false), 2_000);
    });
    const stream = await nthOpen(agent.peer, opened + 1);
    agent.peer.send(Buffer.concat(answer(stream)));
    expect(await ended).toBe(true);
    expect(wasOpen).toBe(false);
    await expectNoFaultSince(from);
  });
});

describe("the subprotocol a ws REPLY names", () => {
  /** A visitor's WebSocket upgrade offering `chat, superchat`, answered by the scripted agent with REPLY `head`: what came back, up to its head and a moment more. */
  async function upgradeAnswered(head: unknown): Promise<RawReply> {
    using agent = await scriptedAgent();
    const opened = agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length;
    const request =
      `GET /chat HTTP/1.1\r\nHost: ${agent.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat, superchat\r\n\r\n`;
    // the connection stays open either way (a WebSocket, or keep-alive after the 502): it ends by the timeout
    const answer = rawHttp(server.edgePort, request, 500);
    const stream = await nthOpen(agent.peer, opened + 1);
    agent.peer.send(reply(stream, head));
    return answer;
  }

  test.each([
    ["a character above U+00FF", "\u0100"],
    ["a NUL", "chat\u0000"],
    ["CR LF and a header of its own", "chat\r\nX-Injected: 1"],
    ["a space", "super chat"],
    ["a protocol the visitor did not offer", "other"],
    ["the whole offered list", "chat, superchat"],
  ])("%s gets the visitor a 502 naming the fault, no upgrade and no error line", async (_, protocol) => {
    const from = server.output.lines.length;
    const res = await upgradeAnswered({ protocol });
    expect(res.status).toBe(502);
    expect(res.body).toContain("its local service chose a subprotocol the visitor did not offer");
    expect(res.head).not.toContain("X-Injected");
    await expectNoFaultSince(from);
  });

  test("one of those the visitor offered is the one it gets", async () => {
    const chosen = await upgradeAnswered({ protocol: "superchat" });
    expect(chosen.status).toBe(101);
    expect(chosen.head).toMatch(/\r\nSec-WebSocket-Protocol: superchat(\r\n|$)/i);
  });
});

describe("a ws REPLY that refuses the upgrade with a status (what another node sends for its access rules)", () => {
  async function refusedWith(head: unknown, body: string): Promise<RawReply> {
    using agent = await scriptedAgent();
    const opened = agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length;
    const request =
      `GET /chat HTTP/1.1\r\nHost: ${agent.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
      `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`;
    const answer = rawHttp(server.edgePort, request, 500);
    const stream = await nthOpen(agent.peer, opened + 1);
    agent.peer.send(Buffer.concat([reply(stream, head), encodeFrame(FrameType.DATA, stream, new TextEncoder().encode(body)), encodeFrame(FrameType.FIN, stream)]));
    return answer;
  }

  test("a 401 with a challenge and a body of its declared length reaches the visitor as it is, with no upgrade", async () => {
    const res = await refusedWith({ status: 401, headers: [["www-authenticate", 'Basic realm="x"'], ["content-length", "6"]] }, "denied");
    expect(res.status).toBe(401);
    expect(res.head).toMatch(/\r\nWWW-Authenticate: Basic realm="x"/i);
    expect(res.head).not.toMatch(/\r\nUpgrade:/i);
    expect(res.body).toBe("denied");
  });

  test.each([
    ["a success status", { status: 200, headers: [["content-length", "2"]] }],
    ["no declared length", { status: 403, headers: [] }],
    ["an invalid status", { status: 42, headers: [["content-length", "2"]] }],
  ])("%s gets the visitor a 502, no upgrade and no error line", async (_, head) => {
    const from = server.output.lines.length;
    const res = await refusedWith(head, "no");
    expect(res.status).toBe(502);
    await expectNoFaultSince(from);
  });
});

describe("an agent that stops in the middle of a streamed response body", () => {
  /**
   * A visitor's request answered with a streamed 200 and "partial"; once the visitor has those
   * bytes, `stop` ends the stream from the agent's side. Resolves with all the visitor received
   * and whether its connection was closed (within WAIT_MS).
   */
  async function cutOff(stop: (agent: { peer: HostilePeer }, stream: number) => void): Promise<{ received: string; closed: boolean }> {
    using agent = await scriptedAgent();
    const visitor = connect(server.edgePort, "127.0.0.1");
    visitor.on("error", () => {});
    let received = "";
    const partial = Promise.withResolvers<void>();
    const closed = Promise.withResolvers<boolean>();
    visitor.on("data", (d: Buffer) => {
      received += d.toString("latin1");
      if (received.includes("partial")) partial.resolve();
    });
    visitor.on("close", () => closed.resolve(true));
    visitor.write(`GET /streamed HTTP/1.1\r\nHost: ${agent.host}\r\nX-Burrow-Skip-Warning: 1\r\n\r\n`);
    const stream = await nthOpen(agent.peer, 1);
    agent.peer.send(Buffer.concat([reply(stream, { status: 200, headers: [] }), encodeFrame(FrameType.DATA, stream, new TextEncoder().encode("partial"))]));
    await within(partial.promise, WAIT_MS, "the first bytes of the body");
    stop(agent, stream);
    const timer = setTimeout(() => closed.resolve(false), WAIT_MS);
    const wasClosed = await closed.promise;
    clearTimeout(timer);
    visitor.destroy();
    return { received, closed: wasClosed };
  }

  test.each([
    ["its connection closes", (agent: { peer: HostilePeer }) => agent.peer.close()],
    ["it resets the stream", (agent: { peer: HostilePeer }, stream: number) => agent.peer.send(encodeFrame(FrameType.RST, stream, new TextEncoder().encode("CANCELLED")))],
  ])("%s: the visitor's connection is cut (no last chunk), and nothing is printed at error level", async (_, stop) => {
    const from = server.output.lines.length;
    const { received, closed } = await cutOff(stop);
    expect(received).toStartWith("HTTP/1.1 200 ");
    expect(received).toContain("partial");
    // a chunked body that ends with its last chunk would read as complete
    expect(received).not.toEndWith("0\r\n\r\n");
    expect(closed).toBe(true);
    await expectNoFaultSince(from);
  });
});

test("after all of that, the server still serves its admin API and an honest agent", async () => {
  expect((await api.get("/api/auth/me")).status).toBe(200);
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
  const res = await tunnelFetch(server.edgePort, agent.subdomain!, "/");
  expect(await res.text()).toBe("still here");
  expect(server.proc.exitCode).toBeNull();
  expect(server.output.text()).not.toMatch(/edge request failed|TypeError|RangeError/);
});
