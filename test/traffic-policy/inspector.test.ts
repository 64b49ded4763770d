/**
 * The agent's request inspector and the traffic policies, through a real
 * server and agent (`burrow http --policy-file`, its inspector's API): a
 * request the tunnel's rules let through shows the rules that matched; one
 * they answered at the edge, which never reaches the agent, is listed all
 * the same (the server sends a POLICY note) with the rules that matched,
 * the action and rule that ended it and its log action's fields; one the
 * operator's policy answered says the action and "server", and names none
 * of the operator's rules. Such a request cannot be replayed. Refused
 * requests in a flood are told at a bounded pace, and the next note says
 * how many were left out.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { waitUntil } from "../harness/wait.ts";
import { startInspectedAgent, startRig, startUpstream, type InspectedAgent, type Rig, type Upstream } from "../inspect/rig.ts";
import { signedIn } from "../harness/admin.ts";
import { policyFile } from "./rig.ts";

const OWN = `
on_http_request:
  - name: api calls
    expressions: ["req.url.path.startsWith('/api')"]
    actions: [{ type: add-headers, config: { headers: { x-api: "yes" } } }]
  - name: everything
    actions: [{ type: add-headers, config: { headers: { x-all: "yes" } } }]
  - name: no admin
    expressions: ["req.url.path.startsWith('/admin')"]
    actions:
      - type: log
        config: { metadata: { refused: "\${req.url.path}", who: "\${conn.client_ip}" } }
      - type: deny
        config: { status_code: 404 }
`;

interface Summary {
  id: number;
  path: string;
  status: number | null;
  answered_by: "service" | "edge";
}

let rig: Rig;
let upstream: Upstream;
let a: InspectedAgent;
const file = policyFile(OWN);

beforeAll(async () => {
  rig = await startRig();
  upstream = startUpstream();
  const api = await signedIn(rig.server);
  const made = await api.post("/api/policies", {
    name: "operator's secret rule",
    policy: "on_http_request: [{name: operator-only, expressions: [\"req.url.path == '/forbidden'\"], actions: [{type: deny, config: {status_code: 451}}]}]",
  });
  if (made.status !== 201) throw new Error(`policy not made: ${JSON.stringify(made.body)}`);
  a = await startInspectedAgent(rig, upstream.port, ["--policy-file", file.path]);
}, 30_000);
afterAll(async () => {
  await a?.[Symbol.asyncDispose]();
  upstream?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
  file[Symbol.dispose]();
});

const list = async () => ((await (await a.api("/api/requests")).json()) as { requests: Summary[] }).requests;
const detail = async (id: number) => (await a.api(`/api/requests/${id}`)).json() as Promise<{ policy: unknown; request: { headers: [string, string][] } }>;
/** The newest capture of `path`, once the inspector has it. */
async function captured(path: string, answeredBy: Summary["answered_by"]): Promise<Summary> {
  let found: Summary | undefined;
  await waitUntil(async () => (found = (await list()).find((s) => s.path === path && s.answered_by === answeredBy)) !== undefined, 5_000, `${path} in the inspector`);
  return found!;
}

describe("the inspector and the tunnel's traffic policy", () => {
  test("a request let through: the rules that matched, nothing ended it", async () => {
    expect((await a.visit("/api/users")).status).toBe(200);
    const c = await captured("/api/users", "service");
    expect((await detail(c.id)).policy).toEqual({ rules: ["api calls", "everything"], ended: null, logs: [], skipped_before: 0, events: null, response: null });
  });

  test("a request the tunnel's rule answered at the edge is listed, with the rules, the rule and action that ended it, and its log fields", async () => {
    const before = upstream.seen.length;
    expect((await a.visit("/admin/users")).status).toBe(404);
    const c = await captured("/admin/users", "edge");
    expect(c.status).toBe(404);
    expect(upstream.seen.length).toBe(before); // it never reached the service
    expect((await detail(c.id)).policy).toEqual({
      rules: ["everything", "no admin"],
      ended: { phase: "request", by: "tunnel", action: "deny", rule: "no admin", status: 404 },
      logs: [{ refused: "/admin/users", who: "127.0.0.1" }],
      skipped_before: 0,
      events: null,
      response: null,
    });
    // its headers and body never came here: it cannot be sent again
    const replay = await a.api(`/api/requests/${c.id}/replay`, { method: "POST" });
    expect(replay.status).toBe(409);
    expect(((await replay.json()) as { code: string }).code).toBe("NOT_REPLAYABLE");
  });

  test("a request the operator's policy answered says the action and the server, and names none of the operator's rules", async () => {
    expect((await a.visit("/forbidden")).status).toBe(451);
    const c = await captured("/forbidden", "edge");
    const policy = await detail(c.id);
    expect(policy.policy).toEqual({ rules: [], ended: { phase: "request", by: "server", action: "deny", status: 451 }, logs: [], skipped_before: 0, events: null, response: null });
    expect(JSON.stringify(policy)).not.toContain("operator-only");
  });

  test("a flood of refused requests is told at a bounded pace; each note says how many were left out before it", async () => {
    // in batches of 20 at once (more would meet the server's connections per address first)
    const statuses: number[] = [];
    for (let batch = 0; batch < 15; batch++) {
      const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => a.visit(`/admin/flood/${batch * 20 + i}`)));
      for (const r of answers) {
        statuses.push(r.status);
        await r.arrayBuffer();
      }
    }
    expect(statuses.every((s) => s === 404)).toBe(true);
    // the bucket refills: a later refused request is told, with the count of those left out before it
    let tries = 0;
    await waitUntil(
      async () => {
        tries++;
        await a.visit("/admin/after");
        return (await list()).some((s) => s.path === "/admin/after");
      },
      5_000,
      "a note after the flood",
      100,
    );
    // every refused request is told, or counted in the next note told: none is lost without a word
    const edge = (await list()).filter((s) => s.answered_by === "edge" && (s.path.startsWith("/admin/flood") || s.path === "/admin/after"));
    expect(edge.filter((s) => s.path.startsWith("/admin/flood")).length).toBeLessThan(300);
    let counted = 0;
    for (const s of edge) counted += ((await detail(s.id)).policy as { skipped_before: number }).skipped_before;
    // 300 and the tries of /admin/after were refused: each told, or counted by the next note told
    // (the tries' last notes may still be on their way when the loop saw the first)
    expect(edge.length + counted).toBeGreaterThanOrEqual(301);
    expect(edge.length + counted).toBeLessThanOrEqual(300 + tries);
  });
});
