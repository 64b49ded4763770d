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

export function startUpdateChecks(options: UpdateCheckOptions): { stop(): void } {
  const key = releaseKey();
  if (!key) return { stop() {} };
  let timer: ReturnType<typeof setTimeout> | undefined;
  let stopped = false;
  const look = async () => {
    try {
      const source = releaseSource(options.from);
      const { build, order } = await findBuild(source, { version: options.version, target: options.target, key });
      if (order > 0) log.info("a newer burrow release exists", { version: build.version, running: options.version, from: source.where, update: "burrow update" });
    } catch (err) {
      log.warn("update check failed", { code: err instanceof UpdateError ? err.code : "ERROR", err: (err as Error).message });
    }
    if (!stopped) schedule(options.intervalMs);
  };
  const schedule = (ms: number) => {
    timer = setTimeout(() => void look(), ms);
    timer.unref?.(); // never what keeps a stopping server alive
  };
  schedule(Math.min(FIRST_AFTER_MS, options.intervalMs));
  return {
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}
