/**
 * nghttp2's command-line clients from Debian's `nghttp2-client` package:
 * `nghttp` (one client, every frame shown with -v) and `h2load` (a load
 * generator), real HTTP/2 peers for the engine's tests. Installed with
 * apt-get where missing, as .ci/run does.
 */
import { existsSync } from "node:fs";
import { aptInstall } from "./debian-packages.ts";

export const NGHTTP = "/usr/bin/nghttp";
export const H2LOAD = "/usr/bin/h2load";

/** Both programs, installed first where they are missing. */
export function nghttp2Available(): boolean {
  const there = () => existsSync(NGHTTP) && existsSync(H2LOAD);
  return there() || (aptInstall(["nghttp2-client"], "the HTTP/2 tests") && there());
}

/** Runs a program to its end (at most `timeoutMs`) and gives its output (as text, and as the bytes it was) and exit code. */
export async function run(cmd: string[], timeoutMs = 60_000): Promise<{ code: number; stdout: string; bytes: Uint8Array; stderr: string }> {
  const proc = Bun.spawn(cmd, { stdout: "pipe", stderr: "pipe", stdin: "ignore", timeout: timeoutMs });
  const [out, stderr, code] = await Promise.all([new Response(proc.stdout).arrayBuffer(), new Response(proc.stderr).text(), proc.exited]);
  const bytes = new Uint8Array(out);
  return { code, stdout: new TextDecoder().decode(bytes), bytes, stderr };
}
