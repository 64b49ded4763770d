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
import { FrameType } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { passedNotes, roundTrip, scriptedAgent, scriptedVisit } from "./scripted-agent.ts";

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

/** An agent by hand with the tunnel's own policy; `passed`: its HELLO says `policy_passed` (`typed`: `typed_logs`, `json`: `json_logs`). */
const agentWith = (passed: boolean, typed = false, json = false) =>
  scriptedAgent(server.edgePort, token, POLICY, { ...(passed ? { policy_passed: true } : {}), ...(typed ? { typed_logs: true } : {}), ...(json ? { json_logs: true } : {}) });

/** The map field as JSON text, for an agent that does not read maps and lists in a note. */
const WHERE_TEXT = JSON.stringify({ path: "/logged", tags: [1, "a", null] });

test("an agent that says policy_passed is told what its rules did with a request it answered, by the stream that carried it", async () => {
  using agent = await agentWith(true);
  const { answer, stream } = await scriptedVisit(agent, "/logged");
  expect(answer).toStartWith("HTTP/1.1 200");
  expect(await agent.peer.until(() => passedNotes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(passedNotes(agent.peer)[0]).toEqual({ tunnel: agent.tunnel, stream, request: { rules: [{ rule: "logged", actions: ["log"] }], logs: [{ seen: "/logged", n: "3", ok: "true", where: WHERE_TEXT }] } });
  // a request no rule matched: nothing to tell
  await scriptedVisit(agent, "/other");
  await roundTrip(agent.peer);
  expect(passedNotes(agent.peer).length).toBe(1);
}, 30_000);

test("an agent of the version before (no policy_passed in its HELLO) is never sent the frame, and its requests are served as before", async () => {
  using agent = await agentWith(false);
  const { answer } = await scriptedVisit(agent, "/logged");
  expect(answer).toStartWith("HTTP/1.1 200");
  await roundTrip(agent.peer);
  expect(passedNotes(agent.peer)).toEqual([]);
  expect(agent.peer.frames.some((f) => f.type === FrameType.ERROR)).toBe(false);
}, 30_000);

test("an agent whose HELLO says typed_logs is told the log fields' numbers and bools as they are", async () => {
  using agent = await agentWith(true, true);
  const { stream } = await scriptedVisit(agent, "/logged");
  expect(await agent.peer.until(() => passedNotes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(passedNotes(agent.peer)[0]).toEqual({ tunnel: agent.tunnel, stream, request: { rules: [{ rule: "logged", actions: ["log"] }], logs: [{ seen: "/logged", n: 3, ok: true, where: WHERE_TEXT }] } });
}, 30_000);

test("an agent whose HELLO says json_logs too is told a log field's map and list as they are, their members typed", async () => {
  using agent = await agentWith(true, true, true);
  const { stream } = await scriptedVisit(agent, "/logged");
  expect(await agent.peer.until(() => passedNotes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(passedNotes(agent.peer)[0]).toEqual({ tunnel: agent.tunnel, stream, request: { rules: [{ rule: "logged", actions: ["log"] }], logs: [{ seen: "/logged", n: 3, ok: true, where: { path: "/logged", tags: [1, "a", null] } }] } });
}, 30_000);
