/**
 * The request inspector's cost on the hot path (`BENCH_ONLY=inspector`, or
 * part of a full run): HTTP 1 KiB through two agents of the same server to
 * the same nginx, one with its inspector on (capturing every request, as an
 * agent does by default) and one with --no-inspect. wrk runs are paired,
 * the order alternating round by round so drift in the machine's speed
 * hits both alike; the judged figure is the median of the rounds' on/off
 * ratios, which a round slowed by other work on the machine moves less than
 * it moves either median. Beside it, each agent's CPU time per request
 * (from /proc), which a busy machine disturbs less than req/s.
 */
import { wrk } from "./lib/measure.ts";
import { cpuMs, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row, type Target } from "./lib/report.ts";
import { FILES, startBurrowAgent, tunnelHost, type BurrowServer } from "./lib/services.ts";

export interface InspectorOverhead {
  /** req/s per run, inspector on and off. */
  on: number[];
  off: number[];
  p99On: number[];
  p99Off: number[];
  /** The agent's CPU time (user + system) per request, µs, per run. */
  cpuOn: number[];
  cpuOff: number[];
  /** Requests the inspector said it had captured at the end (the last --inspect-keep of them). */
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
  const on = await startBurrowAgent(b.procs, b.bin, b.dir, "burrow-inspect-on", b.server, b.token, "http", b.nginxPort, ["--subdomain", "inspect-on", "--inspect-addr", "127.0.0.1:0", "--log", "text"]);
  const off = await startBurrowAgent(b.procs, b.bin, b.dir, "burrow-inspect-off", b.server, b.token, "http", b.nginxPort, ["--subdomain", "inspect-off", "--no-inspect", "--log", "text"]);
  const inspector = (await b.procs.waitFor(on.child, /Inspector\s+(http:\/\/\S+)/, 10_000))[1]!;
  const agents = { on: tunnelHost(b.server, on.subdomain!), off: tunnelHost(b.server, off.subdomain!) };
  const pids = { on: on.child.pid, off: off.child.pid };
  const run = (which: "on" | "off", seconds: number) => wrk(b.procs, { url: `${b.server.edgeUrl}/${FILES.small}`, host: agents[which], connections: 50, seconds });
  if (b.warmupSeconds > 0) for (const which of ["on", "off"] as const) await run(which, b.warmupSeconds);
  const result: InspectorOverhead = { on: [], off: [], p99On: [], p99Off: [], cpuOn: [], cpuOff: [], captured: 0 };
  for (let round = 1; round <= b.rounds; round++) {
    const order = round % 2 === 1 ? (["on", "off"] as const) : (["off", "on"] as const);
    for (const which of order) {
      const cpuBefore = cpuMs(pids[which]);
      const r = await run(which, b.seconds);
      const cpuUs = ((cpuMs(pids[which]) - cpuBefore) * 1000) / r.requests;
      result[which].push(r.reqPerSec);
      (which === "on" ? result.p99On : result.p99Off).push(r.p99Ms);
      (which === "on" ? result.cpuOn : result.cpuOff).push(cpuUs);
      b.say(`inspector   round ${round} ${which.padEnd(3)} ${fmt(r.reqPerSec, "req/s")} req/s  p99 ${fmt(r.p99Ms)} ms  agent CPU ${fmt(cpuUs)} µs/request${r.errors ? `  ${r.errors} errors` : ""}`);
    }
  }
  const list = (await (await fetch(`${inspector}/api/requests`)).json()) as { requests: unknown[] };
  result.captured = list.requests.length;
  await b.procs.stop(on.child);
  await b.procs.stop(off.child);
  return result;
}

/** The median of each round's on/off ratio. */
export function pairedRatio(on: number[], off: number[]): number {
  const ratios = on.map((x, i) => ratio(x, off[i]!)).filter(Number.isFinite);
  return ratios.length ? median(ratios) : NaN;
}

export function inspectorRows(r: InspectorOverhead): Row[] {
  const cells = (xs: number[], unit: string) => `${xs.map((x) => fmt(x, unit)).join(" · ")} → **${fmt(median(xs), unit)}**`;
  const blank = { direct: "", ssh: "" };
  return [
    {
      scenario: "HTTP 1 KiB, inspector on vs off (same server, paired runs)",
      unit: "req/s",
      runs: {},
      higherIsBetter: true,
      burrowText: `on ${cells(r.on, "req/s")}; off ${cells(r.off, "req/s")}; on/off of the medians ${fmtRatio(ratio(median(r.on), median(r.off)))}, median of the rounds' on/off **${fmtRatio(pairedRatio(r.on, r.off))}**`,
      ratioText: blank,
    },
    {
      scenario: "HTTP 1 KiB, the agent's CPU per request, inspector on vs off",
      unit: "µs",
      runs: {},
      higherIsBetter: false,
      burrowText: `on ${cells(r.cpuOn, "")}; off ${cells(r.cpuOff, "")}; median of the rounds' on/off **${fmtRatio(pairedRatio(r.cpuOn, r.cpuOff))}**`,
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
