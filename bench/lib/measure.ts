/** The load generators: wrk (HTTP), a source into the counting sink (raw TCP), iperf3, curl. */
import { readFileSync } from "node:fs";
import type { Child, Processes } from "./proc.ts";
import { tool } from "./setup.ts";

export const MiB = 1024 * 1024;
export const GiB = 1024 * MiB;

export interface WrkResult {
  requests: number;
  seconds: number;
  reqPerSec: number;
  /** MiB/s of response bytes (headers included, as wrk counts). */
  mibPerSec: number;
  p50Ms: number;
  p99Ms: number;
  /** Non-2xx/3xx responses plus socket errors. */
  errors: number;
  raw: string;
}

const BYTE_UNITS: Record<string, number> = { B: 1, KB: 1024, MB: MiB, GB: GiB, TB: 1024 * GiB };
const TIME_UNITS: Record<string, number> = { us: 0.001, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function time(s: string): number {
  const m = /^([\d.]+)(us|ms|s|m|h)$/.exec(s);
  if (!m) throw new Error(`cannot read wrk time '${s}'`);
  return Number(m[1]) * TIME_UNITS[m[2]!]!;
}

/** Parses `wrk --latency` output. */
export function parseWrk(out: string): WrkResult {
  const total = /(\d+) requests in ([\d.]+)(us|ms|s|m), ([\d.]+)(B|KB|MB|GB|TB) read/.exec(out);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out);
  const p50 = /^\s+50%\s+(\S+)/m.exec(out);
  const p99 = /^\s+99%\s+(\S+)/m.exec(out);
  if (!total || !rps || !p50 || !p99) throw new Error(`cannot read wrk output:\n${out}`);
  const seconds = time(`${total[2]}${total[3]}`) / 1000;
  const bytes = Number(total[4]) * BYTE_UNITS[total[5]!]!;
  const non2xx = Number(/Non-2xx or 3xx responses: (\d+)/.exec(out)?.[1] ?? 0);
  const sock = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(out);
  const errors = non2xx + (sock ? sock.slice(1).reduce((a, b) => a + Number(b), 0) : 0);
  return {
    requests: Number(total[1]),
    seconds,
    reqPerSec: Number(rps[1]),
    mibPerSec: bytes / MiB / seconds,
    p50Ms: time(p50[1]!),
    p99Ms: time(p99[1]!),
    errors,
    raw: out,
  };
}

export async function wrk(
  procs: Processes,
  opts: { url: string; connections: number; seconds: number; host?: string; timeoutS?: number },
): Promise<WrkResult> {
  const args = [tool("wrk"), "-t1", `-c${opts.connections}`, `-d${opts.seconds}s`, `--timeout`, `${opts.timeoutS ?? 10}s`, "--latency"];
  if (opts.host) args.push("-H", `Host: ${opts.host}`);
  args.push(opts.url);
  const r = await procs.run(args, { timeoutMs: (opts.seconds + 30) * 1000 });
  if (r.code !== 0) throw new Error(`wrk failed (${r.code}): ${r.stderr}${r.stdout}`);
  return parseWrk(r.stdout);
}

/** One line of the sink's output: a finished connection. */
interface SinkRecord {
  bytes: number;
  openAt: number;
  firstAt: number;
  endAt: number;
}

/** Reads the sink's log for connection records past `offset`. */
function sinkRecords(procs: Processes, sink: Child, offset: number): SinkRecord[] {
  return procs
    .log(sink)
    .slice(offset)
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as SinkRecord);
}

export interface TransferResult {
  /** Bytes sent. */
  bytes: number;
  /** Bytes that arrived (the sink's count); less than `bytes` means the path lost data. */
  received: number;
  seconds: number;
  /** Of the bytes that arrived. */
  mibPerSec: number;
  /** The path never closed the sender's connection after the transfer. */
  hung?: boolean;
}

/**
 * Pushes `bytes` from a source process (`source` + HOST PORT BYTES) through
 * 127.0.0.1:port into the counting sink; the time runs from the source's
 * connect to the sink's EOF. A source still waiting for its connection to
 * close 15 s after the sink saw the end is stopped and noted (`hung`).
 */
