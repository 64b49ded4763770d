/**
 * Isolation (`BENCH_ONLY=isolation`, or part of a full run): a 10 MiB
 * download through the http tunnel of bench/paths.ts alone, and next to a
 * stream on the same agent whose visitor stopped reading; the two kinds of
 * run alternate in order from round to round (alone first, then stalled
 * first) so drift cancels out. Beside each stalled run, the bytes the
 * stalled visitor left unread and the server's RSS: the edge must not
 * buffer the stalled stream.
 */
import { join } from "node:path";
import { MiB, wrk } from "./lib/measure.ts";
import { receiveQueue, rssKiB, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row, type Target } from "./lib/report.ts";
import { FILES } from "./lib/services.ts";
import type { ThreePaths } from "./paths.ts";

const STALL = join(import.meta.dir, "tools", "stall.ts");

export interface Isolation {
  aloneMiBs: number[];
  stalledMiBs: number[];
  /** Bytes the stalled visitor left unread in its socket (it must not move during the run). */
  stalledQueueBytes: number[];
  /** Server RSS before the stalled visitor came and after the run beside it (KiB): the edge must not buffer the stalled stream. */
  serverRssKiB: { before: number; after: number }[];
  errors: number;
}

export interface IsolationBench {
  procs: Processes;
  paths: ThreePaths;
  rounds: number;
  seconds: number;
  say(line: string): void;
}

/** `record` gets the results first and sees them filled run by run, so a failure keeps what was measured. */
export async function isolation(b: IsolationBench, record: (x: Isolation) => void): Promise<void> {
  const { procs } = b;
  const { server, host } = b.paths;
  const iso: Isolation = { aloneMiBs: [], stalledMiBs: [], stalledQueueBytes: [], serverRssKiB: [], errors: 0 };
  record(iso);
  const download = () => wrk(procs, { url: `${server.edgeUrl}/${FILES.medium}`, host, connections: 1, seconds: b.seconds, timeoutS: 30 });
  const alone = async () => {
    const r = await download();
    iso.aloneMiBs.push(r.mibPerSec);
    iso.errors += r.errors;
    return r.mibPerSec;
  };
  const stalled = async (round: number) => {
    const rssBefore = rssKiB(server.child.pid);
    const stall = procs.spawn(`stall-${round}`, [process.execPath, STALL, "127.0.0.1", String(server.edgePort), host, `/${FILES.huge}`]);
    try {
      const m = await procs.waitFor(stall, /stalled local_port=(\d+)/, 15_000);
      const localPort = Number(m[1]);
      await Bun.sleep(1500); // the kernel buffers and the stream's credit window fill up
      const before = receiveQueue(localPort) ?? 0;
      const r = await download();
      const after = receiveQueue(localPort) ?? 0;
      const rssAfter = rssKiB(server.child.pid);
      if (stall.done) throw new Error(`the stalled visitor's connection ended: ${procs.tail(stall)}`);
      iso.stalledMiBs.push(r.mibPerSec);
      iso.stalledQueueBytes.push(after);
      iso.serverRssKiB.push({ before: rssBefore, after: rssAfter });
      iso.errors += r.errors;
      return { mibPerSec: r.mibPerSec, note: `stalled visitor holds ${fmt(before / MiB)}→${fmt(after / MiB)} MiB unread; server RSS ${fmt(rssBefore / 1024)}→${fmt(rssAfter / 1024)} MiB` };
    } finally {
      await procs.stop(stall);
    }
  };
  for (let round = 1; round <= b.rounds; round++) {
    let a: number, s: Awaited<ReturnType<typeof stalled>>;
    if (round % 2 === 1) {
      a = await alone();
      s = await stalled(round);
    } else {
      s = await stalled(round);
      a = await alone();
    }
    b.say(`isolation   round ${round} alone ${fmt(a)} MiB/s, next to a stalled stream ${fmt(s.mibPerSec)} MiB/s (${s.note})`);
  }
}

export function isolationRows(iso: Isolation | undefined): Row[] {
  if (!iso || !iso.aloneMiBs.length) return [];
  return [
    { scenario: "isolation: 10 MiB downloads alone (wrk -c1)", unit: "MiB/s", runs: { burrow: iso.aloneMiBs }, higherIsBetter: true, ratioText: { direct: "", ssh: "" } },
    {
      scenario: "isolation: same, next to a stalled stream on the same agent",
      note: iso.serverRssKiB.length
        ? `(the stalled visitor left ${fmt(median(iso.stalledQueueBytes) / MiB)} MiB unread; server RSS +${fmt(median(iso.serverRssKiB.map((r) => r.after - r.before)) / 1024)} MiB while it stalled)`
        : undefined,
      unit: "MiB/s",
      runs: { burrow: iso.stalledMiBs },
      higherIsBetter: true,
      ratioText: { direct: `stalled/alone ${fmtRatio(ratio(median(iso.stalledMiBs), median(iso.aloneMiBs)))}`, ssh: "" },
    },
  ];
}

export function isolationTarget(iso: Isolation | undefined): Target {
  const keep = iso ? ratio(median(iso.stalledMiBs), median(iso.aloneMiBs)) : NaN;
  return {
    name: "a stalled stream's cost to its neighbour",
    want: "< 10%",
    measured: Number.isFinite(keep) ? `${fmt((1 - keep) * 100)}% (${fmtRatio(keep)} of alone)` : "–",
    pass: Number.isFinite(keep) ? keep > 0.9 : null,
  };
}
