/**
 * An HTTP proxy from Debian's `tinyproxy` package, run by a test as a
 * process of its own on a free loopback port (no daemon, its log on stdout):
 * a real proxy that takes CONNECT, as users' corporate proxies do. Its log
 * says which addresses it connected to.
 */
import type { Subprocess } from "bun";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";
import { freePort, untilListening } from "./ports.ts";

const TINYPROXY = "/usr/bin/tinyproxy";

export interface TestHttpProxy extends AsyncDisposable {
  url: string;
  log: LineReader;
  stop(): Promise<void>;
}

/** tinyproxy, installed first with apt-get where it is missing (as .ci/run does). */
export function tinyproxyAvailable(): boolean {
  return existsSync(TINYPROXY) || (aptInstall(["tinyproxy"], "the HTTP proxy tests") && existsSync(TINYPROXY));
}

/**
 * `connectPorts`: the only ports it CONNECTs to (tinyproxy's ConnectPort);
 * to any other it answers 403, as a corporate proxy that allows 443 alone.
 */
export async function startTinyproxy(opts: { connectPorts?: number[] } = {}): Promise<TestHttpProxy> {
  if (!tinyproxyAvailable()) throw new Error("tinyproxy is not installed: install Debian's tinyproxy package (.ci/run installs it)");
  const dir = mkdtempSync(join(tmpdir(), "burrow-tinyproxy-"));
  const port = freePort();
  // no ConnectPort line: CONNECT to any port (the edge's is a free one, not 443)
  const connectPorts = (opts.connectPorts ?? []).map((p) => `ConnectPort ${p}`);
  writeFileSync(join(dir, "tinyproxy.conf"), [`Port ${port}`, "Listen 127.0.0.1", "Allow 127.0.0.1", "Timeout 600", "MaxClients 200", "LogLevel Connect", ...connectPorts, ""].join("\n"));
  const proc: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn([TINYPROXY, "-d", "-c", join(dir, "tinyproxy.conf")], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const log = new LineReader(proc);
  const stop = async () => {
    proc.kill();
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await untilListening(port, () => (proc.exitCode !== null ? `tinyproxy exited: ${log.text().slice(-2000)}` : undefined), "tinyproxy listening");
  } catch (err) {
    await stop();
    throw err;
  }
  return { url: `http://127.0.0.1:${port}`, log, stop, [Symbol.asyncDispose]: stop };
}
