/**
 * Raw TCP (`BENCH_ONLY=tcp`, or part of a full run): BENCH_TCP_MIB pushed
 * into the counting sink through the three paths (bench/paths.ts), every
 * path once per round after a short push each. The direct path must pass
 * 1.5 GiB/s, or the sink and not the tunnel would be the limit.
 */
import { GiB, lostNote, MiB, pushThrough, type TransferResult } from "./lib/measure.ts";
import type { Child, Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, PATHS, pushRun, ratio, runsOf, type PathName, type Row, type Target } from "./lib/report.ts";
import type { ThreePaths } from "./paths.ts";

export type TransferRuns = Partial<Record<PathName, TransferResult[]>>;

export interface TcpBench {
  procs: Processes;
  paths: ThreePaths;
  sink: Child;
  /** The source command (C or Bun). */
  source: string[];
  rounds: number;
  bytes: number;
  say(line: string): void;
}

/** Pushes into `into` run by run, so a failure keeps what was measured. */
export async function rawTcp(b: TcpBench, into: TransferRuns): Promise<void> {
  const ports = b.paths.tcp;
  // a short push per path first: connections, JIT and buffers warm
  for (const p of PATHS) await pushThrough(b.procs, b.sink, b.source, ports[p], 64 * MiB, 60);
  for (let round = 1; round <= b.rounds; round++) {
    for (const p of PATHS) {
      const r = await pushThrough(b.procs, b.sink, b.source, ports[p], b.bytes, 300);
      pushRun(into, p, r);
      b.say(`raw TCP     round ${round} ${p.padEnd(6)} ${fmt(r.mibPerSec)} MiB/s (${fmt(r.seconds)} s)${lostNote(r)}`);
    }
  }
}

export function rawTcpRows(runs: TransferRuns, bytes: number): Row[] {
  if (!Object.keys(runs).length) return [];
  return [
    {
      scenario: `raw TCP, ${fmt(bytes / GiB)} GiB into a counting sink`,
      unit: "MiB/s",
      runs: runsOf(runs, (r) => r.mibPerSec),
      higherIsBetter: true,
      marks: lossMarks(runs),
    },
  ];
}

const has = (x: number) => Number.isFinite(x);
const check = (x: number, ok: (x: number) => boolean) => (has(x) ? ok(x) : null);

export function rawTcpTarget(runs: TransferRuns): Target {
  const tcp = runsOf(runs, (r) => r.mibPerSec);
  const r4 = ratio(median(tcp.burrow ?? []), median(tcp.ssh ?? []));
  return { name: "raw TCP vs OpenSSH", want: "≥ 1.2×", measured: fmtRatio(r4), pass: check(r4, (x) => x >= 1.2) };
}

export function sinkTarget(runs: TransferRuns): Target {
  const sinkDirect = median(runsOf(runs, (r) => r.mibPerSec).direct ?? []);
  return {
    name: "check: the sink is not the bottleneck (direct raw TCP)",
    want: "> 1.5 GiB/s",
    measured: has(sinkDirect) ? `${fmt(sinkDirect / 1024)} GiB/s` : "–",
    pass: check(sinkDirect, (x) => x > 1.5 * 1024),
  };
}

/**
 * Every TCP transfer of the run complete: the raw pushes, the memory
 * section's upload and the iperf3 runs (`hungIperf`: those that hung).
 * None when nothing was pushed.
 */
export function transfersTarget(transfers: TransferResult[], hungIperf: number): Target[] {
  if (!transfers.length && !hungIperf) return [];
  const lost = lostBytes(transfers);
  const unclosed = transfers.filter((x) => x.hung).length;
  const problems = [
    lost.runs ? `${lost.runs} of ${transfers.length} pushes short by ${lost.bytes.toLocaleString("en-US")} bytes in all` : "",
    unclosed ? `${unclosed} push${unclosed > 1 ? "es" : ""} never saw its connection closed` : "",
    hungIperf ? `${hungIperf} iperf3 run${hungIperf > 1 ? "s" : ""} hung` : "",
  ].filter(Boolean);
  return [
    {
      name: "check: every TCP transfer complete (no bytes lost, no hang)",
      want: "all",
      measured: problems.length ? problems.join("; ") : "all",
      pass: problems.length === 0,
    },
  ];
}

/** "✗" after a transfer that lost bytes on the way. */
function lossMarks(src: TransferRuns): Partial<Record<PathName, string[]>> {
  return Object.fromEntries(Object.entries(src).map(([p, xs]) => [p, xs!.map((x) => (x.received < x.bytes ? " ✗" : ""))]));
}

function lostBytes(xs: TransferResult[]): { runs: number; bytes: number } {
  const bad = xs.filter((x) => x.received < x.bytes);
  return { runs: bad.length, bytes: bad.reduce((a, x) => a + x.bytes - x.received, 0) };
}
