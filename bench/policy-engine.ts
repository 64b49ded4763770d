/**
 * A traffic policy's own cost, in process (`bun bench/policy-engine.ts`):
 * the request's judgement as the edge makes it (its facts, the layers'
 * run, what the head becomes) and the response's, for bench/policy.ts's
 * 10-rule policy and for each kind of rule in it alone, with no socket,
 * no agent and no other process. The figure is the process's CPU time per
 * request, the least of ROUNDS rounds (a busy machine only adds to it):
 * what the engine and its wiring cost, against which BENCH_ONLY=policy's
 * figure (the whole edge, in a server) can be read.
 *
 *   POLICY_ENGINE_ROUNDS=7 POLICY_ENGINE_REQUESTS=200000
 */
import { parseRequestHead, type RequestHead } from "../src/http/request-head.ts";
import { EDGE_READS } from "../src/edge/forward.ts";
import { judgeRequest, requestFacts } from "../src/edge/traffic-policy/http-request.ts";
import type { LayeredRun } from "../src/edge/traffic-policy/layered-run.ts";
import { TunnelPolicy } from "../src/edge/traffic-policy/tunnel-policy.ts";
import type { Tunnel } from "../src/edge/registry.ts";
import { formatPolicyError, loadPolicy } from "../src/policy/index.ts";
import { WorkingResponse } from "../src/policy/message.ts";
import type { Verdict } from "../src/policy/index.ts";
import { jsonPayload } from "../src/protocol/frames.ts";
import { tellPassed, tellPassedKnown, toldWhenAnswered } from "../src/edge/traffic-policy/passed-notes.ts";
import { POLICY } from "./policy.ts";

const ROUNDS = Number(process.env.POLICY_ENGINE_ROUNDS ?? 7);
const REQUESTS = Number(process.env.POLICY_ENGINE_REQUESTS ?? 200_000);

/** wrk's request for the 1 KiB file, as the edge reads it (the head without its blank line). */
const HEAD = "GET /1k.bin HTTP/1.1\r\nHost: policy-on.localhost:8080";
const tunnel = { subdomain: "policy-on", protocol: "http", username: "bench" } as unknown as Tunnel;

/** The rules of bench/policy.ts one kind at a time, and the whole. */
const SHAPES: [string, string][] = [
  ["one rule that matches nothing", "on_http_request:\n  - expressions: [\"req.url.path == '/never'\"]\n    actions: [{ type: deny }]\n"],
  // its rules up to the rate limit, and the last request rule: conditions, nothing they change here
  ["its seven conditions", `${POLICY.split("  - name: everyone, generously")[0]!.trimEnd()}\n${POLICY.slice(POLICY.indexOf("  - name: no cookies to the files")).split("on_http_response:")[0]}`],
  ["a rate limit by address", "on_http_request:\n  - actions: [{ type: rate-limit, config: { name: all, algorithm: sliding_window, capacity: 2000000000, rate: 60s, bucket_key: [conn.client_ip] } }]\n"],
  ["a request header with ${conn.client_ip}", "on_http_request:\n  - actions: [{ type: add-headers, config: { headers: { x-client-ip: \"${conn.client_ip}\" } } }]\n"],
  ["a response header", "on_http_response:\n  - actions: [{ type: add-headers, config: { headers: { x-content-type-options: nosniff } } }]\n"],
  ["bench/policy.ts's 10 rules", POLICY],
];

/** A tunnel whose agent's inspector is on (its default): told of each request let through (passed-notes.ts), its note encoded as the mux encodes a control frame's. */
const inspected = { ...tunnel, id: "5b0f4a2e-8c1d-4e55-9f0a-3c2b1d7e6a90", agent: { tellsPassed: true, notePassed: (note: unknown) => void jsonPayload(note), notePassedEncoded: (_stream: number, tail: Uint8Array) => void tail } } as unknown as Tunnel;

function judged(policy: TunnelPolicy, told = false): void {
  const head = parseRequestHead(HEAD, EDGE_READS) as RequestHead;
  const facts = requestFacts(tunnel, { client: "127.0.0.1", clientPort: 40000, serverPort: 8080, openedAt: 0, secure: false, host: "policy-on.localhost:8080", head, text: HEAD });
  const pass = judgeRequest(policy, facts, undefined);
  if (pass instanceof Promise || !("run" in pass)) throw new Error("the request did not pass at once");
  const run: LayeredRun = pass.run;
  if (told) toldWhenAnswered(run, inspected, 1);
  // what forward asks: whether the head goes as it came with fields after it
  run.request!.appended();
  if (!policy.response) return void (told && tellPassed(run, policy));
  // response rules that only add constant fields need no run: the edge adds them to the head as they are (response-head-rules.ts)
  if (policy.responseFields !== undefined) return void (told && tellPassedKnown(run, policy));
  // the response's fields are read only if a rule asks for them
  run.respond(new WorkingResponse({ status: 200, headers: [["Content-Type", "application/octet-stream"], ["Content-Length", "1024"]] }), policy.responseLayers);
  run.response!.appended();
  if (told) tellPassed(run, policy, { kind: "continue" } as Verdict);
}

/** The head's parse alone: what the edge does without a policy too. */
function parsed(): void {
  parseRequestHead(HEAD, EDGE_READS);
}

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

function perRequest(work: () => void): number {
  for (let i = 0; i < 20_000; i++) work();
  let best = Infinity;
  for (let r = 0; r < ROUNDS; r++) {
    const start = cpuMs();
    for (let i = 0; i < REQUESTS; i++) work();
    best = Math.min(best, ((cpuMs() - start) * 1000) / REQUESTS);
  }
  return best;
}

const base = perRequest(parsed);
console.log(`the head's parse alone: ${base.toFixed(2)} µs a request (CPU, least of ${ROUNDS} rounds of ${REQUESTS})`);
for (const [name, text] of SHAPES) {
  const policy = loadPolicy(text, { source: name });
  if (Array.isArray(policy)) throw new Error(policy.map((e) => formatPolicyError(e)).join("\n"));
  const layers = TunnelPolicy.of([], policy)!;
  const cost = perRequest(() => judged(layers)) - base;
  const told = perRequest(() => judged(layers, true)) - base;
  console.log(`${name}: ${cost.toFixed(2)} µs a request more; ${told.toFixed(2)} with the inspector told`);
}
