/**
 * The server's look for a newer release (--update-check, on by default):
 * once a day it reads the release's SHA256SUMS and its signature (two GETs
 * of static files, nothing else sent: no id, no version, no counts), and
 * logs a line when the release lists a newer executable for its platform.
 * It never downloads or installs anything. A build without the release key
 * (run from source) does not look: it could not tell a real release from
 * another.
 */
import { log } from "../log.ts";
import { UpdateError } from "./errors.ts";
import { releaseKey } from "./release-key.ts";
import { releaseSource } from "./source.ts";
import { findBuild } from "./update.ts";

export interface UpdateCheckOptions {
  /** --update-from: where the release is; the latest on GitHub when undefined */
  from?: string;
  intervalMs: number;
  version: string;
  target: string;
}

/** The first look, this long after the start (or one interval, when shorter): a restart loop does not become a stream of requests. */
const FIRST_AFTER_MS = 60_000;
/** One look ends by then, however slowly a mirror trickles its bytes. */
const LOOK_DEADLINE_MS = 120_000;
/** setTimeout's longest wait (2^31-1 ms, about 24.8 days); longer intervals are waited in turns. */
const LONGEST_TIMER_MS = 2 ** 31 - 1;

export function startUpdateChecks(options: UpdateCheckOptions): { stop(): void } {
  const key = releaseKey();
  if (!key) return { stop() {} };
  let timer: ReturnType<typeof setTimeout> | undefined;
  const stopping = new AbortController();
  const look = async () => {
    const signal = AbortSignal.any([stopping.signal, AbortSignal.timeout(LOOK_DEADLINE_MS)]);
    try {
      const source = releaseSource(options.from, { signal });
      const { build, order } = await findBuild(source, { version: options.version, target: options.target, key });
      if (order > 0) log.info("a newer burrow release exists", { version: build.version, running: options.version, from: source.where, update: "burrow update" });
    } catch (err) {
      if (!stopping.signal.aborted) log.warn("update check failed", { code: err instanceof UpdateError ? err.code : "ERROR", err: (err as Error).message });
    }
    if (!stopping.signal.aborted) wait(options.intervalMs);
  };
  const wait = (ms: number) => {
    const now = Math.min(ms, LONGEST_TIMER_MS);
    timer = setTimeout(() => (ms > now ? wait(ms - now) : void look()), now);
    timer.unref?.(); // never what keeps a stopping server alive
  };
  wait(Math.min(FIRST_AFTER_MS, options.intervalMs));
  return {
    stop() {
      stopping.abort();
      clearTimeout(timer);
    },
  };
}
