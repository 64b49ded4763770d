/**
 * Asks an executable what it is (`<file> version`) before it takes the
 * running one's place: one that does not start here (another platform, a
 * C library this machine lacks), or that says another version or platform
 * than its release listed, is refused.
 */
import { UpdateError } from "./errors.ts";

const PROBE_TIMEOUT_MS = 30_000;

export interface Probed {
  version: string;
  target: string;
}

export async function probeExecutable(path: string): Promise<Probed> {
  let proc;
  try {
    proc = Bun.spawn([path, "version"], { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, BURROW_UPDATE_CHECK: "off" } });
  } catch (err) {
    throw new UpdateError("DOES_NOT_RUN", `the new executable does not start here: ${(err as Error).message}`);
  }
  const timer = setTimeout(() => proc.kill("SIGKILL"), PROBE_TIMEOUT_MS);
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  const version = /^burrow (\S+)$/m.exec(out)?.[1];
  const target = /^target +(\S+)$/m.exec(out)?.[1];
  if (code !== 0 || !version || !target) {
    const why = (err.trim().split("\n")[0] ?? "").slice(0, 200) || `exit ${code}`;
    throw new UpdateError("DOES_NOT_RUN", `the new executable does not run here (${why})`);
  }
  return { version, target };
}
