/**
 * The agent's request inspector and what the traffic policies did with a
 * request they let through, through a real server, agent and local
 * service: the response's rules that matched and their actions
 * (add-headers, compress-response, log), a response rule's custom-response
 * that replaced the service's answer (the tunnel's, named; the operator's,
 * not), and the log action's fields of the request's phase and the
 * response's, in the inspector's API and in the server's structured log;
 * over HTTP/1.1 (fetch, curl) and HTTP/2 (curl, h2c prior knowledge). A
 * tunnel without a policy, or whose rules match nothing, shows none.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { waitUntil } from "../harness/wait.ts";
import { startInspectedAgent, startRig, startUpstream, type InspectedAgent, type Rig, type Upstream } from "../inspect/rig.ts";
import { curl } from "./curl.ts";
import { policyFile } from "./rig.ts";

const OWN = `
on_http_request:
  - name: logged
    expressions: ["req.url.path.startsWith('/logged')"]
    actions:
      - type: log
        config: { metadata: { seen: "\${req.url.path}", marker: passed-request-log } }
on_http_response:
  - name: stamp
    expressions: ["req.url.path.startsWith('/logged') || req.url.path == '/big'"]
    actions: [{ type: add-headers, config: { headers: { x-stamped: "yes" } } }]
  - name: squeeze
    expressions: ["req.url.path == '/big'"]
    actions: [{ type: compress-response, config: { algorithms: [gzip] } }]
  - name: response log
    expressions: ["req.url.path.startsWith('/logged')"]
    actions:
      - type: log
        config: { metadata: { status: "\${res.status_code}", marker: passed-response-log } }
  - name: hide missing
    expressions: ["res.status_code == 404"]
    actions: [{ type: custom-response, config: { status_code: 410, body: "gone" } }]
`;

/** Only request rules: the note of a request with no response phase. */
const REQUEST_ONLY = `
on_http_request:
  - name: h2 logged
    expressions: ["req.url.path.startsWith('/h2')"]
    actions:
      - type: log
        config: { metadata: { seen: "\${req.url.path}", marker: passed-h2-log } }
`;

interface Summary {
  id: number;
  path: string;
  status: number | null;
  answered_by: "service" | "edge";
}

let rig: Rig;
let upstream: Upstream;
let own: InspectedAgent;
let h2: InspectedAgent;
let plain: InspectedAgent;
const ownFile = policyFile(OWN);
const h2File = policyFile(REQUEST_ONLY);

beforeAll(async () => {
  rig = await startRig();
  upstream = startUpstream();
  [own, h2, plain] = await Promise.all([
    startInspectedAgent(rig, upstream.port, ["--policy-file", ownFile.path]),
    startInspectedAgent(rig, upstream.port, ["--policy-file", h2File.path]),
    startInspectedAgent(rig, upstream.port),
  ]);
  // the operator's response rule covers the first tunnel alone
  const api = await signedIn(rig.server);
  const made = await api.post("/api/policies", {
    name: "operator's response rule",
    scope: "hostname",
    hostname: `${own.subdomain}.localhost`,
    policy: "on_http_response: [{name: operator-secret, expressions: [\"req.url.path.startsWith('/operator-replaced')\"], actions: [{type: log, config: {metadata: {operator_field: operator-log-secret}}}, {type: custom-response, config: {status_code: 503, body: maintenance}}]}]",
  });
  if (made.status !== 201) throw new Error(`policy not made: ${JSON.stringify(made.body)}`);
  // a change reaches live tunnels within 5 s: this waits for it (on a path no test looks at)
  await waitUntil(async () => (await own.visit("/operator-replaced/probe")).status === 503, 10_000, "the operator's policy on the tunnel", 100);
}, 30_000);
afterAll(async () => {
  await Promise.all([own?.[Symbol.asyncDispose](), h2?.[Symbol.asyncDispose](), plain?.[Symbol.asyncDispose]()]);
  upstream?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
  ownFile[Symbol.dispose]();
  h2File[Symbol.dispose]();
});

