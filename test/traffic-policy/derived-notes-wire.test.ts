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
import { signedIn } from "../harness/admin.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { passedNotes, roundTrip, scriptedAgent, scriptedVisit } from "./scripted-agent.ts";

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

/** An agent by hand with `policy` as its tunnel's own; `says`: what its HELLO says of notes. */
const agentWith = (policy: string, says: { policy_passed?: boolean; derived_notes?: boolean }) => scriptedAgent(server.edgePort, token, policy, says);

const LISTED = {
  request: [
    { rule: "api, v2", actions: ["add-headers"] },
    { rule: "#2", actions: ["add-headers", "remove-headers"] },
  ],
  response: [{ rule: "security", actions: ["add-headers"] }],
};

test("an agent that says derived_notes is given the tunnel's rules in READY, and sent no note it can make from them and the field", async () => {
  using agent = await agentWith(MADE, { policy_passed: true, derived_notes: true });
  expect(agent.granted.notes).toEqual(LISTED);
  const { answer, head } = await scriptedVisit(agent, "/api/x");
  expect(answer).toStartWith("HTTP/1.1 200");
  expect(answer.toLowerCase()).toContain("x-frame-options: deny");
  // the field spells a comma in a name as "?": the list names the rule as it is
  expect(head).toMatch(/X-Burrow-Policy-Rules: api\? v2, #2(\r\n|\\r\\n)/i);
  await scriptedVisit(agent, "/other");
  await roundTrip(agent.peer);
  expect(passedNotes(agent.peer)).toEqual([]);
}, 30_000);

test("an agent that does not say derived_notes gets no list, and every note as before", async () => {
  using agent = await agentWith(MADE, { policy_passed: true });
  expect(agent.granted.notes).toBeUndefined();
  await scriptedVisit(agent, "/api/x");
  expect(await agent.peer.until(() => passedNotes(agent.peer).length === 1, WAIT_MS)).toBe(true);
  expect(passedNotes(agent.peer)[0]).toMatchObject({ tunnel: agent.tunnel, request: { rules: LISTED.request }, response: { rules: LISTED.response } });
}, 30_000);

test("an agent that says derived_notes but not policy_passed is given no list (it is told no note)", async () => {
  using agent = await agentWith(MADE, { derived_notes: true });
  expect(agent.granted.notes).toBeUndefined();
  await scriptedVisit(agent, "/api/x");
  await roundTrip(agent.peer);
  expect(passedNotes(agent.peer)).toEqual([]);
}, 30_000);

for (const [what, policy] of Object.entries(NOT_MADE)) {
  test(`a policy with ${what}: no list, and its notes are sent`, async () => {
    using agent = await agentWith(policy, { policy_passed: true, derived_notes: true });
    expect(agent.granted.notes).toBeUndefined();
    await scriptedVisit(agent, "/x");
    expect(await agent.peer.until(() => passedNotes(agent.peer).length === 1, WAIT_MS)).toBe(true);
    expect(passedNotes(agent.peer)[0].request.rules.length).toBeGreaterThan(0);
  }, 30_000);
}
