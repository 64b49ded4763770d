/**
 * POLICY_PASSED on the wire, seen by an agent scripted frame by frame: an
 * agent whose HELLO says `policy_passed` is told, after it answered a
 * request its tunnel's rules matched, which rules and log fields, naming
 * the stream that carried it; an agent of the version before (its HELLO
 * does not say it) is never sent the frame, and its requests go on as
 * before. A request no rule matched is told of to neither. The log
 * fields' numbers and bools go typed to an agent whose HELLO says
 * `typed_logs`, as text to one of the version before; a field that is a
 * map or a list (its strings interpolated) goes as it is to one whose
 * HELLO says `json_logs` too, as JSON text to the others.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { hostileWebSocket, type HostilePeer } from "../harness/fuzz.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const WAIT_MS = 10_000;
const POLICY = `
on_http_request:
  - name: logged
    expressions: ["req.url.path == '/logged'"]
    actions: [{ type: log, config: { metadata: { seen: "\${req.url.path}", n: 3, ok: true, where: { path: "\${req.url.path}", tags: [1, "a", null] } } } }]
`;

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startServer();
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("wire-notes", { skip_warning: true }));
});
afterAll(async () => {
  await server?.stop();
});

/** An agent by hand, past its handshake, with the tunnel's own policy; `passed`: its HELLO says `policy_passed`. */
async function scriptedAgent(passed: boolean, typed = false, json = false): Promise<{ peer: HostilePeer; host: string; tunnel: string } & Disposable> {
  const peer = await hostileWebSocket(server.edgePort, WAIT_MS);
  peer.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http", policy: POLICY }], ...(passed ? { policy_passed: true } : {}), ...(typed ? { typed_logs: true } : {}), ...(json ? { json_logs: true } : {}) })));
  const ready = () => peer.frames.find((f) => f.type === FrameType.READY || f.type === FrameType.ERROR);
  if (!(await peer.until(() => ready() !== undefined, WAIT_MS))) throw new Error("no READY for the scripted agent");
  const said = JSON.parse(new TextDecoder().decode(ready()!.payload));
  if (ready()!.type !== FrameType.READY) throw new Error(`refused: ${JSON.stringify(said)}`);
  const granted = said.tunnels[0];
  return { peer, host: `${granted.subdomain}.localhost:${server.edgePort}`, tunnel: granted.id, [Symbol.dispose]: () => peer.close() };
}

/** `path` through the tunnel, answered by the scripted agent; resolves with the visitor's answer and the stream that carried it. */
async function visit(agent: { peer: HostilePeer; host: string }, path: string): Promise<{ answer: string; stream: number }> {
  const opened = agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length;
  const socket = connect(server.edgePort, "127.0.0.1");
  let answer = "";
  const done = new Promise<void>((resolve) => {
    socket.on("data", (b: Buffer) => {
      answer += b.toString("latin1");
      if (answer.endsWith("ok")) resolve();
    });
    socket.on("close", () => resolve());
  });
  socket.on("error", () => {});
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${agent.host}\r\nConnection: close\r\n\r\n`);
  expect(await agent.peer.until(() => agent.peer.frames.filter((f) => f.type === FrameType.OPEN).length > opened, WAIT_MS)).toBe(true);
  const stream = agent.peer.frames.filter((f) => f.type === FrameType.OPEN)[opened]!.stream;
  agent.peer.send(Buffer.concat([encodeFrame(FrameType.REPLY, stream, jsonPayload({})), encodeFrame(FrameType.DATA, stream, new TextEncoder().encode("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), true)]));
  await done;
  socket.destroy();
  return { answer, stream };
}

/** A PING's PONG: everything the edge queued before it has been received. */
async function roundTrip(peer: HostilePeer): Promise<void> {
  const pongs = () => peer.frames.filter((f) => f.type === FrameType.PONG).length;
  const before = pongs();
  peer.send(encodeFrame(FrameType.PING, 0, new Uint8Array([1, 2, 3, 4])));
  expect(await peer.until(() => pongs() > before, WAIT_MS)).toBe(true);
}

/** The map field as JSON text, for an agent that does not read maps and lists in a note. */
const WHERE_TEXT = JSON.stringify({ path: "/logged", tags: [1, "a", null] });

const notes = (peer: HostilePeer) => peer.frames.filter((f) => f.type === FrameType.POLICY_PASSED).map((f) => JSON.parse(new TextDecoder().decode(f.payload)));

test("an agent that says policy_passed is told what its rules did with a request it answered, by the stream that carried it", async () => {
  using agent = await scriptedAgent(true);
  const { answer, stream } = await visit(agent, "/logged");
  expect(answer).toStartWith("HTTP/1.1 200");
  expect(await agent.peer.until(() => notes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(notes(agent.peer)[0]).toEqual({ tunnel: agent.tunnel, stream, request: { rules: [{ rule: "logged", actions: ["log"] }], logs: [{ seen: "/logged", n: "3", ok: "true", where: WHERE_TEXT }] } });
  // a request no rule matched: nothing to tell
  await visit(agent, "/other");
  await roundTrip(agent.peer);
  expect(notes(agent.peer).length).toBe(1);
}, 30_000);

test("an agent of the version before (no policy_passed in its HELLO) is never sent the frame, and its requests are served as before", async () => {
  using agent = await scriptedAgent(false);
  const { answer } = await visit(agent, "/logged");
  expect(answer).toStartWith("HTTP/1.1 200");
  await roundTrip(agent.peer);
  expect(notes(agent.peer)).toEqual([]);
  expect(agent.peer.frames.some((f) => f.type === FrameType.ERROR)).toBe(false);
}, 30_000);

test("an agent whose HELLO says typed_logs is told the log fields' numbers and bools as they are", async () => {
  using agent = await scriptedAgent(true, true);
  const { stream } = await visit(agent, "/logged");
  expect(await agent.peer.until(() => notes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(notes(agent.peer)[0]).toEqual({ tunnel: agent.tunnel, stream, request: { rules: [{ rule: "logged", actions: ["log"] }], logs: [{ seen: "/logged", n: 3, ok: true, where: WHERE_TEXT }] } });
}, 30_000);

test("an agent whose HELLO says json_logs too is told a log field's map and list as they are, their members typed", async () => {
  using agent = await scriptedAgent(true, true, true);
  const { stream } = await visit(agent, "/logged");
  expect(await agent.peer.until(() => notes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(notes(agent.peer)[0]).toEqual({ tunnel: agent.tunnel, stream, request: { rules: [{ rule: "logged", actions: ["log"] }], logs: [{ seen: "/logged", n: 3, ok: true, where: { path: "/logged", tags: [1, "a", null] } }] } });
}, 30_000);
