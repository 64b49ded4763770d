/**
 * A traffic policy's cost on the HTTP path (`BENCH_ONLY=policy`, or part of
 * a full run): HTTP 1 KiB through two agents of the same server to the same
 * nginx, one whose tunnel runs a 10-rule policy (POLICY below: nine request
 * rules of the usual kinds, conditions on the path, method, headers and
 * address, headers added and removed, a rate limit no run reaches, and a
 * response rule adding a header) and one with none. wrk runs are paired,
 * the order alternating round by round; the judged figure is the server's
 * CPU time per request (from /proc: the edge runs the policy), the median
 * of the rounds' with/without ratios, which a busy machine moves less than
 * req/s. The issue's target: at most 15 % more CPU per request.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { wrk } from "./lib/measure.ts";
import { cpuMs, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row, type Target } from "./lib/report.ts";
import { FILES, startBurrowAgent, tunnelHost, type BurrowServer } from "./lib/services.ts";

/** Ten rules, as a tunnel might have them: most match nothing on these requests; two change every request, one every response. */
export const POLICY = `
on_http_request:
  - name: no admin
    expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: deny }]
  - name: no writes from outside
    expressions: ["req.method != 'GET' && req.method != 'HEAD'", "!inCidrRange(conn.client_ip, '10.0.0.0/8')"]
    actions: [{ type: deny, config: { status_code: 405 } }]
  - name: no bots
    expressions: ["req.user_agent.contains('BadBot')"]
    actions: [{ type: deny }]
  - name: old paths
    expressions: ["req.url.path == '/old'"]
    actions: [{ type: redirect, config: { to: "/new" } }]
  - name: health
    expressions: ["req.url.path == '/healthz'"]
    actions: [{ type: custom-response, config: { status_code: 200, body: ok } }]
  - name: api keys
    expressions: ["'x-api-key' in req.headers && req.headers['x-api-key'][0] == 'revoked'"]
    actions: [{ type: deny, config: { status_code: 401 } }]
  - name: everyone, generously
    actions:
      - type: rate-limit
        config: { name: all, algorithm: sliding_window, capacity: 2000000000, rate: 60s, bucket_key: [conn.client_ip] }
  - name: tell the service
    actions:
      - type: add-headers
        config: { headers: { x-client-ip: "\${conn.client_ip}" } }
  - name: no cookies to the files
    expressions: ["req.url.path.endsWith('.bin')"]
    actions: [{ type: remove-headers, config: { headers: [cookie] } }]
on_http_response:
  - name: security header
    actions: [{ type: add-headers, config: { headers: { x-content-type-options: nosniff } } }]
`;

export interface PolicyCost {
  /** req/s per run, with the policy and without. */
  with: number[];
  without: number[];
  p99With: number[];
  p99Without: number[];
  /** The server's CPU time (user + system) per request, µs, per run. */
  cpuWith: number[];
  cpuWithout: number[];
}

export interface PolicyBench {
  procs: Processes;
  bin: string;
  dir: string;
  server: BurrowServer;
  token: string;
  nginxPort: number;
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  say(line: string): void;
}

/** The most CPU per request the policy may add (the issue's target). */
export const POLICY_MAX_CPU = 0.15;

export async function policyCost(b: PolicyBench): Promise<PolicyCost> {
  const file = join(b.dir, "bench-policy.yml");
  writeFileSync(file, POLICY);
  const ruled = await startBurrowAgent(b.procs, b.bin, b.dir, "burrow-policy-on", b.server, b.token, "http", b.nginxPort, ["--subdomain", "policy-on", "--log", "text", "--policy-file", file]);
  const plain = await startBurrowAgent(b.procs, b.bin, b.dir, "burrow-policy-off", b.server, b.token, "http", b.nginxPort, ["--subdomain", "policy-off", "--log", "text"]);
  const hosts = { with: tunnelHost(b.server, ruled.subdomain!), without: tunnelHost(b.server, plain.subdomain!) };
  const run = (which: "with" | "without", seconds: number) => wrk(b.procs, { url: `${b.server.edgeUrl}/${FILES.small}`, host: hosts[which], connections: 50, seconds });
  if (b.warmupSeconds > 0) for (const which of ["with", "without"] as const) await run(which, b.warmupSeconds);
  const r: PolicyCost = { with: [], without: [], p99With: [], p99Without: [], cpuWith: [], cpuWithout: [] };
  const server = b.server.child.pid;
  for (let round = 1; round <= b.rounds; round++) {
    const order = round % 2 === 1 ? (["with", "without"] as const) : (["without", "with"] as const);
    for (const which of order) {
      const before = cpuMs(server);
      const w = await run(which, b.seconds);
      const cpuUs = ((cpuMs(server) - before) * 1000) / w.requests;
      r[which].push(w.reqPerSec);
      (which === "with" ? r.p99With : r.p99Without).push(w.p99Ms);
      (which === "with" ? r.cpuWith : r.cpuWithout).push(cpuUs);
      b.say(`policy      round ${round} ${which.padEnd(7)} ${fmt(w.reqPerSec, "req/s")} req/s  p99 ${fmt(w.p99Ms)} ms  server CPU ${fmt(cpuUs)} µs/request${w.errors ? `  ${w.errors} errors` : ""}`);
    }
  }
  await b.procs.stop(ruled.child);
  await b.procs.stop(plain.child);
  return r;
}

/** The median of each round's with/without ratio. */
function paired(a: number[], b: number[]): number {
  const ratios = a.map((x, i) => ratio(x, b[i]!)).filter(Number.isFinite);
  return ratios.length ? median(ratios) : NaN;
}

export function policyRows(r: PolicyCost): Row[] {
  const cells = (xs: number[], unit: string) => `${xs.map((x) => fmt(x, unit)).join(" · ")} → **${fmt(median(xs), unit)}**`;
  const blank = { direct: "", ssh: "" };
  return [
    {
      scenario: "HTTP 1 KiB, a 10-rule traffic policy vs none (same server, paired runs)",
      unit: "req/s",
      runs: {},
      higherIsBetter: true,
      burrowText: `with ${cells(r.with, "req/s")}; without ${cells(r.without, "req/s")}; median of the rounds' with/without **${fmtRatio(paired(r.with, r.without))}**`,
      ratioText: blank,
    },
    {
      scenario: "HTTP 1 KiB, the server's CPU per request, policy vs none",
      unit: "µs",
      runs: {},
      higherIsBetter: false,
      burrowText: `with ${cells(r.cpuWith, "")}; without ${cells(r.cpuWithout, "")}; median of the rounds' with/without **${fmtRatio(paired(r.cpuWith, r.cpuWithout))}**`,
      ratioText: blank,
    },
    {
      scenario: "HTTP 1 KiB p99, policy vs none",
      unit: "ms",
      runs: {},
      higherIsBetter: false,
      burrowText: `with ${cells(r.p99With, "ms")}; without ${cells(r.p99Without, "ms")}`,
      ratioText: blank,
    },
  ];
}

export function policyTarget(r: PolicyCost | undefined): Target {
  const x = r ? paired(r.cpuWith, r.cpuWithout) : NaN;
  return {
    name: "HTTP 1 KiB, the server's CPU per request with a 10-rule policy vs none (median of paired rounds)",
    want: `≤ ${(1 + POLICY_MAX_CPU).toFixed(2)}×`,
    measured: Number.isFinite(x) ? fmtRatio(x) : "–",
    pass: Number.isFinite(x) ? x <= 1 + POLICY_MAX_CPU : null,
  };
}
