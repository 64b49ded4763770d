/**
 * nginx from Debian's `nginx` package, run by a test as a process of its own
 * (no daemon, one process, everything under a temporary directory) with the
 * `http` block the test gives: a real server for what burrow must work with
 * (the PROXY protocol, TLS of its own).
 */
import type { Subprocess } from "bun";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";
import { untilListening } from "./ports.ts";

const NGINX = "/usr/sbin/nginx";

export interface TestNginx extends AsyncDisposable {
  dir: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  stop(): Promise<void>;
}

/** The nginx program, installed first with apt-get where it is missing (as .ci/run does). */
export function nginxAvailable(): boolean {
  return existsSync(NGINX) || (aptInstall(["nginx"], "the nginx tests") && existsSync(NGINX));
}

/** Starts nginx with `httpBlock` as its `http { ... }` contents and waits until `port` takes connections. */
export async function startNginx(httpBlock: string, port: number): Promise<TestNginx> {
  if (!nginxAvailable()) throw new Error("nginx is not installed: install Debian's nginx package (.ci/run installs it)");
  const dir = mkdtempSync(join(tmpdir(), "burrow-nginx-"));
  const temp = (name: string) => `${name}_temp_path ${join(dir, name)};`;
  writeFileSync(
    join(dir, "nginx.conf"),
    `daemon off;
master_process off;
pid ${join(dir, "nginx.pid")};
error_log ${join(dir, "error.log")} info;
events { worker_connections 256; }
http {
  access_log off;
  ${["client_body", "proxy", "fastcgi", "uwsgi", "scgi"].map(temp).join("\n  ")}
  ${httpBlock}
}
`,
  );
  const proc = Bun.spawn([NGINX, "-p", dir, "-c", join(dir, "nginx.conf")], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const stop = async () => {
    proc.kill();
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await untilListening(port, () => (proc.exitCode !== null ? `nginx exited: ${readFileSync(join(dir, "error.log"), "utf8").slice(-2000)}` : undefined), "nginx listening");
  } catch (err) {
    await stop();
    throw err;
  }
  return { dir, proc, stop, [Symbol.asyncDispose]: stop };
}
