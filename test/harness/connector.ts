/** `burrow connect` as a child process of a test: its local port once connected, and its output. */
import { LineReader } from "./lines.ts";
import { burrowCommand } from "./server.ts";

export interface TestConnector {
  proc: ReturnType<typeof Bun.spawn>;
  output: LineReader;
  /** The local port it printed once connected (a tcp, http or udp one). */
  port(): Promise<number>;
  [Symbol.asyncDispose](): Promise<void>;
}

/** Connects to `target` (owner/name) with `token`, listening on any free port unless `args` say otherwise. */
export function startConnector(opts: { server: string; token: string; target: string; args?: string[]; executable?: string }): TestConnector {
  const proc = Bun.spawn([...burrowCommand(opts.executable), "connect", opts.target, "--server", opts.server, "--token", opts.token, ...(opts.args ?? ["--port", "0"])], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, XDG_CONFIG_HOME: "/nonexistent" },
  });
  const output = new LineReader(proc);
  return {
    proc,
    output,
    async port() {
      const line = await output.waitFor(/Connected to .*: (?:connect to |open http:\/\/|send to udp:\/\/)(?:127\.0\.0\.1|\[::1\]):(\d+)/, 15_000);
      return Number(/:(\d+)$/.exec(line)![1]);
    },
    async [Symbol.asyncDispose]() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      await proc.exited;
    },
  };
}
