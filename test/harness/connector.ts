/** `burrow connect` as a child process of a test: its local port once connected, and its output. */
import { connect as tcpConnect } from "node:net";
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

/** Sends `text` to 127.0.0.1:`port` and reads until as many bytes came back (an echo service behind), or 5 s. */
export function echoThrough(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tcpConnect(port, "127.0.0.1", () => s.write(text));
    let got = "";
    s.on("data", (d) => {
      got += d.toString();
      if (got.length >= text.length) {
        s.destroy();
        resolve(got);
      }
    });
    s.on("error", reject);
    s.on("close", () => resolve(got));
    setTimeout(() => (s.destroy(), resolve(got)), 5_000);
  });
}

/**
 * A connection to 127.0.0.1:`port` held open by an HTTP request whose body
 * has not all come; `closed` resolves with when it closed (performance.now()).
 */
export async function heldRequest(port: number): Promise<{ closed: Promise<number> }> {
  const { promise: closed, resolve } = Promise.withResolvers<number>();
  const held = tcpConnect(port, "127.0.0.1", () => held.write("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npart"));
  held.on("close", () => resolve(performance.now()));
  held.on("error", () => {});
  await Bun.sleep(300);
  return { closed };
}