export async function pushThrough(
  procs: Processes,
  sink: Child,
  source: string[],
  port: number,
  bytes: number,
  timeoutS: number,
  name = "source",
): Promise<TransferResult> {
  const offset = readFileSync(sink.logPath, "utf8").length;
  const child = procs.spawn(`${name}-${Date.now()}`, [...source, "127.0.0.1", String(port), String(bytes)]);
  const deadline = Date.now() + timeoutS * 1000;
  let rec: SinkRecord | undefined;
  let sinkDoneAt = 0;
  try {
    for (;;) {
      // probes (0 bytes) are not transfers; wait for the one that carried data
      rec ??= sinkRecords(procs, sink, offset).find((x) => x.bytes > 0);
      if (rec && !sinkDoneAt) sinkDoneAt = Date.now();
      if (child.done && rec) break;
      const failedSource = child.done && child.proc.exitCode !== 0;
      if (child.done && !rec && (failedSource || Date.now() - (child.doneAt ?? 0) > 30_000)) throw new Error(`the sink never saw the transfer:\n${procs.tail(child)}`);
      if (rec && Date.now() - sinkDoneAt > 15_000) break; // the path did not close the source's connection
      if (Date.now() > deadline) throw new Error(`transfer through :${port} did not finish in ${timeoutS} s:\n${procs.tail(child)}`);
      await Bun.sleep(20);
    }
    const hung = !child.done;
    const start = /^start ([\d.]+)/m.exec(procs.log(child));
    if (!start) throw new Error(`source printed no start:\n${procs.tail(child)}`);
    const seconds = (rec.endAt - Number(start[1])) / 1000;
    return { bytes, received: rec.bytes, seconds, mibPerSec: rec.bytes / MiB / seconds, ...(hung ? { hung } : {}) };
  } finally {
    await procs.stop(child, "SIGKILL");
  }
}

/**
 * iperf3 single stream, the client sending `bytes` to the server behind
 * `port`, with a report every second; a run that makes no progress for
 * `stallS` seconds is killed and fails (so a path that hangs costs seconds,
 * not the whole run).
 */
export async function iperf3(procs: Processes, name: string, port: number, bytes: number, stallS = 15): Promise<TransferResult> {
  const child = procs.spawn(name, [tool("iperf3"), "-c", "127.0.0.1", "-p", String(port), "-n", String(bytes), "-l", "128K", "-i", "1", "-f", "M", "--forceflush"]);
  let size = -1;
  let progressAt = Date.now();
  while (!child.done) {
    const now = procs.log(child).length;
    if (now !== size) {
      size = now;
      progressAt = Date.now();
    } else if (Date.now() - progressAt > stallS * 1000) {
      await procs.stop(child, "SIGKILL");
      throw new Error(`iperf3 made no progress for ${stallS} s:\n${procs.tail(child, 5)}`);
    }
    await Bun.sleep(100);
  }
  await procs.stop(child);
  const out = procs.log(child);
  const UNITS: Record<string, number> = { K: 1024, M: MiB, G: GiB };
  const line = (role: string) => {
    const m = new RegExp(`([\\d.]+)-([\\d.]+)\\s+sec\\s+([\\d.]+) ([KMG])Bytes\\s+([\\d.]+) MBytes/sec.*${role}`).exec(out);
    return m ? { seconds: Number(m[2]) - Number(m[1]), bytes: Number(m[3]) * UNITS[m[4]!]!, mibPerSec: Number(m[5]) } : undefined;
  };
  const recv = line("receiver");
  const sent = line("sender");
  if (!recv || !sent) throw new Error(`iperf3 failed:\n${out.trim().split("\n").slice(-5).join("\n")}`);
  // the receiver's count is taken while the last bytes may still be in flight: not a loss
  return { bytes: sent.bytes, received: sent.bytes, seconds: recv.seconds, mibPerSec: recv.mibPerSec };
}

/** What a log line adds after a transfer that lost bytes or was never closed. */
export function lostNote(r: { bytes: number; received: number; hung?: boolean }): string {
  return (
    (r.received < r.bytes ? `  LOST ${(r.bytes - r.received).toLocaleString("en-US")} of ${r.bytes.toLocaleString("en-US")} bytes` : "") +
    (r.hung ? "  (the connection was never closed)" : "")
  );
}
