/**
 * The log action's metadata keeps its JSON types, as ngrok's `map[string]any`
 * has them: a number and a bool the policy wrote stay a number and a bool
 * in the server's structured (JSON) log line and in the agent's inspector
 * API, and interpolated values are text; through a real server, agent,
 * local service and curl.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { startInspectedAgent, startUpstream, type InspectedAgent, type Rig, type Upstream } from "../inspect/rig.ts";
import { curl } from "./curl.ts";
import { policyFile } from "./rig.ts";

const POLICY = `
on_http_request:
  - name: typed
    actions:
      - type: log
        config: { metadata: { count: 3, ratio: 1.5, ok: true, off: false, text: "7", path: "\${req.url.path}", marker: typed-log-fields } }
`;

let rig: Rig;
let upstream: Upstream;
let agent: InspectedAgent;
const file = policyFile(POLICY);

beforeAll(async () => {
  const server = await startServer({ args: ["--log-format", "json"] });
  const admin = await signedIn(server);
  const token = await admin.createToken(await admin.createUser("log-types-user"));
  rig = { server, token, [Symbol.asyncDispose]: async () => void (await server.stop()) };
  upstream = startUpstream();
  agent = await startInspectedAgent(rig, upstream.port, ["--policy-file", file.path]);
}, 30_000);
afterAll(async () => {
  await agent?.[Symbol.asyncDispose]();
  upstream?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
  file[Symbol.dispose]();
});

const TYPED = { count: 3, ratio: 1.5, ok: true, off: false, text: "7", path: "/typed", marker: "typed-log-fields" };

describe("log metadata keeps its types", () => {
  test("in the server's JSON log line", async () => {
    expect((await curl(`http://${agent.subdomain}.localhost:${rig.server.edgePort}/typed`)).status).toBe(200);
    const line = await rig.server.output.waitFor(/typed-log-fields/, 5_000);
    const fields = JSON.parse(line.slice(line.indexOf("{"))) as Record<string, unknown>;
    expect(fields.msg).toBe("traffic policy log");
    for (const [k, v] of Object.entries(TYPED)) expect([k, fields[k]]).toEqual([k, v]);
  }, 20_000);

  test("in the inspector's API", async () => {
    expect((await curl(`http://${agent.subdomain}.localhost:${rig.server.edgePort}/typed`)).status).toBe(200);
    let logs: unknown;
    await waitUntil(
      async () => {
        const list = ((await (await agent.api("/api/requests")).json()) as { requests: { id: number; path: string }[] }).requests;
        const found = list.find((r) => r.path === "/typed");
        if (!found) return false;
        const policy = ((await (await agent.api(`/api/requests/${found.id}`)).json()) as { policy: { logs: unknown[] } | null }).policy;
        logs = policy?.logs;
        return Array.isArray(logs) && logs.length > 0;
      },
      5_000,
      "the request's log fields in the inspector",
    );
    expect(logs).toEqual([TYPED]);
  }, 20_000);
});
