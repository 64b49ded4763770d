/**
 * A real gRPC service without TLS (h2c) and its client
 * (test/fixtures/grpc-h2c.py), on Debian's python3-grpcio (grpc.ts installs
 * it where missing): the service behind an http tunnel with
 * --upstream-protocol h2c. The service listens on any free port and says
 * which.
 */
import type { Subprocess } from "bun";
import { join } from "node:path";
import { grpcAvailable } from "./grpc.ts";
import { LineReader } from "./lines.ts";

const PYTHON = "/usr/bin/python3";
const SCRIPT = join(import.meta.dir, "..", "fixtures", "grpc-h2c.py");

export interface GrpcH2c extends AsyncDisposable {
  port: number;
  proc: Subprocess<"ignore", "pipe", "pipe">;
}

/** The service on 127.0.0.1, once it listens. */
export async function startGrpcH2c(): Promise<GrpcH2c> {
  if (!grpcAvailable()) throw new Error("python3-grpcio is not installed: install Debian's python3-grpcio (.ci/run installs it)");
  const proc = Bun.spawn([PYTHON, SCRIPT, "serve"], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const out = new LineReader(proc);
  let port: number;
  try {
    port = Number(/^serving (\d+)$/.exec(await out.waitFor(/^serving \d+$/, 10_000))![1]);
  } catch (err) {
    proc.kill();
    throw new Error(`the gRPC service did not start: ${(err as Error).message}: ${out.text()}`);
  }
  return {
    port,
    proc,
    [Symbol.asyncDispose]: async () => {
      proc.kill();
      await proc.exited;
    },
  };
}

/**
 * The fixture's client: `say` or `fail` (a unary call) with `arg` as the
 * request, or `chat` (a bidirectional streaming call) of `arg` messages,
 * to `addr` (HOST:PORT) with `authority` as :authority. Its output's lines:
 * the answers, or "error CODE DETAILS".
 */
export async function grpcCall(call: "say" | "fail" | "chat", addr: string, authority: string, arg: string): Promise<string[]> {
  const proc = Bun.spawn([PYTHON, SCRIPT, call, addr, authority, arg], { stdin: "ignore", stdout: "pipe", stderr: "pipe", timeout: 40_000 });
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  const lines = out.trim().split("\n").filter(Boolean);
  return lines.length > 0 ? lines : [err.trim()];
}
