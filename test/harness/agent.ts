/**
 * Starts the real agent (`burrow http` / `burrow tcp`) as a child process
 * and waits for its "Forwarding" line. Use with `await using`.
 */
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LineReader } from "./lines.ts";
import { burrowCommand } from "./server.ts";

export interface TestAgent extends AsyncDisposable {
  /** The public address it printed: http://name.localhost:port or localhost:port. */
  publicUrl: string;
  /** For http tunnels: the subdomain; for tcp: undefined. */
  subdomain?: string;
  /** For tcp tunnels: the public port. */
  port?: number;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  output: LineReader;
  /** SIGINT (Ctrl-C), then wait for exit; returns the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export interface AgentStart {
  kind: "http" | "tcp" | "tls" | "udp";
  /** PORT or HOST:PORT of the local service. */
  target: string | number;
  server: string;
  token: string;
  args?: string[];
  env?: Record<string, string | undefined>;
  executable?: string;
  /** Words put before the command, e.g. qemu-user for an arm64 build. */
  prefix?: string[];
  /** How long its first line may take (15 s; more for an emulated executable). */
  startTimeoutMs?: number;
  /** Wait for this line instead of "Forwarding" (e.g. a refusal). */
  waitFor?: RegExp;
}

/** Spawns the agent without waiting for anything. */
export function spawnAgent(opts: Omit<AgentStart, "waitFor">): { proc: Subprocess<"ignore", "pipe", "pipe">; output: LineReader; home: string } {
  // a private config dir, so no saved login of the machine leaks in
  const home = mkdtempSync(join(tmpdir(), "burrow-agent-home-"));
  const proc = Bun.spawn(
    [...(opts.prefix ?? []), ...burrowCommand(opts.executable), opts.kind, String(opts.target), "--server", opts.server, "--token", opts.token, ...(opts.args ?? [])],
    {
      env: { ...process.env, XDG_CONFIG_HOME: home, HTTPS_PROXY: "", ALL_PROXY: "", https_proxy: "", all_proxy: "", ...opts.env },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  return { proc, output: new LineReader(proc), home };
}

export async function startAgent(opts: AgentStart): Promise<TestAgent> {
  const { proc, output, home } = spawnAgent(opts);
  let stopped: Promise<number | null> | undefined;
  const stop = (signal: NodeJS.Signals = "SIGINT") => {
    stopped ??= (async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      const code = await proc.exited;
      clearTimeout(timer);
      rmSync(home, { recursive: true, force: true });
      return code;
    })();
    return stopped;
  };
  try {
    const line = await output.waitFor(opts.waitFor ?? /Forwarding\s+(\S+)/, opts.startTimeoutMs ?? 15_000);
    // a lines agent says "Forwarding URL", a --log json one its connect event
    const publicUrl = /Forwarding\s+(\S+)/.exec(line)?.[1] ?? (line.startsWith("{") ? String(JSON.parse(line).tunnels?.[0]?.url ?? "") : "");
    const sub = /^(?:https?|tls):\/\/([^.]+)\./.exec(publicUrl)?.[1];
    const port = opts.kind !== "http" ? Number(/:(\d+)$/.exec(publicUrl)?.[1] ?? (opts.kind === "tls" ? 443 : NaN)) : undefined;
    return { publicUrl, subdomain: sub, port, proc, output, stop, [Symbol.asyncDispose]: async () => void (await stop()) };
  } catch (err) {
    await stop("SIGKILL");
    throw new Error(`agent did not come up: ${(err as Error).message}\n${output.text()}`);
  }
}

/**
 * Runs an agent that must be refused and returns its "burrow: refused" line
 * (or all its output, when it has none). Fails if the agent forwards, or
 * does not exit with 1 within 10 s.
 */
export async function refusal(opts: Omit<AgentStart, "waitFor">): Promise<string> {
  const { proc, output, home } = spawnAgent(opts);
  const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
  try {
    const code = await proc.exited;
    await output.closed();
    if (code !== 1 || output.text().includes("Forwarding")) throw new Error(`the agent was not refused (exit ${code ?? proc.signalCode}):\n${output.text()}`);
    return output.lines.find((l) => l.startsWith("burrow: refused")) ?? output.text();
  } finally {
    clearTimeout(timer);
    rmSync(home, { recursive: true, force: true });
  }
}

/** fetch() to a tunnel through the edge on 127.0.0.1, with the tunnel's Host header. */
export function tunnelFetch(edgePort: number, subdomain: string, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers);
  headers.set("host", `${subdomain}.localhost:${edgePort}`);
  return fetch(`http://127.0.0.1:${edgePort}${path}`, { ...init, headers, redirect: "manual" });
}
