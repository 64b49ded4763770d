/**
 * Starts the real `burrow server` as a child process on ephemeral ports with
 * a temp data dir, and waits for its "listening" log line (never a sleep).
 * Use with `await using`, or call stop(): the process and the temp dir go
 * away even when a test fails.
 */
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LineReader } from "./lines.ts";
import { startPostgres, type TestPostgres } from "./postgres.ts";

export const ADMIN_PASSWORD = "correct-horse-battery";
const MAIN = join(import.meta.dir, "..", "..", "src", "main.ts");
const START_TIMEOUT_MS = 15_000;

export interface StartOptions {
  args?: string[];
  /** How long its "listening" line may take (an emulated executable's start takes longer than the 15 s default). */
  startTimeoutMs?: number;
  env?: Record<string, string | undefined>;
  /** Reuse a data dir (e.g. to restart on the same database). */
  dataDir?: string;
  /** Run this executable instead of `bun src/main.ts` (e.g. dist/burrow). */
  executable?: string;
  /** Keep the data dir when the server stops. */
  keepDataDir?: boolean;
  /** Words put before the command, e.g. a shell that lowers the open-file limit first. */
  prefix?: string[];
}

export interface TestServer extends AsyncDisposable {
  adminUrl: string;
  /** The public (edge) port: tunnels at http://<name>.localhost:<edgePort>, agents at /_burrow/connect. */
  edgePort: number;
  /** http://127.0.0.1:<edgePort>, what an agent's --server takes. */
  edgeUrl: string;
  /** The direct port agents are moved to; undefined with --agent-port off. */
  agentPort?: number;
  /** The port for tls tunnels only; undefined with --tls-port off (the default). */
  tlsPort?: number;
  /** The SSH gateway's port; undefined with --ssh-port off (the default). */
  sshPort?: number;
  dataDir: string;
  proc: Subprocess<"ignore", "pipe", "pipe">;
  output: LineReader;
  /** SIGTERM, then wait for exit; returns the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function burrowCommand(executable?: string): string[] {
  return executable ? [executable] : [process.execPath, MAIN];
}

/**
 * BURROW_TEST_DATABASE=postgres runs every test server on PostgreSQL (a
 * fresh database each, on one private server per test process) instead of
 * SQLite: the same tests, the other engine.
 */
let sharedPostgres: Promise<TestPostgres> | undefined;
/** A server started again on a data dir (a restart) finds its database again. */
const databaseOfDataDir = new Map<string, string>();
async function postgresArgs(opts: StartOptions, dataDir: string): Promise<string[]> {
  if (process.env.BURROW_TEST_DATABASE !== "postgres" || opts.args?.includes("--database") || opts.executable) return [];
  let url = databaseOfDataDir.get(dataDir);
  if (!url) {
    sharedPostgres ??= startPostgres();
    url = await (await sharedPostgres).newDatabase();
    databaseOfDataDir.set(dataDir, url);
  }
  return ["--database", url];
}

export async function startServer(opts: StartOptions = {}): Promise<TestServer> {
  const dataDir = opts.dataDir ?? mkdtempSync(join(tmpdir(), "burrow-test-"));
  const database = await postgresArgs(opts, dataDir);
  const proc = Bun.spawn(
    [
      ...(opts.prefix ?? []),
      ...burrowCommand(opts.executable),
      "server",
      "--host",
      "127.0.0.1",
      "--admin-port",
      "0",
      "--http-port",
      "0",
      "--agent-port",
      "0",
      "--data-dir",
      dataDir,
      ...database,
      ...(opts.args ?? []),
    ],
    {
      env: { ...process.env, BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD, ...opts.env },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    },
  );
  const output = new LineReader(proc);
  let stopped: Promise<number | null> | undefined;
  const stop = (signal: NodeJS.Signals = "SIGTERM") => {
    stopped ??= (async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      const timer = setTimeout(() => proc.kill("SIGKILL"), 10_000);
      const code = await proc.exited;
      clearTimeout(timer);
      if (!opts.keepDataDir && !opts.dataDir) rmSync(dataDir, { recursive: true, force: true });
      return code;
    })();
    return stopped;
  };
  try {
    // the ready line as text (url=... edge_port=...) or, with --log-format json, as one object
    const line = await output.waitFor(/admin api listening/, opts.startTimeoutMs ?? START_TIMEOUT_MS);
    const fields: Record<string, unknown> = line.startsWith("{") ? JSON.parse(line) : Object.fromEntries([...line.matchAll(/(\w+)=(\S+)/g)].map((m) => [m[1], m[2]]));
    const adminUrl = String(fields.url);
    const edgePort = Number(fields.edge_port);
    const edgeUrl = `http://127.0.0.1:${edgePort}`;
    const agentPortText = /^\d+$/.test(String(fields.agent_port)) ? String(fields.agent_port) : undefined;
    const agentPort = agentPortText === undefined ? undefined : Number(agentPortText);
    const tlsPort = /^\d+$/.test(String(fields.tls_port)) ? Number(fields.tls_port) : undefined;
    const sshPort = /^\d+$/.test(String(fields.ssh_port)) ? Number(fields.ssh_port) : undefined;
    return { adminUrl, edgePort, edgeUrl, agentPort, tlsPort, sshPort, dataDir, proc, output, stop, [Symbol.asyncDispose]: async () => void (await stop()) };
  } catch (err) {
    await stop("SIGKILL");
    throw new Error(`server did not start: ${(err as Error).message}\n${output.text()}`);
  }
}
