/**
 * What each of the agent's default features costs on the hot path
 * (`BENCH_ONLY=inspector`, or part of a full run): HTTP 1 KiB through four
 * agents of the same server to the same nginx, their output in files as a
 * user's would be:
 *
 *   defaults     the request inspector on (keeping the last 1,000) and a line per request
 *   no-inspect   --no-inspect
 *   no-lines     --log-level warn: the inspector, no request lines
 *   neither      --no-inspect --log-level warn
 *
 * wrk runs are paired, the order reversed round by round so drift in the
 * machine's speed hits all alike; per run, the agent's CPU time per request
 * (from /proc), which a busy machine disturbs less than req/s, and the
 * server's (the same for all four: a check). The judged figure is the
 * median of the rounds' req/s ratios, inspector on against off; beside it,
 * the median of the rounds' differences in the agent's CPU per request,
 * which is what each feature costs.
 */
import { wrk } from "./lib/measure.ts";
import { cpuMs, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row, type Target } from "./lib/report.ts";
import { capturedRequests, FILES, startBurrowAgent, tunnelHost, type BurrowServer } from "./lib/services.ts";

export const VARIANTS = ["defaults", "no-inspect", "no-lines", "neither"] as const;
export type Variant = (typeof VARIANTS)[number];

const FLAGS: Record<Variant, string[]> = {
  defaults: [],
  "no-inspect": ["--no-inspect"],
  "no-lines": ["--log-level", "warn"],
  neither: ["--no-inspect", "--log-level", "warn"],
};

export interface VariantRuns {
  reqPerSec: number[];
  p99: number[];
  /** The agent's CPU time (user + system) per request, µs, per run. */
  agentCpu: number[];
  /** The server's, in the same run. */
  serverCpu: number[];
}

export interface InspectorOverhead {
  /** Per variant, one figure per round. Older results have on/off only. */
  variants?: Record<Variant, VariantRuns>;
  /** req/s per run, inspector on (defaults) and off (no-inspect). */
  on: number[];
  off: number[];
  p99On: number[];
  p99Off: number[];
  cpuOn: number[];
  cpuOff: number[];
  /** Requests the inspector held at the end (the last --inspect-keep of them). */
  captured: number;
}

