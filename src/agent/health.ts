/**
 * A pool member's health check (--health-check): every interval, an HTTP
 * GET of a path on the local service (a 2xx or 3xx is healthy), or a TCP
 * connect ("tcp"). Two failures in a row take the member out of the pool's
 * rotation, two successes put it back: one bad answer moves nothing.
 */
import { runtime } from "../runtime/current.ts";
import type { LocalTarget } from "./local-target.ts";
import { localAuthority } from "./local-target.ts";

/** Failures in a row that take a member out, successes in a row that put it back. */
export const HEALTH_THRESHOLD = 2;
export const DEFAULT_HEALTH_INTERVAL_MS = 5_000;

export interface HealthSettings {
  /** A path such as /healthz, or "tcp". */
  check: string;
  intervalMs: number;
}

export class HealthCheck {
  private timer: ReturnType<typeof setTimeout> | undefined;
  private healthy = true;
  private streak = 0;
  private stopped = false;

  constructor(
    private readonly target: LocalTarget,
    private readonly settings: HealthSettings,
    /** Told each time the member goes out of rotation or comes back, with why. */
    private readonly changed: (healthy: boolean, why: string) => void,
  ) {}

  get isHealthy(): boolean {
    return this.healthy;
  }

  start(): void {
    this.stopped = false;
    this.schedule();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.round(), this.settings.intervalMs);
    this.timer.unref?.();
  }

  private async round(): Promise<void> {
    const why = await this.probe();
    if (this.stopped) return;
    const ok = why === undefined;
    if (ok === this.healthy) this.streak = 0;
    else if (++this.streak >= HEALTH_THRESHOLD) {
      this.healthy = ok;
      this.streak = 0;
      this.changed(ok, why ?? "the health check passes again");
    }
    this.schedule();
  }

  /** Undefined when healthy, else why not. */
  private async probe(): Promise<string | undefined> {
    const timeoutMs = Math.min(this.settings.intervalMs, 10_000);
    if (this.settings.check === "tcp") {
      try {
        const socket = await Promise.race([
          runtime.connect({ hostname: this.target.host, port: this.target.port, socket: { data() {}, error() {} } }),
          runtime.sleep(timeoutMs).then(() => {
            throw new Error("no connection in time");
          }),
        ]);
        socket.end();
        return undefined;
      } catch (err) {
        return `the health check could not connect: ${String((err as Error)?.message ?? err).slice(0, 100)}`;
      }
    }
    const url = `${this.target.tls ? "https" : "http"}://${localAuthority(this.target)}${this.settings.check}`;
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs), redirect: "manual", tls: { rejectUnauthorized: false } } as RequestInit);
      await res.arrayBuffer().catch(() => {});
      return res.status >= 200 && res.status < 400 ? undefined : `the health check answered ${res.status}`;
    } catch (err) {
      return `the health check failed: ${String((err as Error)?.message ?? err).slice(0, 100)}`;
    }
  }
}
