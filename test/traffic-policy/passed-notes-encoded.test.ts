/**
 * The inspector's notes of requests the policies let through, told from
 * the last note's bytes when a request matched the same rules as the one
 * before (passed-notes.ts): every note so told must read as the one made
 * afresh would, whatever came between (another tunnel's rules, other
 * rules of the same tunnel, a note with log fields, none at all).
 */
import { describe, expect, test } from "bun:test";
import { parseRequestHead, type RequestHead } from "../../src/http/request-head.ts";
import { EDGE_READS } from "../../src/edge/forward.ts";
import { judgeRequest, requestFacts } from "../../src/edge/traffic-policy/http-request.ts";
import { tellPassed, tellPassedKnown, toldWhenAnswered } from "../../src/edge/traffic-policy/passed-notes.ts";
import { TunnelPolicy } from "../../src/edge/traffic-policy/tunnel-policy.ts";
import type { Tunnel } from "../../src/edge/registry.ts";
import { loadPolicy, type Policy } from "../../src/policy/index.ts";
import { WorkingResponse } from "../../src/policy/message.ts";

const A = `
on_http_request:
  - name: admin
    expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: add-headers, config: { headers: { x-admin: "1" } } }]
  - name: everyone
    actions: [{ type: add-headers, config: { headers: { x-seen: "\${conn.client_ip}" } } }]
on_http_response:
  - name: sniff
    actions: [{ type: add-headers, config: { headers: { x-content-type-options: nosniff } } }]
`;
const B = `
on_http_request:
  - name: logged
    expressions: ["req.url.path == '/log'"]
    actions: [{ type: log, config: { metadata: { path: "\${req.url.path}" } } }]
  - name: files
    expressions: ["req.url.path.endsWith('.bin')"]
    actions: [{ type: remove-headers, config: { headers: [cookie] } }]
  - name: api
    expressions: ["req.url.path == '/api'"]
    actions: [{ type: add-headers, config: { headers: { x-api: "1" } } }]
on_http_response:
  - name: typed
    expressions: ["res.status_code == 200"]
    actions: [{ type: add-headers, config: { headers: { x-ok: "yes" } } }]
`;

const load = (text: string): TunnelPolicy => {
  const p = loadPolicy(text, { source: "test" });
  if (Array.isArray(p)) throw new Error(JSON.stringify(p));
  return TunnelPolicy.of([], p as Policy)!;
};

/** A tunnel whose agent's inspector is on, writing down each note as the agent would read it. */
function inspected(id: string, heard: unknown[]): Tunnel {
  const agent = {
    tellsPassed: true,
    notePassed: (note: unknown) => heard.push(JSON.parse(JSON.stringify(note))),
    notePassedEncoded: (tunnel: string, stream: number, tail: Uint8Array) => heard.push(JSON.parse(`{"tunnel":${JSON.stringify(tunnel)},"stream":${stream}${new TextDecoder().decode(tail)}`)),
  };
  return { id, subdomain: id, protocol: "http", username: "u", agent } as unknown as Tunnel;
}

/** A request to `path` judged by `policy` as the edge judges it, and its 200 response, told to `t`'s agent on `stream`. */
function request(policy: TunnelPolicy, t: Tunnel, path: string, stream: number): void {
  const text = `GET ${path} HTTP/1.1\r\nHost: ${t.subdomain}.localhost`;
  const head = parseRequestHead(text, EDGE_READS) as RequestHead;
  const facts = requestFacts(t, { client: "127.0.0.1", clientPort: 40000, serverPort: 8080, openedAt: 0, secure: false, host: `${t.subdomain}.localhost`, head, text });
  const pass = judgeRequest(policy, facts, undefined);
  if (pass instanceof Promise || !("run" in pass)) throw new Error("not passed at once");
  const run = pass.run;
  toldWhenAnswered(run, t, stream);
  if (policy.responseFields !== undefined) return tellPassedKnown(run, policy);
  const verdict = run.respond(new WorkingResponse({ status: 200, headers: [["content-type", "text/plain"]] }), policy.responseLayers);
  if (verdict instanceof Promise) throw new Error("waited");
  tellPassed(run, policy, verdict);
}

describe("notes told from the last note's bytes", () => {
  test("read as notes made afresh, request after request, across tunnels and rules", () => {
    const a = load(A);
    const b = load(B);
    const heard: unknown[] = [];
    const ta = inspected("tunnel-a", heard);
    const tb = inspected("tunnel-b", heard);
    const steps: [TunnelPolicy, Tunnel, string][] = [
      [a, ta, "/"],
      [a, ta, "/"],
      [a, ta, "/admin"],
      [a, ta, "/"],
      [b, tb, "/f.bin"],
      [b, tb, "/log"],
      [b, tb, "/f.bin"],
      [b, tb, "/api"],
      [b, tb, "/none"],
      [a, ta, "/admin"],
      [a, ta, "/"],
    ];
    steps.forEach(([p, t, path], i) => request(p, t, path, 10 + i));
    const sniff = { rules: [{ rule: "sniff", actions: ["add-headers"] }] };
    const typed = { rules: [{ rule: "typed", actions: ["add-headers"] }] };
    const everyone = { rule: "everyone", actions: ["add-headers"] };
    const admin = { rule: "admin", actions: ["add-headers"] };
    const files = { rule: "files", actions: ["remove-headers"] };
    expect(heard).toEqual([
      { tunnel: "tunnel-a", stream: 10, request: { rules: [everyone] }, response: sniff },
      { tunnel: "tunnel-a", stream: 11, request: { rules: [everyone] }, response: sniff },
      { tunnel: "tunnel-a", stream: 12, request: { rules: [admin, everyone] }, response: sniff },
      { tunnel: "tunnel-a", stream: 13, request: { rules: [everyone] }, response: sniff },
      { tunnel: "tunnel-b", stream: 14, request: { rules: [files] }, response: typed },
      { tunnel: "tunnel-b", stream: 15, request: { rules: [{ rule: "logged", actions: ["log"] }], logs: [{ path: "/log" }] }, response: typed },
      { tunnel: "tunnel-b", stream: 16, request: { rules: [files] }, response: typed },
      { tunnel: "tunnel-b", stream: 17, request: { rules: [{ rule: "api", actions: ["add-headers"] }] }, response: typed },
      { tunnel: "tunnel-b", stream: 18, response: typed },
      { tunnel: "tunnel-a", stream: 19, request: { rules: [admin, everyone] }, response: sniff },
      { tunnel: "tunnel-a", stream: 20, request: { rules: [everyone] }, response: sniff },
    ]);
  });
});