const url = (a: InspectedAgent, path: string) => `http://${a.subdomain}.localhost:${rig.server.edgePort}${path}`;
const list = async (a: InspectedAgent) => ((await (await a.api("/api/requests")).json()) as { requests: Summary[] }).requests;
const policyOf = async (a: InspectedAgent, id: number) => ((await (await a.api(`/api/requests/${id}`)).json()) as { policy: Record<string, unknown> | null }).policy;

/** The newest capture of `path` once it is done, and its policy once `ready` says it is all there (the note comes after the response's head). */
async function captured(a: InspectedAgent, path: string, ready: (policy: Record<string, unknown> | null) => boolean = (p) => p !== null) {
  let found: Summary | undefined;
  let policy: Record<string, unknown> | null = null;
  await waitUntil(
    async () => {
      found = (await list(a)).find((s) => s.path === path);
      if (!found) return false;
      policy = await policyOf(a, found.id);
      return ready(policy);
    },
    5_000,
    `${path} in the inspector`,
  );
  return { summary: found!, policy: policy as Record<string, unknown> | null };
}

/** The note of a request to /logged…, let through with a 200: its request rule's log fields, and the response's rules (stamp, response log) with theirs. */
const loggedNote = (path: string) => ({
  rules: ["logged"],
  ended: null,
  logs: [{ seen: path, marker: "passed-request-log" }],
  skipped_before: 0,
  events: null,
  response: {
    rules: [
      { rule: "stamp", actions: ["add-headers"] },
      { rule: "response log", actions: ["log"] },
    ],
    logs: [{ status: "200", marker: "passed-response-log" }],
  },
});

