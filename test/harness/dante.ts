/**
 * A SOCKS5 proxy from Debian's `dante-server` package (danted), run by a
 * test as a process of its own on a free loopback port, in the foreground,
 * its log on stderr: a real SOCKS proxy for the agent's `--proxy socks5://`.
 * Its log says where it connected each client.
 */
import type { Subprocess } from "bun";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";
import { freePort, untilListening } from "./ports.ts";
import { within } from "./wait.ts";

const DANTED = "/usr/sbin/danted";

export interface TestSocks extends AsyncDisposable {
  url: string;
  log: LineReader;
  /** "host:port" of each connection it made for a client, once at least `atLeast` have been logged. */
  connects(atLeast?: number): Promise<string[]>;
  stop(): Promise<void>;
}

/** danted, installed first with apt-get where it is missing (as .ci/run does). */
export function danteAvailable(): boolean {
  return existsSync(DANTED) || (aptInstall(["dante-server"], "the SOCKS proxy tests") && existsSync(DANTED));
}

/** "pass(1): tcp/connect [: <client> <proxy> -> <its own address> <target>", addresses as host.port */
const CONNECT_LINE = /tcp\/connect \[: \S+ \S+ -> \S+ (\S+)\.(\d+)$/;

export async function startDante(): Promise<TestSocks> {
  if (!danteAvailable()) throw new Error("danted is not installed: install Debian's dante-server package (.ci/run installs it)");
  const dir = mkdtempSync(join(tmpdir(), "burrow-dante-"));
  const port = freePort();
  const root = process.getuid?.() === 0;
  writeFileSync(
    join(dir, "danted.conf"),
    [
      "logoutput: stderr",
      `internal: 127.0.0.1 port = ${port}`,
      "external: 127.0.0.1",
      "socksmethod: none",
      "clientmethod: none",
      // as root it must be told whom to be; as anyone else it stays who it is
      ...(root ? ["user.privileged: root", "user.unprivileged: nobody"] : []),
      "client pass {",
      "  from: 127.0.0.0/8 to: 0.0.0.0/0",
      "}",
      "socks pass {",
      "  from: 127.0.0.0/8 to: 0.0.0.0/0",
      "  command: connect",
      "  log: connect",
      "}",
      "",
    ].join("\n"),
  );
  const proc: Subprocess<"ignore", "pipe", "pipe"> = Bun.spawn([DANTED, "-f", join(dir, "danted.conf"), "-p", join(dir, "danted.pid"), "-N", "1"], {
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const log = new LineReader(proc);
  const stop = async () => {
    proc.kill(); // its children end with it
    await proc.exited;
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await untilListening(port, () => (proc.exitCode !== null ? `danted exited: ${log.text().slice(-2000)}` : undefined), "danted listening");
  } catch (err) {
    await stop();
    throw err;
  }
  const connects = async (atLeast = 1) => {
    const list = () => log.lines.flatMap((l) => {
      const m = CONNECT_LINE.exec(l);
      return m ? [`${m[1]}:${m[2]}`] : [];
    });
    await within(
      (async () => {
        while (list().length < atLeast) await Bun.sleep(10);
      })(),
      10_000,
      `${atLeast} SOCKS connections logged`,
    );
    return list();
  };
  return { url: `socks5://127.0.0.1:${port}`, log, connects, stop, [Symbol.asyncDispose]: stop };
}
