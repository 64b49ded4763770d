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
  // a WebSocket message past MAX_MESSAGE is cut off by the WebSocket itself (1009) before any frame is read
  const refusal = refusalIn(frames);
  if (refusal) expect(refusal.code).toBe("PROTOCOL_ERROR");
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
  expect(r.message).toMatch(/update burrow on the server \(burrow update\)/);
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

/** REPLY `{}` and the response's bytes, as an agent of protocol 2 answers an h1 stream; `fin` ends the stream with them. */
const respond = (stream: number, bytes: string, fin = false) => [
  encodeFrame(FrameType.REPLY, stream, jsonPayload({})),
  encodeFrame(FrameType.DATA, stream, new TextEncoder().encode(bytes), fin),
];
const replyOnly = (stream: number) => encodeFrame(FrameType.REPLY, stream, jsonPayload({}));

describe("response bytes no visitor can be given", () => {
  test.each([600, 999])("final status %d gets the visitor a 502 naming it, whether a body follows or not, and no error line", async (status) => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    const answers: [string, string, (s: number) => Uint8Array[]][] = [
      ["GET", "no body", (s) => respond(s, `HTTP/1.1 ${status} Odd\r\nContent-Length: 0\r\n\r\n`, true)],
      ["HEAD", "a HEAD", (s) => respond(s, `HTTP/1.1 ${status} Odd\r\nContent-Length: 5\r\n\r\n`, true)],
      ["GET", "a small body", (s) => respond(s, `HTTP/1.1 ${status} Odd\r\nContent-Length: 1\r\n\r\nx`, true)],
    ];
    for (const [method, what, answer] of answers) {
      const res = await visitAnswered(agent, answer, method);
      expect(`${what}: ${res.status}`).toBe(`${what}: 502`);
      if (method === "GET") expect(res.body).toContain(`invalid status ${status}`);
    }
    await expectNoFaultSince(from);
  });

  test.each([
    ["a header line ending in LF alone", "HTTP/1.1 200 OK\r\nX-A: a\nInjected: 1\r\nContent-Length: 0\r\n\r\n"],
    ["a NUL in a value", "HTTP/1.1 200 OK\r\nX-A: a\u0000b\r\nContent-Length: 0\r\n\r\n"],
    ["two lengths that disagree", "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx"],
    ["no status line", "hello there\r\n\r\n"],
    ["a 101 to a request that asked for no upgrade", "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n"],
  ])("%s: a 502, nothing of it reaches the visitor, no error line", async (_, bytes) => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    const res = await visitAnswered(agent, (s) => respond(s, bytes, true));
    expect(res.status).toBe(502);
    expect(res.head).not.toContain("Injected");
    await expectNoFaultSince(from);
  });

  test("bytes past the response's end never reach the visitor: the next response on the connection is the edge's to give", async () => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    const res = await visitAnswered(agent, (s) => respond(s, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 302 Found\r\nLocation: http://evil.example/\r\n\r\n", true));
    expect(res.status).toBe(200);
    expect(res.body).toBe("ok");
    expect(res.head + res.body).not.toContain("evil.example");
    await expectNoFaultSince(from);
  });

  test("an interim answer and then nothing: the visitor gets the interim head and a closed connection, not a hang", async () => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    const res = await visitAnswered(agent, (s) => respond(s, "HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n", true), "GET", AT_ONCE_MS);
    expect(res.closed).toBe(true);
    expect(res.head).toStartWith("HTTP/1.1 103 Early Hints");
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
    ["nothing, then RST", (s: number) => [replyOnly(s), rst(s)]],
    ["half a head, then RST", (s: number) => [...respond(s, "HTTP/1.1 200 OK\r\nContent-Le"), rst(s)]],
    ["nothing, then a protocol error", (s: number) => [replyOnly(s), fatal()]],
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
    ["a body of known length", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", "hello"],
    ["a chunked body", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "5\r\nhello\r\n0\r\n\r\n"],
  ])("HTTP, a whole response (%s, FIN) and then a protocol error in the same message: the visitor still gets all of it", async (_, bytes, body) => {
    using agent = await scriptedAgent();
    const from = server.output.lines.length;
    // a POST whose body is not all there yet: the edge's side of the stream is still open when the agent's connection closes
    const answer = (s: number) => [...respond(s, bytes, true), fatal()];
    // the answer comes in a few hundred ms and the connection closes after it: the bound is liveness only
    const res = await visitAnswered(agent, answer, "POST", AT_ONCE_MS, "Content-Length: 10\r\n\r\nhalf");
    expect(res.status).toBe(200);
    expect(res.body).toBe(body);
    await expectNoFaultSince(from);
  });

  test.each([
    ["REPLY, then RST", (s: number) => [replyOnly(s), rst(s)]],
    ["REPLY, then a protocol error", (s: number) => [replyOnly(s), fatal()]],
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

describe("a WebSocket's answer is the service's, as it sent it", () => {
  const upgrade = (host: string) =>
    `GET /chat HTTP/1.1\r\nHost: ${host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
    `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat, superchat\r\n\r\n`;

  test("a 101 with the subprotocol it chose passes as sent, and then bytes both ways", async () => {
    using agent = await scriptedAgent();
    const opened = agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length;
    const answer = rawHttp(server.edgePort, upgrade(agent.host), 500);
    const stream = await nthOpen(agent.peer, opened + 1);
    agent.peer.send(Buffer.concat(respond(stream, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: superchat\r\n\r\nbytes of the new protocol")));
    const res = await answer;
    expect(res.status).toBe(101);
    expect(res.head).toMatch(/\r\nSec-WebSocket-Protocol: superchat(\r\n|$)/);
    expect(res.body).toBe("bytes of the new protocol");
  });

  test("a refusal (401 with a challenge and its body) reaches the visitor as it is, with no upgrade", async () => {
    using agent = await scriptedAgent();
    const opened = agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length;
    const answer = rawHttp(server.edgePort, upgrade(agent.host), 500);
    const stream = await nthOpen(agent.peer, opened + 1);
    agent.peer.send(Buffer.concat(respond(stream, 'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm="x"\r\nContent-Length: 6\r\n\r\ndenied', true)));
    const res = await answer;
    expect(res.status).toBe(401);
    expect(res.head).toMatch(/\r\nWWW-Authenticate: Basic realm="x"/);
    expect(res.head).not.toMatch(/\r\nUpgrade:/i);
    expect(res.body).toBe("denied");
  });
});

describe("an agent that stops in the middle of a streamed response body", () => {
  /**
   * A visitor's request answered with a chunked 200 and "partial"; once the visitor has those
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
    agent.peer.send(Buffer.concat(respond(stream, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n")));
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
    ["it ends the stream (FIN) short of the body's end", (agent: { peer: HostilePeer }, stream: number) => agent.peer.send(encodeFrame(FrameType.FIN, stream))],
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
