/**
 * Hostile peers at the agents' endpoint: whatever arrives on
 * /_burrow/connect, the edge answers with an ERROR frame naming the fault
 * (or just closes), and keeps serving everyone else.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { encodeFrame, jsonPayload, type Frame } from "../../src/protocol/frames.ts";
import { FrameType, MAX_PAYLOAD, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { agentWebSocketPeer } from "../harness/agent-peer.ts";

const WAIT_MS = 5_000;
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

function refusal(frames: Frame[]): { code: string; message: string } | undefined {
  const error = frames.find((f) => f.type === FrameType.ERROR);
  return error && JSON.parse(new TextDecoder().decode(error.payload));
}

const hello = (extra: Record<string, unknown> = {}) =>
  encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token: "brw_x", tunnels: [{ protocol: "http" }], ...extra }));

test("a text message gets PROTOCOL_ERROR and the connection closes", async () => {
  const { frames, closed } = await hostile(["hello?"]);
  expect(refusal(frames)?.code).toBe("PROTOCOL_ERROR");
  expect(closed).toBe(true);
});

test("garbage bytes get PROTOCOL_ERROR and the connection closes", async () => {
  const { frames, closed } = await hostile([new Uint8Array([0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7])]);
  expect(refusal(frames)?.code).toBe("PROTOCOL_ERROR");
  expect(closed).toBe(true);
});

test("a frame that claims more than MAX_PAYLOAD is refused from its header", async () => {
  const header = encodeFrame(FrameType.HELLO, 0);
  new DataView(header.buffer).setUint32(5, MAX_PAYLOAD + 1);
  const { frames, closed } = await hostile([header]);
  expect(refusal(frames)?.message).toContain("exceeds");
  expect(closed).toBe(true);
});

test("a 1 MiB frame is refused and the connection closes", async () => {
  const big = new Uint8Array(1024 * 1024 + 9);
  big.set(encodeFrame(FrameType.HELLO, 0).subarray(0, 5));
  new DataView(big.buffer).setUint32(5, 1024 * 1024);
  const { frames, closed } = await hostile([big]);
  expect(refusal(frames)?.code).toBe("PROTOCOL_ERROR");
  expect(closed).toBe(true);
});

test("a message larger than the edge accepts at all is cut off without harm", async () => {
  const { closed } = await hostile([new Uint8Array(20 * 1024 * 1024)]);
  expect(closed).toBe(true);
});

test("a HELLO that is not JSON, or misses fields, gets PROTOCOL_ERROR", async () => {
  for (const bad of [encodeFrame(FrameType.HELLO, 0, new TextEncoder().encode("{nope")), encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: 1 }))]) {
    const { frames, closed } = await hostile([bad]);
    expect(refusal(frames)?.code).toBe("PROTOCOL_ERROR");
    expect(closed).toBe(true);
  }
});

test("a HELLO from another protocol version is refused with advice to update", async () => {
  const { frames } = await hostile([hello({ version: PROTOCOL_VERSION + 1 })]);
  const r = refusal(frames)!;
  expect(r.code).toBe("VERSION_MISMATCH");
  expect(r.message).toMatch(/update burrow/);
});

test("stream frames before the handshake, or a second HELLO, are refused", async () => {
  const early = await hostile([encodeFrame(FrameType.DATA, 2, new Uint8Array([1]))]);
  expect(refusal(early.frames)?.code).toBe("PROTOCOL_ERROR");
  const again = await hostile([encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }] })), hello()]);
  expect(again.frames.some((f) => f.type === FrameType.READY)).toBe(true);
  expect(refusal(again.frames)?.code).toBe("PROTOCOL_ERROR");
});

test("after all of that, the server still serves its admin API and an honest agent", async () => {
  expect((await api.get("/api/auth/me")).status).toBe(200);
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
  const res = await tunnelFetch(server.edgePort, agent.subdomain!, "/");
  expect(await res.text()).toBe("still here");
  expect(server.proc.exitCode).toBeNull();
  expect(server.output.text()).not.toMatch(/edge request failed|TypeError|RangeError/);
});
