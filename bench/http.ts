/**
 * HTTP throughput (`BENCH_ONLY=http`, or part of a full run): nginx's 1 KiB
 * file with `wrk -t1 -c50` (req/s, p99) and its 10 MiB files with
 * `wrk -t1 -c4`, through the three paths (bench/paths.ts), every path once
 * per round, after a warm-up per path.
 */
import { wrk, type WrkResult } from "./lib/measure.ts";
import type { Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, PATHS, pushRun, ratio, runsOf, type PathName, type Row, type Target } from "./lib/report.ts";
import { FILES } from "./lib/services.ts";
import type { ThreePaths } from "./paths.ts";

export type WrkRuns = Partial<Record<PathName, Omit<WrkResult, "raw">[]>>;

export interface HttpThroughput {
  /** 1 KiB at c=50, per path, per round. */
  http1k: WrkRuns;
  /** 10 MiB at c=4, per path, per round. */
  http10m: WrkRuns;
}

export interface HttpBench {
  procs: Processes;
  paths: ThreePaths;
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  say(line: string): void;
}

const strip = ({ raw: _raw, ...rest }: WrkResult) => rest;

/** Runs the two scenarios into `into` (filled run by run, so a failure keeps what was measured). */
export async function httpThroughput(b: HttpBench, into: HttpThroughput): Promise<void> {
  const { procs, say } = b;
  const http = b.paths.http;
  if (b.warmupSeconds > 0) {
    say("warm-up");
    for (const p of PATHS) {
      await wrk(procs, { url: `${http[p].base}/${FILES.small}`, host: http[p].host, connections: 50, seconds: b.warmupSeconds });
      await wrk(procs, { url: `${http[p].base}/${FILES.medium}`, host: http[p].host, connections: 4, seconds: b.warmupSeconds });
    }
  }
  for (let round = 1; round <= b.rounds; round++) {
    for (const p of PATHS) {
      const r = await wrk(procs, { url: `${http[p].base}/${FILES.small}`, host: http[p].host, connections: 50, seconds: b.seconds });
      pushRun(into.http1k, p, strip(r));
      say(`HTTP 1 KiB  round ${round} ${p.padEnd(6)} ${fmt(r.reqPerSec, "req/s")} req/s  p99 ${fmt(r.p99Ms)} ms${r.errors ? `  ${r.errors} errors` : ""}`);
    }
  }
  for (let round = 1; round <= b.rounds; round++) {
    for (const p of PATHS) {
      const r = await wrk(procs, { url: `${http[p].base}/${FILES.medium}`, host: http[p].host, connections: 4, seconds: b.seconds, timeoutS: 30 });
      pushRun(into.http10m, p, strip(r));
      say(`10 MiB      round ${round} ${p.padEnd(6)} ${fmt(r.mibPerSec)} MiB/s${r.errors ? `  ${r.errors} errors` : ""}`);
    }
  }
}

export function http1kRows(r: HttpThroughput): Row[] {
  if (!Object.keys(r.http1k).length) return [];
  return [
    { scenario: "HTTP 1 KiB (wrk -t1 -c50)", unit: "req/s", runs: runsOf(r.http1k, (x) => x.reqPerSec), higherIsBetter: true },
    { scenario: "HTTP 1 KiB p99 latency (c=50)", unit: "ms", runs: runsOf(r.http1k, (x) => x.p99Ms), higherIsBetter: false },
  ];
}

export function http10mRows(r: HttpThroughput): Row[] {
  if (!Object.keys(r.http10m).length) return [];
  return [{ scenario: "10 MiB downloads (wrk -t1 -c4)", unit: "MiB/s", runs: runsOf(r.http10m, (x) => x.mibPerSec), higherIsBetter: true }];
}

const has = (x: number) => Number.isFinite(x);
const check = (x: number, ok: (x: number) => boolean) => (has(x) ? ok(x) : null);

/** The 1 KiB targets: req/s against OpenSSH and direct, p99. */
export function http1kTargets(r: HttpThroughput): Target[] {
  const rps = runsOf(r.http1k, (x) => x.reqPerSec);
  const m = (p: PathName) => median(rps[p] ?? []);
  const p99 = median(runsOf(r.http1k, (x) => x.p99Ms).burrow ?? []);
  const r1 = ratio(m("burrow"), m("ssh"));
  const r2 = ratio(m("burrow"), m("direct"));
  return [
    { name: "HTTP 1 KiB req/s vs OpenSSH", want: "≥ 3×", measured: fmtRatio(r1), pass: check(r1, (x) => x >= 3) },
    { name: "HTTP 1 KiB req/s vs direct", want: "≥ 0.35×", measured: fmtRatio(r2), pass: check(r2, (x) => x >= 0.35) },
    { name: "HTTP 1 KiB p99 at c=50 (median of runs)", want: "≤ 10 ms", measured: has(p99) ? `${fmt(p99)} ms` : "–", pass: check(p99, (x) => x <= 10) },
  ];
}

export function http10mTarget(r: HttpThroughput): Target {
  const big = runsOf(r.http10m, (x) => x.mibPerSec);
  const r3 = ratio(median(big.burrow ?? []), median(big.ssh ?? []));
  return { name: "10 MiB downloads vs OpenSSH", want: "≥ 1.5×", measured: fmtRatio(r3), pass: check(r3, (x) => x >= 1.5) };
}

/** wrk's errors over every run of both scenarios, and whether any ran. */
export function httpErrors(r: HttpThroughput): { errors: number; ran: boolean } {
  const errors = [...Object.values(r.http1k), ...Object.values(r.http10m)].flat().reduce((a, x) => a + (x?.errors ?? 0), 0);
  return { errors, ran: Object.keys(r.http1k).length + Object.keys(r.http10m).length > 0 };
}
