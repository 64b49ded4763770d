/**
 * The log action's metadata keeps its JSON types, as ngrok's `map[string]any`
 * has them: a number and a bool the policy wrote stay a number and a bool
 * in the server's structured (JSON) log line and in the agent's inspector
 * API, and interpolated values are text; a map and a list stay a map and a
 * list, their members typed and their strings interpolated (one with no
 * interpolation made once, at load); through a real server, agent, local
 * service and curl. Metadata past the caps (its size, how deep it nests)
 * is refused at load.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { DEFAULT_POLICY_LIMITS } from "../../src/policy/limits.ts";
import { loadPolicy } from "../../src/policy/index.ts";
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
        config:
          metadata:
            count: 3
            ratio: 1.5
            ok: true
            off: false
            text: "7"
            path: "\${req.url.path}"
            marker: typed-log-fields
            none: null
            request: { method: "\${req.method}", query: { page: "\${req.url.query}" }, sizes: [1, 2.5, "\${req.url.path}"] }
            fixed: { team: api, weights: [1, 2, { deep: true }], owner: null }
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

const TYPED = {
  count: 3,
  ratio: 1.5,
  ok: true,
  off: false,
  text: "7",
  path: "/typed",
  marker: "typed-log-fields",
  none: null,
  request: { method: "GET", query: { page: "page=2" }, sizes: [1, 2.5, "/typed"] },
  fixed: { team: "api", weights: [1, 2, { deep: true }], owner: null },
};

describe("log metadata keeps its types", () => {
  test("in the server's JSON log line", async () => {
    expect((await curl(`http://${agent.subdomain}.localhost:${rig.server.edgePort}/typed?page=2`)).status).toBe(200);
    const line = await rig.server.output.waitFor(/typed-log-fields/, 5_000);
    const fields = JSON.parse(line.slice(line.indexOf("{"))) as Record<string, unknown>;
    expect(fields.msg).toBe("traffic policy log");
    for (const [k, v] of Object.entries(TYPED)) expect([k, fields[k]]).toEqual([k, v]);
  }, 20_000);

  test("in the inspector's API", async () => {
    expect((await curl(`http://${agent.subdomain}.localhost:${rig.server.edgePort}/typed?page=2`)).status).toBe(200);
    let logs: unknown;
    await waitUntil(
      async () => {
        const list = ((await (await agent.api("/api/requests")).json()) as { requests: { id: number; path: string }[] }).requests;
        const found = list.find((r) => r.path.startsWith("/typed"));
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

describe("log metadata past its caps is refused at load, with the cap named", () => {
  const load = (metadata: unknown) => loadPolicy(JSON.stringify({ on_http_request: [{ actions: [{ type: "log", config: { metadata } }] }] }), { source: "test" });
  const errors = (out: ReturnType<typeof load>) => (Array.isArray(out) ? out.map((e) => e.message).join("\n") : "");

  test("maps and lists nested to the depth cap load; one level more is refused", () => {
    let deepest: unknown = "leaf";
    for (let i = 0; i < DEFAULT_POLICY_LIMITS.maxLogMetadataDepth; i++) deepest = i % 2 === 0 ? { in: deepest } : [deepest];
    expect(Array.isArray(load({ field: deepest }))).toBe(false);
    expect(errors(load({ field: { more: deepest } }))).toContain(`deeper than ${DEFAULT_POLICY_LIMITS.maxLogMetadataDepth} levels`);
  });

  test("metadata larger than the size cap is refused; an infinite number and a value that is no JSON one are refused", () => {
    const big = { list: Array.from({ length: DEFAULT_POLICY_LIMITS.maxLogMetadataBytes / 8 }, (_, i) => `item-${i}`) };
    expect(errors(load(big))).toContain(`${DEFAULT_POLICY_LIMITS.maxLogMetadataBytes} at most`);
    expect(Array.isArray(loadPolicy("on_http_request:\n  - actions: [{ type: log, config: { metadata: { n: .inf } } }]\n", { source: "test" }))).toBe(true);
  });
});