describe("a request the policies let through, in the inspector", () => {
  test("HTTP/1.1: the request's log fields, and the response's rules with their actions and log fields", async () => {
    const r = await own.visit("/logged/one");
    expect(r.status).toBe(200);
    expect(r.headers.get("x-stamped")).toBe("yes");
    await r.text();
    const { policy } = await captured(own, "/logged/one", (p) => p?.response != null);
    expect(policy).toEqual(loggedNote("/logged/one"));
  }, 20_000);

  test("both phases' log fields go into the server's structured log for a request let through", async () => {
    expect((await curl(url(own, "/logged/server-log"))).status).toBe(200);
    const request = await rig.server.output.waitFor(/traffic policy log.*passed-request-log.*\/logged\/server-log|\/logged\/server-log.*passed-request-log/, 5_000);
    expect(request).toContain("on_http_request");
    const response = await rig.server.output.waitFor(/traffic policy log.*passed-response-log|passed-response-log.*traffic policy log/, 5_000);
    expect(response).toContain("on_http_response");
  }, 20_000);

  test("compress-response is shown as what the response's rule did (curl --compressed reads the body back)", async () => {
    const r = await curl(url(own, "/big"), ["--compressed"]);
    expect(r.status).toBe(200);
    expect(r.headers["content-encoding"]).toBe("gzip");
    expect(r.body.length).toBe(1536 * 1024);
    const { policy } = await captured(own, "/big", (p) => p?.response != null);
    expect(policy!.rules).toEqual([]);
    expect(policy!.ended).toBeNull();
    expect(policy!.response).toEqual({
      rules: [
        { rule: "stamp", actions: ["add-headers"] },
        { rule: "squeeze", actions: ["compress-response"] },
      ],
      logs: [],
    });
  }, 20_000);

  test("a response rule's custom-response that replaced the service's answer: the rule, the action, the status the visitor got", async () => {
    const r = await curl(url(own, "/missing"));
    expect(r.status).toBe(410);
    expect(r.body).toBe("gone");
    const { summary, policy } = await captured(own, "/missing", (p) => p?.ended != null);
    expect(summary.status).toBe(404); // the service's answer, as it came to the agent
    expect(summary.answered_by).toBe("service");
    expect(policy).toEqual({
      rules: [],
      ended: { phase: "response", by: "tunnel", action: "custom-response", rule: "hide missing", status: 410 },
      logs: [],
      skipped_before: 0,
      events: null,
      response: { rules: [{ rule: "hide missing", actions: ["custom-response"] }], logs: [] },
    });
  }, 20_000);

  test("the operator's response rule that replaced the answer says the action and the server, and names none of its rules nor its log fields", async () => {
    const r = await curl(url(own, "/operator-replaced"));
    expect(r.status).toBe(503);
    const { policy } = await captured(own, "/operator-replaced", (p) => p?.ended != null);
    expect(policy).toEqual({
      rules: [],
      ended: { phase: "response", by: "server", action: "custom-response", status: 503 },
      logs: [],
      skipped_before: 0,
      events: null,
      response: { rules: [], logs: [] },
    });
    // neither its rule's name nor its log action's fields (those go to the server's log alone)
    expect(JSON.stringify(policy)).not.toContain("operator-secret");
    expect(JSON.stringify(policy)).not.toContain("operator-log-secret");
    await rig.server.output.waitFor(/operator-log-secret/, 5_000);
  }, 20_000);

  test("HTTP/2 (curl, h2c prior knowledge): the request's rules and log fields of a request let through", async () => {
    const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{response_code}", url(h2, "/h2/stream")], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    expect(await new Response(proc.stdout).text()).toBe("2 200");
    const { policy } = await captured(h2, "/h2/stream", (p) => Array.isArray(p?.logs) && (p.logs as unknown[]).length > 0);
    expect(policy).toEqual({ rules: ["h2 logged"], ended: null, logs: [{ seen: "/h2/stream", marker: "passed-h2-log" }], skipped_before: 0, events: null, response: null });
    await rig.server.output.waitFor(/passed-h2-log/, 5_000);
  }, 20_000);

  test("HTTP/2 (curl, h2c prior knowledge) to a tunnel with response rules: the stream meets them, and the note shows both phases", async () => {
    const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-D", "-", "-o", "/dev/null", "-w", "%{http_version} %{response_code}", url(own, "/logged/h2")], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    const out = await new Response(proc.stdout).text();
    expect(out).toEndWith("2 200");
    expect(out.toLowerCase()).toContain("x-stamped: yes");
    const { policy } = await captured(own, "/logged/h2", (p) => p?.response != null);
    expect(policy).toEqual(loggedNote("/logged/h2"));
  }, 20_000);

  test("HTTP/1.1 kept connection: each request's note is its own", async () => {
    // curl sends both on one connection: the edge carries them on one kept stream to the agent
    const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "-o", "/dev/null", "-o", "/dev/null", url(own, "/logged/first"), url(own, "/logged/second")], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    expect(await proc.exited).toBe(0);
    for (const path of ["/logged/first", "/logged/second"]) {
      const { policy } = await captured(own, path, (p) => p?.response != null);
      expect((policy!.logs as { seen: string }[])[0]!.seen).toBe(path);
    }
  }, 20_000);

  test("no policy, or rules that match nothing: nothing is shown", async () => {
    expect((await plain.visit("/plain")).status).toBe(200);
    expect((await own.visit("/unmatched")).status).toBe(200);
    expect((await h2.visit("/unmatched-h2")).status).toBe(200);
    // a later request's note has come: any for these would have come before it
    expect((await own.visit("/logged/after")).status).toBe(200);
    await captured(own, "/logged/after", (p) => p?.response != null);
    for (const [a, path] of [[plain, "/plain"], [own, "/unmatched"], [h2, "/unmatched-h2"]] as const) {
      const { policy } = await captured(a, path, () => true);
      expect(policy).toBeNull();
    }
  }, 20_000);
});
