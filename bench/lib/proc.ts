/**
 * Child processes of the benchmark: each one's stdout and stderr go to its
 * own log file under the run's temp dir (never an undrained pipe), it is
 * remembered by PID, and stopAll() ends every one of them (SIGTERM, then
 * SIGKILL) in reverse order of start, even when the run fails.
 */
import type { Subprocess } from "bun";
import { closeSync, existsSync, openSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";

export interface Child {
  name: string;
  pid: number;
  proc: Subprocess<"pipe" | "ignore", number, number>;
  logPath: string;
  /** Resolves with the exit code (or 128+signal). */
  exited: Promise<number>;
  done: boolean;
  doneAt?: number;
}

export interface SpawnOptions {
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** Raise the open-files limit as far as allowed (many agent connections). */
  manyFiles?: boolean;
  stdin?: "pipe" | "ignore";
}

/** As many open files as the hard limit allows (65536 wanted). */
const RAISE_NOFILE = 'ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null; exec "$@"';

export class Processes {
  readonly children: Child[] = [];

  constructor(private readonly logDir: string) {}

  spawn(name: string, cmd: string[], opts: SpawnOptions = {}): Child {
    const logPath = join(this.logDir, `${name}.log`);
    const fd = openSync(logPath, "a");
    const argv = opts.manyFiles ? ["bash", "-c", RAISE_NOFILE, "bash", ...cmd] : cmd;
    let proc: Child["proc"];
    try {
      proc = Bun.spawn(argv, {
        cwd: opts.cwd,
        env: { ...process.env, ...opts.env } as Record<string, string>,
        stdin: opts.stdin ?? "ignore",
        stdout: fd,
        stderr: fd,
      }) as Child["proc"];
    } finally {
      closeSync(fd);
    }
    const child: Child = { name, pid: proc.pid, proc, logPath, exited: proc.exited, done: false };
    child.exited.then(() => {
      child.done = true;
      child.doneAt = Date.now();
    });
    this.children.push(child);
    return child;
  }

  /** Runs a command to completion (output captured), with a time limit. */
  async run(cmd: string[], opts: { timeoutMs?: number; env?: Record<string, string | undefined>; cwd?: string } = {}): Promise<{ code: number; stdout: string; stderr: string }> {
    const proc = Bun.spawn(cmd, { cwd: opts.cwd, env: { ...process.env, ...opts.env } as Record<string, string>, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    const entry: Child = { name: cmd[0]!, pid: proc.pid, proc: proc as unknown as Child["proc"], logPath: "", exited: proc.exited, done: false };
    this.children.push(entry);
    const timer = opts.timeoutMs ? setTimeout(() => proc.kill("SIGKILL"), opts.timeoutMs) : undefined;
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    clearTimeout(timer);
    entry.done = true;
    this.children.splice(this.children.indexOf(entry), 1);
    return { code, stdout, stderr };
  }

  log(child: Child): string {
    return existsSync(child.logPath) ? readFileSync(child.logPath, "utf8") : "";
  }

  tail(child: Child, lines = 15): string {
    return this.log(child).trimEnd().split("\n").slice(-lines).join("\n");
  }

  /** Waits for a line of the child's output matching `re`; fails if it exits or time runs out. */
  async waitFor(child: Child, re: RegExp, timeoutMs: number, from = 0): Promise<RegExpMatchArray> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = this.log(child).slice(from);
      const m = text.match(re);
      if (m) return m;
      if (child.done) throw new Error(`${child.name} exited before printing ${re}:\n${this.tail(child)}`);
      if (Date.now() > deadline) throw new Error(`${child.name}: no ${re} within ${timeoutMs / 1000} s:\n${this.tail(child)}`);
      await Bun.sleep(50);
    }
  }

  /** SIGTERM (or `signal`), then SIGKILL after graceMs. */
  async stop(child: Child, signal: NodeJS.Signals = "SIGTERM", graceMs = 5000): Promise<void> {
    if (!child.done) {
      try {
        process.kill(child.pid, signal);
      } catch {}
      const timer = setTimeout(() => {
        try {
          process.kill(child.pid, "SIGKILL");
        } catch {}
      }, graceMs);
      await child.exited;
      clearTimeout(timer);
    }
    const i = this.children.indexOf(child);
    if (i >= 0) this.children.splice(i, 1);
  }

  async stopAll(): Promise<void> {
    for (const child of [...this.children].reverse()) await this.stop(child);
  }
}

/** Resident set size of a process in KiB (VmRSS), or NaN when it is gone. */
export function rssKiB(pid: number): number {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) : NaN;
  } catch {
    return NaN;
  }
}

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux everywhere that matters). */
const TICK_MS = 10;

