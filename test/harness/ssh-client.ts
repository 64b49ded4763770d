/**
 * OpenSSH's own client against the server's SSH gateway: keys made with
 * the real ssh-keygen (ed25519, ecdsa, rsa) in a temporary directory, and
 * `ssh` run as a process with options that ask nothing (no known-hosts
 * file, batch mode), its output read line by line. Where Debian's
 * openssh-client is missing it is installed as .ci/run does.
 */
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";

/** Why ssh cannot run here, or undefined when it can (installed first where missing and possible). */
export function sshSkipReason(): string | undefined {
  if (!Bun.which("ssh") || !Bun.which("ssh-keygen")) aptInstall(["openssh-client"], "ssh gateway tests");
  if (!Bun.which("ssh") || !Bun.which("ssh-keygen")) return "no ssh or ssh-keygen (Debian's openssh-client)";
  return undefined;
}

export interface TestKey {
  /** The private key file. */
  file: string;
  /** The .pub file's line. */
  pub: string;
  /** As `ssh-keygen -l` prints it. */
  fingerprint: string;
}

/** A directory of keys made by ssh-keygen; removed by dispose. */
export class KeyDir implements Disposable {
  readonly dir = mkdtempSync(join(tmpdir(), "burrow-ssh-keys-"));
  private n = 0;

  /** A new key: `type` as ssh-keygen -t takes it, `bits` for rsa and ecdsa. */
  make(type: "ed25519" | "ecdsa" | "rsa" | "dsa" = "ed25519", bits?: number, comment = "test@burrow"): TestKey {
    const file = join(this.dir, `key${++this.n}_${type}`);
    const made = Bun.spawnSync(["ssh-keygen", "-q", "-t", type, ...(bits ? ["-b", String(bits)] : []), "-N", "", "-C", comment, "-f", file], { stdout: "ignore", stderr: "pipe" });
    if (made.exitCode !== 0) throw new Error(`ssh-keygen -t ${type} failed: ${made.stderr.toString()}`);
    const pub = readFileSync(`${file}.pub`, "utf8").trim();
    const listed = Bun.spawnSync(["ssh-keygen", "-l", "-f", `${file}.pub`], { stdout: "pipe" }).stdout.toString();
    return { file, pub, fingerprint: listed.split(" ")[1]! };
  }

  [Symbol.dispose](): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** ssh's options for a test: this key only, no known-hosts file, no questions, a bounded connect. */
export function sshOptions(port: number, key: string, extra: string[] = []): string[] {
  return [
    "-p",
    String(port),
    "-i",
    key,
    "-o",
    "IdentitiesOnly=yes",
    "-o",
    "IdentityAgent=none",
    "-o",
    "StrictHostKeyChecking=no",
    "-o",
    "UserKnownHostsFile=/dev/null",
    "-o",
    "BatchMode=yes",
    "-o",
    "ConnectTimeout=10",
    "-o",
    "LogLevel=INFO",
    ...extra,
  ];
}

export interface SshProcess extends AsyncDisposable {
  proc: Subprocess<"pipe", "pipe", "pipe">;
  /** stdout and stderr, line by line. */
  output: LineReader;
  stop(): Promise<number | null>;
}

/** Runs `ssh <args>`; stop() (or dispose) ends it by its pid. */
export function runSsh(args: string[], env: Record<string, string> = {}): SshProcess {
  const proc = Bun.spawn(["ssh", ...args], { stdin: "pipe", stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const output = new LineReader(proc);
  let stopped: Promise<number | null> | undefined;
  const stop = () =>
    (stopped ??= (async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
      const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
      const code = await proc.exited;
      clearTimeout(timer);
      return code;
    })());
  return { proc, output, stop, [Symbol.asyncDispose]: async () => void (await stop()) };
}
