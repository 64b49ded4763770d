/**
 * A real gRPC service over TLS and its client (test/fixtures/grpc-echo.py),
 * on Debian's python3-grpcio, installed with apt-get where it is missing (as
 * .ci/run does). Debian's own python3, not whichever python3 comes first on
 * the PATH: the package installs for it.
 */
import type { Subprocess } from "bun";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";

const PYTHON = "/usr/bin/python3";
const SCRIPT = join(import.meta.dir, "..", "fixtures", "grpc-echo.py");

const hasGrpc = () => existsSync(PYTHON) && Bun.spawnSync([PYTHON, "-c", "import grpc"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;

/** Whether python3-grpcio is there, installed first where it is missing. */
export function grpcAvailable(): boolean {
  return hasGrpc() || (aptInstall(["python3-grpcio"], "the gRPC test") && hasGrpc());
}

export interface GrpcEcho extends AsyncDisposable {
  proc: Subprocess<"ignore", "pipe", "pipe">;
}

/** The echo service on 127.0.0.1:`port` with this certificate, once it listens. */
export async function startGrpcEcho(port: number, cert: string, key: string): Promise<GrpcEcho> {
  if (!grpcAvailable()) throw new Error("python3-grpcio is not installed: install Debian's python3-grpcio (.ci/run installs it)");
  const proc = Bun.spawn([PYTHON, SCRIPT, "serve", String(port), cert, key], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const out = new LineReader(proc);
  try {
    await out.waitFor(/^serving$/, 10_000);
  } catch (err) {
    proc.kill();
    throw new Error(`the gRPC service did not start: ${(err as Error).message}: ${out.text()}`);
  }
  return {
    proc,
    [Symbol.asyncDispose]: async () => {
      proc.kill();
      await proc.exited;
    },
  };
}

/** One call of /burrow.Echo/Say to 127.0.0.1:`port`, asking for the TLS name `name` and trusting `ca`: the answer, or the client's error. */
export async function grpcSay(port: number, ca: string, name: string, text: string): Promise<string> {
  const proc = Bun.spawn([PYTHON, SCRIPT, "call", String(port), ca, name, text], { stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: 20_000 });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return out.trim() || err.trim();
}
