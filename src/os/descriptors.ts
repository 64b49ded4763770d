/**
 * The process's file descriptors: the one resource every connection costs
 * and whose exhaustion takes everything down at once (Bun's accept loop then
 * spins and even the admin API stops answering). The limit is read once;
 * what is in use is sampled often enough to react before a flood of
 * connections reaches it, and cheaply (the size of /proc/self/fd, where the
 * kernel gives it, else a listing of it or of /dev/fd).
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import { log } from "../log.ts";

/** How often descriptors in use are counted. */
export const SAMPLE_INTERVAL_MS = 250;

/** The soft open-file limit of this process, or undefined where it cannot be read. */
export function openFileLimit(): number | undefined {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.split(/\s{2,}/)[1];
    if (soft === "unlimited") return Number.MAX_SAFE_INTEGER;
    return soft ? Number(soft) : undefined;
  } catch {
    return undefined; // not Linux: no limit to read without a native call
  }
}

const FD_DIRS = ["/proc/self/fd", "/dev/fd"];

/** Descriptors this process holds now, or undefined where it cannot tell. */
export function descriptorsInUse(): number | undefined {
  // Linux 6.2 and later give /proc/self/fd's count as its size: one stat, whatever the count, where
  // a listing makes a name per descriptor (milliseconds a sample with thousands open, four samples a second)
  try {
    const size = statSync(FD_DIRS[0]!).size;
    if (size > 0) return size;
  } catch {
    // not Linux: listed below
  }
  for (const dir of FD_DIRS) {
    try {
      return readdirSync(dir).length;
    } catch {
      // try the next
    }
  }
  return undefined;
}

/**
 * The descriptors kept free for what must go on working under a flood: the
 * agents already connected, the admin API, the database, logs. Pressure
 * starts when fewer than this are left, and ends when twice as many are.
 */
export function reserveFor(limit: number): number {
  return Math.max(64, Math.floor(limit * 0.05));
}

/**
 * Watches descriptors in use against the limit and says when pressure
 * starts and ends. Without a readable limit or count it never reports.
 */
export class DescriptorWatch {
  pressed = false;
  private timer: ReturnType<typeof setInterval> | undefined;

  constructor(
    readonly limit: number | undefined,
    private readonly onChange: (pressed: boolean, inUse: number) => void,
    private readonly count: () => number | undefined = descriptorsInUse,
  ) {}

  start(): void {
    if (this.limit === undefined || this.count() === undefined) return;
    this.timer = setInterval(() => this.sample(), SAMPLE_INTERVAL_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  sample(): void {
    const inUse = this.count();
    if (inUse === undefined || this.limit === undefined) return;
    const reserve = reserveFor(this.limit);
    const pressed = this.pressed ? inUse > this.limit - 2 * reserve : inUse >= this.limit - reserve;
    if (pressed !== this.pressed) {
      this.pressed = pressed;
      this.onChange(pressed, inUse);
    }
  }
}

/** Connections left for visitors when --max-conns is auto: half of what the file limit leaves after a reserve. */
export function defaultMaxConns(fdLimit: number | undefined): number {
  if (fdLimit === undefined) return 10_000;
  return Math.max(64, Math.floor((Math.min(fdLimit, 10_000_000) - 256) / 2));
}

export function logDescriptorBudget(fdLimit: number | undefined, maxConns: number, perIp: number): void {
  const fields = { open_files: fdLimit ?? "unknown", max_conns: maxConns, max_conns_per_ip: perIp };
  if (fdLimit !== undefined && fdLimit < 4096) {
    log.warn("the open-file limit is low for a public server: raise it (systemd: LimitNOFILE=65536)", fields);
  } else log.info("connection budget", fields);
}
