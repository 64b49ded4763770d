/**
 * HAProxy from Debian's `haproxy` package in front of several burrow nodes:
 * TCP mode, round robin, health checks every half second, so a node that
 * dies is out of rotation within a second and a connection refused by it is
 * sent to another (redispatch). Visitors and agents alike go through it, as
 * they would through a load balancer in front of a cluster.
 */
import type { Subprocess } from "bun";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";
import { freeRange } from "./ports.ts";

const HAPROXY = "/usr/sbin/haproxy";

export interface TestBalancer extends AsyncDisposable {
  port: number;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  stop(): Promise<void>;
}

/** The haproxy program, installed first with apt-get where it is missing (as .ci/run does). */
export function haproxyAvailable(): boolean {
  return existsSync(HAPROXY) || (aptInstall(["haproxy"], "the load-balancer tests") && existsSync(HAPROXY));
}

export async function startBalancer(backends: number[]): Promise<TestBalancer> {
  if (!haproxyAvailable()) throw new Error("haproxy is not installed: install Debian's haproxy package (.ci/run installs it)");
  const dir = mkdtempSync(join(tmpdir(), "burrow-haproxy-"));
  const port = freeRange(1).first;
  const config = [
    "global",
    "  maxconn 4000",
    "defaults",
    "  mode tcp",
    "  timeout connect 2s",
    "  timeout client 1h",
    "  timeout server 1h",
    "  retries 3",
    "  option redispatch",
    "frontend burrow",
    `  bind 127.0.0.1:${port}`,
    "  default_backend nodes",
    "backend nodes",
    "  balance roundrobin",
    ...backends.map((p, i) => `  server node${i + 1} 127.0.0.1:${p} check inter 500 fall 2 rise 1`),
    "",
  ].join("\n");
  const file = join(dir, "haproxy.cfg");
  writeFileSync(file, config);
  // -db: in the foreground, so that the PID is haproxy's own
  const proc = Bun.spawn([HAPROXY, "-db", "-f", file], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let stopped: Promise<void> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
      await proc.exited;
      clearTimeout(timer);
      rmSync(dir, { recursive: true, force: true });
    })());
  // ready when it accepts
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const s = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } });
      s.end();
      break;
    } catch {
      if (proc.exitCode !== null || Date.now() > deadline) {
        await stop();
        throw new Error(`haproxy did not start: ${await new Response(proc.stderr).text()}`);
      }
      await Bun.sleep(50);
    }
  }
  return { port, proc, stop, [Symbol.asyncDispose]: stop };
}