export interface InspectorBench {
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

/** The most the inspector may take off HTTP 1 KiB req/s. */
export const INSPECTOR_MAX_COST = 0.1;

export async function inspectorOverhead(b: InspectorBench): Promise<InspectorOverhead> {
  const agents = {} as Record<Variant, Awaited<ReturnType<typeof startBurrowAgent>>>;
  for (const v of VARIANTS) {
    agents[v] = await startBurrowAgent(b.procs, b.bin, b.dir, `burrow-features-${v}`, b.server, b.token, "http", b.nginxPort, ["--subdomain", `features-${v}`, ...FLAGS[v]]);
  }
  const run = (v: Variant, seconds: number) => wrk(b.procs, { url: `${b.server.edgeUrl}/${FILES.small}`, host: tunnelHost(b.server, agents[v].subdomain!), connections: 50, seconds });
  if (b.warmupSeconds > 0) for (const v of VARIANTS) await run(v, b.warmupSeconds);
  const variants = Object.fromEntries(VARIANTS.map((v) => [v, { reqPerSec: [], p99: [], agentCpu: [], serverCpu: [] } as VariantRuns])) as Record<Variant, VariantRuns>;
  for (let round = 1; round <= b.rounds; round++) {
    const order = round % 2 === 1 ? [...VARIANTS] : [...VARIANTS].reverse();
    for (const v of order) {
      const agent = agents[v].child.pid;
      const server = b.server.child.pid;
      const before = { agent: cpuMs(agent), server: cpuMs(server) };
      const r = await run(v, b.seconds);
      const agentCpu = ((cpuMs(agent) - before.agent) * 1000) / r.requests;
      const serverCpu = ((cpuMs(server) - before.server) * 1000) / r.requests;
      const x = variants[v];
      x.reqPerSec.push(r.reqPerSec);
      x.p99.push(r.p99Ms);
      x.agentCpu.push(agentCpu);
      x.serverCpu.push(serverCpu);
      b.say(`features    round ${round} ${v.padEnd(10)} ${fmt(r.reqPerSec, "req/s")} req/s  p99 ${fmt(r.p99Ms)} ms  agent CPU ${fmt(agentCpu)} µs/request  server ${fmt(serverCpu)}${r.errors ? `  ${r.errors} errors` : ""}`);
    }
  }
  const captured = await capturedRequests(agents.defaults);
  for (const v of VARIANTS) await b.procs.stop(agents[v].child);
  const on = variants.defaults;
  const off = variants["no-inspect"];
  return { variants, on: on.reqPerSec, off: off.reqPerSec, p99On: on.p99, p99Off: off.p99, cpuOn: on.agentCpu, cpuOff: off.agentCpu, captured };
}

/** The median of each round's on/off ratio. */
export function pairedRatio(on: number[], off: number[]): number {
  const ratios = on.map((x, i) => ratio(x, off[i]!)).filter(Number.isFinite);
  return ratios.length ? median(ratios) : NaN;
}

/** The median of each round's difference a − b. */
export function pairedDifference(a: number[], b: number[]): number {
  const d = a.map((x, i) => x - b[i]!).filter(Number.isFinite);
  return d.length ? median(d) : NaN;
}

const cells = (xs: number[], unit: string) => `${xs.map((x) => fmt(x, unit)).join(" · ")} → **${fmt(median(xs), unit)}**`;
const blank = { direct: "", ssh: "" };

export function inspectorRows(r: InspectorOverhead): Row[] {
  const rows: Row[] = [
    {
      scenario: "HTTP 1 KiB, inspector on vs off (same server, paired runs)",
      unit: "req/s",
      runs: {},
      higherIsBetter: true,
      burrowText: `on ${cells(r.on, "req/s")}; off ${cells(r.off, "req/s")}; on/off of the medians ${fmtRatio(ratio(median(r.on), median(r.off)))}, median of the rounds' on/off **${fmtRatio(pairedRatio(r.on, r.off))}**`,
      ratioText: blank,
    },
    {
      scenario: "HTTP 1 KiB p99, inspector on vs off",
      unit: "ms",
      runs: {},
      higherIsBetter: false,
      burrowText: `on ${cells(r.p99On, "ms")}; off ${cells(r.p99Off, "ms")}`,
      ratioText: blank,
    },
  ];
  const v = r.variants;
  if (!v) return rows;
  for (const name of VARIANTS) {
    rows.push({
      scenario: `HTTP 1 KiB, the agent's CPU per request: ${name === "defaults" ? "its defaults (inspector, request lines)" : name}`,
      unit: "µs",
      runs: {},
      higherIsBetter: false,
      burrowText: `${cells(v[name].agentCpu, "")} (server ${fmt(median(v[name].serverCpu))}; ${fmt(median(v[name].reqPerSec), "req/s")} req/s)`,
      ratioText: blank,
    });
  }
  const d = v.defaults.agentCpu;
  rows.push({
    scenario: "what each default feature costs the agent per request (median of the rounds' differences)",
    unit: "µs",
    runs: {},
    higherIsBetter: false,
    burrowText: `the inspector **${fmt(pairedDifference(d, v["no-inspect"].agentCpu))}**, request lines **${fmt(pairedDifference(d, v["no-lines"].agentCpu))}**, both **${fmt(pairedDifference(d, v.neither.agentCpu))}**`,
    ratioText: blank,
  });
  return rows;
}

export function inspectorTarget(r: InspectorOverhead | undefined): Target {
  const x = r ? pairedRatio(r.on, r.off) : NaN;
  return {
    name: "HTTP 1 KiB req/s, inspector on vs off (median of paired rounds)",
    want: `≥ ${(1 - INSPECTOR_MAX_COST).toFixed(2)}×`,
    measured: Number.isFinite(x) ? `${fmtRatio(x)} (${r!.captured} captured)` : "–",
    pass: Number.isFinite(x) ? x >= 1 - INSPECTOR_MAX_COST : null,
  };
}
