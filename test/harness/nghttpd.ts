/**
 * nghttpd, nghttp2's HTTP/2 server from Debian's `nghttp2-server` package,
 * serving a directory without TLS (h2c, prior knowledge) on 127.0.0.1: a
 * real HTTP/2 service for the agent's --upstream-protocol h2c. Installed
 * with apt-get where missing, as .ci/run does. nghttpd cannot be asked for
 * any free port and say which, so a free one is picked and tried, again
 * elsewhere when it was taken meanwhile; it is ready once it says it
 * listens (-v).
 */
import type { Subprocess } from "bun";
import { existsSync } from "node:fs";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";
import { freeRange } from "./ports.ts";

export const NGHTTPD = "/usr/sbin/nghttpd";

export function nghttpdAvailable(): boolean {
  return existsSync(NGHTTPD) || (aptInstall(["nghttp2-server"], "the HTTP/2 service tests") && existsSync(NGHTTPD));
}

export interface Nghttpd extends AsyncDisposable {
  port: number;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  output: LineReader;
}

/** nghttpd serving `dir` with `args` (--echo-upload, --trailer...), once it listens. */
export async function startNghttpd(dir: string, args: string[] = []): Promise<Nghttpd> {
  if (!nghttpdAvailable()) throw new Error("nghttpd is not installed: install Debian's nghttp2-server (.ci/run installs it)");
  let last = "";
  for (let attempt = 0; attempt < 5; attempt++) {
    const port = freeRange(1).first;
    const proc = Bun.spawn([NGHTTPD, "--no-tls", "-a", "127.0.0.1", "-v", "-d", dir, ...args, String(port)], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    const output = new LineReader(proc);
    try {
      await output.waitFor(new RegExp(`listen 127\\.0\\.0\\.1:${port}$`), 10_000);
    } catch {
      last = output.text();
      proc.kill();
      await proc.exited;
      continue; // the port was taken meanwhile: another
    }
    return {
      port,
      proc,
      output,
      [Symbol.asyncDispose]: async () => {
        proc.kill();
        await proc.exited;
      },
    };
  }
  throw new Error(`nghttpd did not start: ${last}`);
}
