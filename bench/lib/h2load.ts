/**
 * h2load (Debian's nghttp2-client), HTTP/2's load generator, as wrk is
 * HTTP/1.1's in measure.ts: one thread, a warm-up, then a fixed duration.
 * It reports the request time's min, max, mean and standard deviation, not
 * percentiles; those are what is kept (its per-request log would give them,
 * at the cost of a write per request in the client being timed).
 */
import type { Processes } from "./proc.ts";
import { tool } from "./setup.ts";

export interface H2loadResult {
  /** Requests finished within the measured duration (the warm-up's not counted). */
  requests: number;
  seconds: number;
  reqPerSec: number;
  /** The time for request (ms): from the stream's HEADERS to its end. */
  minMs: number;
  maxMs: number;
  meanMs: number;
  sdMs: number;
  /** Failed (a reset, an error, or a status not 2xx/3xx) and timed out requests. */
  errors: number;
  /** What the connections spoke, as h2load says it ("h2c" for prior knowledge). */
  protocol: string;
}

const TIME_UNITS: Record<string, number> = { us: 0.001, ms: 1, s: 1000 };

function time(s: string): number {
  const m = /^([\d.]+)(us|ms|s)$/.exec(s);
  if (!m) throw new Error(`cannot read h2load time '${s}'`);
  return Number(m[1]) * TIME_UNITS[m[2]!]!;
}

/** Parses h2load's summary. */
export function parseH2load(out: string): H2loadResult {
  const rps = /finished in \S+, ([\d.]+) req\/s/.exec(out);
  const req = /requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/.exec(out);
  const rt = /time for request:\s+(\S+)\s+(\S+)\s+(\S+)\s+(\S+)/.exec(out);
  if (!rps || !req || !rt) throw new Error(`cannot read h2load output:\n${out}`);
  const reqPerSec = Number(rps[1]);
  const requests = Number(req[3]);
  return {
    requests,
    seconds: reqPerSec > 0 ? requests / reqPerSec : NaN,
    reqPerSec,
    minMs: time(rt[1]!),
    maxMs: time(rt[2]!),
    meanMs: time(rt[3]!),
    sdMs: time(rt[4]!),
    errors: Number(req[5]) + Number(req[7]),
    protocol: /Application protocol: (\S+)/.exec(out)?.[1] ?? "none",
  };
}

/** h2load's DURATION: whole seconds as they are, anything finer in ms. */
const duration = (s: number) => (Number.isInteger(s) ? String(s) : `${Math.max(1, Math.round(s * 1000))}ms`);

/**
 * `h2load -t1 -c<clients> -m<streams>` on `url` for `seconds` after
 * `warmupSeconds`, with prior knowledge on a plain URL. `connectTo`
 * (host:port) connects there while the URL's authority is what is asked
 * for (a tunnel's name).
 */
export async function h2load(
  procs: Processes,
  opts: { url: string; connectTo?: string; clients: number; streams: number; seconds: number; warmupSeconds: number },
): Promise<H2loadResult> {
  const args = [tool("h2load"), "-t1", `-c${opts.clients}`, `-m${opts.streams}`, "-D", duration(opts.seconds)];
  if (opts.warmupSeconds > 0) args.push(`--warm-up-time=${duration(opts.warmupSeconds)}`);
  if (opts.connectTo) args.push(`--connect-to=${opts.connectTo}`);
  args.push(opts.url);
  const r = await procs.run(args, { timeoutMs: (opts.seconds + opts.warmupSeconds + 30) * 1000 });
  if (r.code !== 0) throw new Error(`h2load failed (${r.code}): ${r.stderr}${r.stdout.slice(-2000)}`);
  const res = parseH2load(r.stdout);
  // a server that ends each connection after so many requests leaves h2load with no client in the measured part
  if (res.requests === 0) throw new Error(`h2load finished no request in the measured ${opts.seconds} s:\n${r.stdout.slice(-1500)}`);
  return res;
}