/** The fields of /proc/<pid>/stat after the name, or undefined when the process is gone. */
function statFields(pid: number): string[] | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  } catch {
    return undefined;
  }
}

/** A process's CPU time so far (user + system, all threads), ms. */
export function cpuMs(pid: number): number {
  const f = statFields(pid);
  // fields after the name start at the state (field 3): utime is field 14, stime 15
  return f ? (Number(f[11]) + Number(f[12])) * TICK_MS : NaN;
}

/**
 * CPU time (ms) of a process and all its descendants, counting the children
 * they have already reaped (cutime, cstime): nginx's workers, sshd's
 * per-connection processes.
 */
export function treeCpuMs(root: number): number {
  const parent = new Map<number, number>();
  const own = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const f = statFields(pid);
    if (!f) continue;
    parent.set(pid, Number(f[1]));
    own.set(pid, (Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14])) * TICK_MS);
  }
  if (!own.has(root)) return NaN;
  let total = 0;
  for (const [pid, ms] of own) {
    for (let p: number | undefined = pid; p !== undefined && p > 1; p = parent.get(p)) {
      if (p === root) {
        total += ms;
        break;
      }
    }
  }
  return total;
}

/** The soft open-files limit of a running process. */
export function openFilesLimit(pid: number): number {
  try {
    const m = /Max open files\s+(\d+|unlimited)/.exec(readFileSync(`/proc/${pid}/limits`, "utf8"));
    return m ? (m[1] === "unlimited" ? Infinity : Number(m[1])) : NaN;
  } catch {
    return NaN;
  }
}

/** A free TCP port on 127.0.0.1 (bind port 0, read it, close). */
export function freePort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
}

/** `count` consecutive free ports on 127.0.0.1, starting at a random place in [low, high). */
export function freePortRange(count: number, low = 41000, high = 60000): { first: number; last: number } {
  for (let attempt = 0; attempt < 50; attempt++) {
    const first = low + Math.floor(Math.random() * (high - low - count));
    const held: { stop(closeActiveConnections?: boolean): void }[] = [];
    let ok = true;
    for (let p = first; p < first + count; p++) {
      try {
        held.push(Bun.listen({ hostname: "127.0.0.1", port: p, exclusive: true, socket: { data() {} } }));
      } catch {
        ok = false;
        break;
      }
    }
    for (const l of held) l.stop(true);
    if (ok) return { first, last: first + count - 1 };
  }
  throw new Error("no free port range");
}

/**
 * Whether something listens on 127.0.0.1:port (read from /proc/net/tcp, no
 * connection made); with `anyAddress`, a listener on 0.0.0.0 counts too.
 */
export function isListening(port: number, anyAddress = false): boolean {
  const hex = port.toString(16).toUpperCase().padStart(4, "0");
  try {
    return readFileSync("/proc/net/tcp", "utf8")
      .split("\n")
      .some((line) => {
        const f = line.trim().split(/\s+/);
        return (f[1] === `0100007F:${hex}` || (anyAddress && f[1] === `00000000:${hex}`)) && f[3] === "0A";
      });
  } catch {
    return false;
  }
}

/** Bytes waiting unread in the receive queue of the 127.0.0.1 socket with this local port. */
export function receiveQueue(localPort: number): number | undefined {
  const hex = localPort.toString(16).toUpperCase().padStart(4, "0");
  for (const line of readFileSync("/proc/net/tcp", "utf8").split("\n")) {
    const f = line.trim().split(/\s+/);
    if (f[1] === `0100007F:${hex}` && f[3] === "01") return parseInt(f[4]!.split(":")[1]!, 16);
  }
  return undefined;
}

export async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await Bun.sleep(50);
  }
}
