/** Runs a burrow command that is meant to end (not a server that serves), bounded in time. */
import { burrowCommand } from "./server.ts";

export interface Exited {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The command was still running after the limit and was killed. */
  timedOut: boolean;
}

export interface RunOptions {
  /** Added to an environment without the outer shell's BURROW_ variables. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  timeoutMs?: number;
}

export async function runBurrow(args: string[], opts: RunOptions = {}): Promise<Exited> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith("BURROW_") && v !== undefined) env[k] = v;
  for (const [k, v] of Object.entries(opts.env ?? {})) if (v !== undefined) env[k] = v;
  const proc = Bun.spawn([...burrowCommand(), ...args], { cwd: opts.cwd, env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.kill("SIGKILL");
  }, opts.timeoutMs ?? 15_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr, timedOut };
}
