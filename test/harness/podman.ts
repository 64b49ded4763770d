/**
 * Debian's podman, with runc, for the container image's tests: installed
 * with apt-get where missing (as .ci/run does), and run with storage and a
 * configuration of the test's own, in a temporary directory, so that nothing
 * the tests load, run or create outlives them or meets the machine's own
 * images and containers.
 *
 * The configuration is what podman needs on these machines: runc (crun
 * fails on a kernel with hybrid cgroups) and `default_ulimits = []` (both
 * runtimes fail on podman's default ulimits here), given in CONTAINERS_CONF.
 */
import type { Subprocess } from "bun";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "./debian-packages.ts";
import { LineReader } from "./lines.ts";

const PACKAGES = ["podman", "runc", "podman-compose"];
const present = () => existsSync("/usr/bin/podman") && existsSync("/usr/sbin/runc") && existsSync("/usr/bin/podman-compose");
let found: boolean | undefined;

/** Why the container tests cannot run here, or undefined when they can (podman installed first if need be). */
export function podmanSkipReason(): string | undefined {
  if (process.platform !== "linux") return "podman runs containers on Linux only";
  if (process.getuid?.() !== 0) return "the container tests run podman as root (its own storage, published ports)";
  found ??= present() || (aptInstall(PACKAGES, "the container image's tests") && present());
  return found ? undefined : "podman, runc and podman-compose are not installed and could not be (Debian's podman, runc and podman-compose packages; .ci/run installs them)";
}

/** The configuration; the networks the tests create are kept in their own directory too, not in /etc/containers. */
export function containersConf(networks: string): string {
  return `[containers]
default_ulimits = []

[engine]
runtime = "runc"

[network]
network_config_dir = "${networks}"
`;
}

export interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

export interface Podman extends AsyncDisposable {
  /** The words that start podman on this test's storage: for podman-compose's --podman-args too. */
  readonly globalArgs: string[];
  /** The environment podman needs (CONTAINERS_CONF), and that points a podman without the flags at the same storage. */
  readonly env: Record<string, string>;
  readonly dir: string;
  /** Runs podman to its end, at most `timeoutMs` (then killed); never throws on a failure. */
  run(args: string[], timeoutMs?: number): Promise<Result>;
  /** As run, and throws with podman's words when it fails. */
  ok(args: string[], timeoutMs?: number): Promise<string>;
  /** A container's log as it comes (podman logs --follow, which ends with the container). */
  follow(container: string): { output: LineReader; proc: Subprocess<"ignore", "pipe", "pipe"> };
  close(): Promise<void>;
}

/** Runs a command to its end, bounded in time. */
export async function runCommand(cmd: string[], env: Record<string, string | undefined>, timeoutMs: number): Promise<Result> {
  const proc = Bun.spawn(cmd, { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}

export function startPodman(): Podman {
  const dir = mkdtempSync(join(tmpdir(), "burrow-podman-"));
  writeFileSync(join(dir, "containers.conf"), containersConf(join(dir, "networks")));
  // the same storage for a podman started without the flags (npm run image's)
  writeFileSync(join(dir, "storage.conf"), `[storage]\ndriver = "overlay"\ngraphroot = "${join(dir, "storage")}"\nrunroot = "${join(dir, "run")}"\n`);
  const env = { ...process.env, CONTAINERS_CONF: join(dir, "containers.conf"), CONTAINERS_STORAGE_CONF: join(dir, "storage.conf") } as Record<string, string>;
  const globalArgs = ["--root", join(dir, "storage"), "--runroot", join(dir, "run"), "--storage-driver", "overlay"];
  const run = (args: string[], timeoutMs = 120_000) => runCommand(["podman", ...globalArgs, ...args], env, timeoutMs);
  const ok = async (args: string[], timeoutMs?: number) => {
    const r = await run(args, timeoutMs);
    if (r.code !== 0) throw new Error(`podman ${args.join(" ")} failed (${r.code}): ${r.stderr.trim()}`);
    return r.stdout;
  };
  const followers: Subprocess<"ignore", "pipe", "pipe">[] = [];
  const follow = (container: string) => {
    const proc = Bun.spawn(["podman", ...globalArgs, "logs", "--follow", container], { env, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    followers.push(proc);
    return { output: new LineReader(proc), proc };
  };
  let closed: Promise<void> | undefined;
  const close = () => {
    closed ??= (async () => {
      for (const f of followers) f.kill("SIGKILL");
      // containers first (their overlays and published ports), then what they used
      await run(["rm", "--all", "--force", "--time", "0"]);
      await run(["pod", "rm", "--all", "--force"]);
      await run(["image", "unmount", "--all", "--force"]);
      await run(["volume", "rm", "--all", "--force"]);
      await run(["rmi", "--all", "--force"]);
      await run(["network", "prune", "--force"]);
      // a layer podman could not unmount would otherwise be emptied through its mount
      const mounts = Bun.spawnSync(["findmnt", "-rn", "-o", "TARGET"], { stdout: "pipe" }).stdout.toString().split("\n");
      for (const m of mounts.filter((m) => m.startsWith(dir)).reverse()) Bun.spawnSync(["umount", "-l", m]);
      rmSync(dir, { recursive: true, force: true });
    })();
    return closed;
  };
  return { globalArgs, env, dir, run, ok, follow, close, [Symbol.asyncDispose]: close };
}
