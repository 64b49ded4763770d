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
import { signedIn, type AdminClient } from "./admin.ts";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";
import { startServer, type TestServer } from "./server.ts";

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

export interface SshRig extends AsyncDisposable {
  server: TestServer;
  api: AdminClient;
  userId: number;
  username: string;
  /** The user's key, registered. */
  key: TestKey;
  /** Its id in the admin API. */
  keyId: number;
  keys: KeyDir;
  /** `ssh -p <gateway> -i <key> ... <args> 127.0.0.1 [command]`, ended when the rig closes. */
  ssh(args: string[], opts?: { key?: TestKey; host?: string; command?: string[] }): SshProcess;
  close(): Promise<void>;
}

/**
 * The real server with its SSH gateway on (`--ssh-port 0`), a user and an
 * ed25519 key of theirs added through the admin API. Everything started is
 * stopped by dispose, ssh processes first.
 */
export async function startSshRig(opts: { args?: string[]; username?: string; user?: Record<string, unknown>; server?: TestServer } = {}): Promise<SshRig> {
  const keys = new KeyDir();
  const server = opts.server ?? (await startServer({ args: ["--ssh-port", "0", ...(opts.args ?? [])] }));
  const processes: SshProcess[] = [];
  const close = async () => {
    await Promise.all(processes.map((p) => p.stop()));
    if (!opts.server) await server.stop();
    keys[Symbol.dispose]();
  };
  try {
    const api = await signedIn(server);
    const username = opts.username ?? "alice";
    const userId = await api.createUser(username, opts.user);
    const key = keys.make("ed25519", undefined, `${username}@laptop`);
    const added = await api.post(`/api/users/${userId}/ssh-keys`, { key: key.pub });
    if (added.status !== 201) throw new Error(`key not added: ${added.status} ${JSON.stringify(added.body)}`);
    const port = server.sshPort;
    if (port === undefined) throw new Error("the server has no ssh port");
    return {
      server,
      api,
      userId,
      username,
      key,
      keyId: added.body.id,
      keys,
      ssh(args, o = {}) {
        const p = runSsh([...sshOptions(port, (o.key ?? key).file), ...args, o.host ?? "127.0.0.1", ...(o.command ?? [])]);
        processes.push(p);
        return p;
      },
      close,
      [Symbol.asyncDispose]: close,
    };
  } catch (err) {
    await close();
    throw err;
  }
}
