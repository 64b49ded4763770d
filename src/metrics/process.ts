/**
 * The process's own gauges: memory, CPU, descriptors and event-loop lag,
 * read when Prometheus scrapes. prom-client's collectDefaultMetrics() is not
 * used: under Bun half of it (V8 heap spaces, GC kinds) reads as zeros, and
 * a dashboard should not show numbers that mean nothing.
 */
import { monitorEventLoopDelay } from "node:perf_hooks";
import { Counter, Gauge, type Registry } from "prom-client";
import { descriptorsInUse, openFileLimit } from "../os/descriptors.ts";

/** How finely the event loop's delay is sampled (a timer this often, as prom-client's default does). */
const LAG_RESOLUTION_MS = 20;

export function processMetrics(registry: Registry, prefix: string): { stop(): void } {
  const registers = [registry];
  const startedAt = Math.round(Date.now() / 1000 - process.uptime());
  const fdLimit = openFileLimit();
  const lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
  lag.enable();

  new Gauge({
    name: `${prefix}process_resident_memory_bytes`,
    help: "Resident memory of the process (RSS), bytes.",
    registers,
    collect() {
      this.set(process.memoryUsage.rss());
    },
  });
  new Counter({
    name: `${prefix}process_cpu_seconds_total`,
    help: "CPU time the process has used, seconds, by mode (user, system).",
    labelNames: ["mode"],
    registers,
    collect() {
      const used = process.cpuUsage(); // microseconds since start
      this.reset();
      this.inc({ mode: "user" }, used.user / 1e6);
      this.inc({ mode: "system" }, used.system / 1e6);
    },
  });
  new Gauge({
    name: `${prefix}process_open_fds`,
    help: "File descriptors the process holds open (sockets included).",
    registers,
    collect() {
      const n = descriptorsInUse();
      if (n !== undefined) this.set(n);
    },
  });
  new Gauge({
    name: `${prefix}process_max_fds`,
    help: "The process's soft limit on open file descriptors.",
    registers,
    collect() {
      if (fdLimit !== undefined) this.set(fdLimit);
    },
  });
  new Gauge({
    name: `${prefix}process_start_time_seconds`,
    help: "When the process started, seconds since the Unix epoch.",
    registers,
    collect() {
      this.set(startedAt);
    },
  });
  // one window for both, the time since the previous scrape: whichever is collected first takes it
  let window = { at: -Infinity, max: 0, p99: 0 };
  const lagWindow = () => {
    const now = performance.now();
    if (now - window.at > 100) {
      window = { at: now, max: lag.count > 0 ? lag.max / 1e9 : 0, p99: lag.count > 0 ? lag.percentile(99) / 1e9 : 0 };
      lag.reset();
    }
    return window;
  };
  new Gauge({
    name: `${prefix}event_loop_lag_max_seconds`,
    help: "The longest the event loop was late to run a timer since the previous scrape, seconds.",
    registers,
    collect() {
      this.set(lagWindow().max);
    },
  });
  new Gauge({
    name: `${prefix}event_loop_lag_p99_seconds`,
    help: "How late the event loop ran timers since the previous scrape, seconds: the 99th percentile.",
    registers,
    collect() {
      this.set(lagWindow().p99);
    },
  });
  return { stop: () => lag.disable() };
}
