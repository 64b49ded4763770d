/**
 * Notes the agent makes itself, on the wire, seen by an agent scripted
 * frame by frame: to an agent whose HELLO says `derived_notes` (and
 * `policy_passed`), READY lists a tunnel's own rules with their actions
 * when its notes can be made from them and the request's
 * X-Burrow-Policy-Rules field, and the edge sends no POLICY_PASSED note
 * that would say only that. A policy whose rule names would not come
 * through the field as one each (a name twice, two the field spells
 * alike, one of spaces alone, too many rules)
 * or whose response rules are not known at load is listed for no agent,
 * and its notes are sent; an agent that does not say `derived_notes`
 * gets no list and every note, as before.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { hostileWebSocket, type HostilePeer } from "../harness/fuzz.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const WAIT_MS = 10_000;
const MADE = `
on_http_request:
  - name: "api, v2"
    expressions: ["req.url.path.startsWith('/api')"]
    actions: [{ type: add-headers, config: { headers: { x-api: "1" } } }]
  - actions: [{ type: add-headers, config: { headers: { x-all: "1" } } }, { type: remove-headers, config: { headers: [x-gone] } }]
on_http_response:
  - name: security
    actions: [{ type: add-headers, config: { headers: { x-frame-options: DENY } } }]
`;
const rule = (name: string) => `  - name: "${name}"\n    actions: [{ type: add-headers, config: { headers: { x-seen: "1" } } }]\n`;
/** Policies whose notes the agent cannot make from the field and a list. */
const NOT_MADE: Record<string, string> = {
  "two names the field spells alike": `on_http_request:\n${rule("one, two")}${rule("one? two")}`,
  "a name twice": `on_http_request:\n${rule("same")}${rule("same")}`,
  "a name of spaces alone": `on_http_request:\n${rule("   ")}`,
  "more rules than the field names": `on_http_request:\n${Array.from({ length: 21 }, (_, i) => rule(`r${i}`)).join("")}`,
  "a response rule with an expression": `on_http_request:\n${rule("plain")}on_http_response:\n  - name: sometimes\n    expressions: ["res.status_code == 200"]\n    actions: [{ type: add-headers, config: { headers: { x-ok: "1" } } }]\n`,
};

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startServer();
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("derived-notes", { skip_warning: true }));
});
afterAll(async () => {
  await server?.stop();
});

interface Scripted extends Disposable {
  peer: HostilePeer;
  host: string;
  tunnel: string;
  granted: Record<string, unknown>;
}

/** An agent by hand, past its handshake, with `policy` as its tunnel's own; `says`: what its HELLO says of notes. */
async function scriptedAgent(policy: string, says: { policy_passed?: boolean; derived_notes?: boolean }): Promise<Scripted> {
  const peer = await hostileWebSocket(server.edgePort, WAIT_MS);
  peer.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http", policy }], ...says })));
  const ready = () => peer.frames.find((f) => f.type === FrameType.READY || f.type === FrameType.ERROR);
  if (!(await peer.until(() => ready() !== undefined, WAIT_MS))) throw new Error("no READY for the scripted agent");
  const said = JSON.parse(new TextDecoder().decode(ready()!.payload));
  if (ready()!.type !== FrameType.READY) throw new Error(`refused: ${JSON.stringify(said)}`);
  const granted = said.tunnels[0];
  return { peer, host: `${granted.subdomain}.localhost:${server.edgePort}`, tunnel: granted.id, granted, [Symbol.dispose]: () => peer.close() };
}

/** `path` through the tunnel, answered by the scripted agent; resolves with the visitor's answer and the request's head as the agent got it. */
async function visit(agent: Scripted, path: string): Promise<{ answer: string; head: string }> {
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
  const open = agent.peer.frames.filter((f) => f.type === FrameType.OPEN)[opened]!;
  const stream = open.stream;
  const head = () => new TextDecoder().decode(open.payload) + agent.peer.frames.filter((f) => f.type === FrameType.DATA && f.stream === stream).map((f) => new TextDecoder().decode(f.payload)).join("");
  expect(await agent.peer.until(() => head().includes("\r\n\r\n") || head().includes("\\r\\n\\r\\n"), WAIT_MS)).toBe(true);
  agent.peer.send(Buffer.concat([encodeFrame(FrameType.REPLY, stream, jsonPayload({})), encodeFrame(FrameType.DATA, stream, new TextEncoder().encode("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), true)]));
  await done;
  socket.destroy();
  return { answer, head: head() };
}

/** A PING's PONG: everything the edge queued before it has been received. */
async function roundTrip(peer: HostilePeer): Promise<void> {
  const pongs = () => peer.frames.filter((f) => f.type === FrameType.PONG).length;
  const before = pongs();
  peer.send(encodeFrame(FrameType.PING, 0, new Uint8Array([1, 2, 3, 4])));
  expect(await peer.until(() => pongs() > before, WAIT_MS)).toBe(true);
}

const notes = (peer: HostilePeer) => peer.frames.filter((f) => f.type === FrameType.POLICY_PASSED).map((f) => JSON.parse(new TextDecoder().decode(f.payload)));

const LISTED = {
  request: [
    { rule: "api, v2", actions: ["add-headers"] },
    { rule: "#2", actions: ["add-headers", "remove-headers"] },
  ],
  response: [{ rule: "security", actions: ["add-headers"] }],
};

test("an agent that says derived_notes is given the tunnel's rules in READY, and sent no note it can make from them and the field", async () => {
  using agent = await scriptedAgent(MADE, { policy_passed: true, derived_notes: true });
  expect(agent.granted.notes).toEqual(LISTED);
  const { answer, head } = await visit(agent, "/api/x");
  expect(answer).toStartWith("HTTP/1.1 200");
  expect(answer.toLowerCase()).toContain("x-frame-options: deny");
  // the field spells a comma in a name as "?": the list names the rule as it is
  expect(head).toMatch(/X-Burrow-Policy-Rules: api\? v2, #2(\r\n|\\r\\n)/i);
  await visit(agent, "/other");
  await roundTrip(agent.peer);
  expect(notes(agent.peer)).toEqual([]);
}, 30_000);

test("an agent that does not say derived_notes gets no list, and every note as before", async () => {
  using agent = await scriptedAgent(MADE, { policy_passed: true });
  expect(agent.granted.notes).toBeUndefined();
  await visit(agent, "/api/x");
  expect(await agent.peer.until(() => notes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(notes(agent.peer)[0]).toMatchObject({ tunnel: agent.tunnel, request: { rules: LISTED.request }, response: { rules: LISTED.response } });
}, 30_000);

test("an agent that says derived_notes but not policy_passed is given no list (it is told no note)", async () => {
  using agent = await scriptedAgent(MADE, { derived_notes: true });
  expect(agent.granted.notes).toBeUndefined();
  await visit(agent, "/api/x");
  await roundTrip(agent.peer);
  expect(notes(agent.peer)).toEqual([]);
}, 30_000);

for (const [what, policy] of Object.entries(NOT_MADE)) {
  test(`a policy with ${what}: no list, and its notes are sent`, async () => {
    using agent = await scriptedAgent(policy, { policy_passed: true, derived_notes: true });
    expect(agent.granted.notes).toBeUndefined();
    await visit(agent, "/x");
    expect(await agent.peer.until(() => notes(agent.peer).length === 1, WAIT_MS)).toBe(true);
    expect(notes(agent.peer)[0].request.rules.length).toBeGreaterThan(0);
  }, 30_000);
}
