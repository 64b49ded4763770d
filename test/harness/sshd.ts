/**
 * Debian's OpenSSH server (openssh-server), run by a test as a process of
 * its own: its own host key, configuration and authorized key in a
 * temporary directory, listening on a free loopback port, letting in the
 * user the tests run as with a key made for the test (no password, no
 * PAM). Where sshd is missing it is installed as .ci/run does.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";
import { freeRange } from "./ports.ts";
import { waitUntil } from "./wait.ts";

const SSHD = "/usr/sbin/sshd";

export interface TestSshd extends AsyncDisposable {
  port: number;
  /** The user it lets in (the one the tests run as). */
  user: string;
  /** The client's private key file. */
  key: string;
  dir: string;
  /** ssh's options for this server: the key, no known-hosts file, no questions. */
  clientOptions: string[];
  logs(): string;
  stop(): Promise<void>;
}

/** Why sshd cannot run here, or undefined when it can (installed first where missing and possible). */
export function sshdSkipReason(): string | undefined {
  if (!existsSync(SSHD) || !Bun.which("ssh") || !Bun.which("scp")) aptInstall(["openssh-server", "openssh-client"], "ssh tests");
  if (!existsSync(SSHD)) return "no /usr/sbin/sshd (Debian's openssh-server), and it could not be installed";
  if (!Bun.which("ssh") || !Bun.which("scp") || !Bun.which("ssh-keygen")) return "no ssh, scp or ssh-keygen (Debian's openssh-client)";
  return undefined;
}

export async function startSshd(): Promise<TestSshd> {
  const dir = mkdtempSync(join(tmpdir(), "burrow-sshd-"));
  const keygen = (file: string) => {
    const made = Bun.spawnSync(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", file], { stdout: "ignore", stderr: "pipe" });
    if (made.exitCode !== 0) throw new Error(`ssh-keygen failed: ${made.stderr.toString()}`);
  };
  keygen(join(dir, "host_key"));
  keygen(join(dir, "client_key"));
  writeFileSync(join(dir, "authorized_keys"), readFileSync(join(dir, "client_key.pub")));
  // as root, sshd wants its privilege separation directory (the package's service makes it at boot)
  if (process.getuid?.() === 0) mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const port = freeRange(1).first;
  writeFileSync(
    join(dir, "sshd_config"),
    [
      `Port ${port}`,
      "ListenAddress 127.0.0.1",
      `HostKey ${join(dir, "host_key")}`,
      `PidFile ${join(dir, "sshd.pid")}`,
      `AuthorizedKeysFile ${join(dir, "authorized_keys")}`,
      "PasswordAuthentication no",
      "KbdInteractiveAuthentication no",
      "PubkeyAuthentication yes",
      "PermitRootLogin prohibit-password",
      "UsePAM no",
      "StrictModes no",
      "Subsystem sftp internal-sftp",
      "LogLevel VERBOSE",
      "",
    ].join("\n"),
  );
  const proc = Bun.spawn([SSHD, "-D", "-e", "-f", join(dir, "sshd_config")], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const output = new LineReader(proc);
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGTERM");
    const timer = setTimeout(() => proc.kill("SIGKILL"), 5_000);
    await proc.exited;
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitUntil(
      async () => {
        if (proc.exitCode !== null) throw new Error(`sshd exited: ${output.text()}`);
        return output.text().includes(`Server listening on 127.0.0.1 port ${port}`);
      },
      10_000,
      "sshd listening",
      50,
    );
  } catch (err) {
    await stop();
    throw err;
  }
  const key = join(dir, "client_key");
  return {
    port,
    // the account's name as the system has it (id -un), where an environment may not say it
    user: Bun.spawnSync(["id", "-un"]).stdout.toString().trim(),
    key,
    dir,
    clientOptions: ["-i", key, "-o", "IdentitiesOnly=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10"],
    logs: () => output.text(),
    stop,
    [Symbol.asyncDispose]: stop,
  };
}
