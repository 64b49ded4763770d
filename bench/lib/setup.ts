/** What the benchmark needs on the machine: Debian packages and the compiled dist/burrow. */
import { existsSync, readdirSync, statSync } from "node:fs";
import { join } from "node:path";

/** Executable -> Debian package that provides it. */
const NEEDED: [string, string][] = [
  ["/usr/sbin/nginx", "nginx"],
  ["/usr/bin/wrk", "wrk"],
  ["/usr/sbin/sshd", "openssh-server"],
  ["/usr/bin/ssh", "openssh-client"],
  ["/usr/bin/ssh-keygen", "openssh-client"],
  ["/usr/bin/iperf3", "iperf3"],
  ["/usr/bin/curl", "curl"],
  ["/usr/bin/h2load", "nghttp2-client"],
];

function which(cmd: string): string | undefined {
  return Bun.which(cmd) ?? (existsSync(cmd) ? cmd : undefined);
}

/** Installs the missing packages with apt-get (as root, or through sudo). */
export async function ensurePackages(say: (s: string) => void): Promise<void> {
  const missing = [...new Set(NEEDED.filter(([bin]) => !which(bin) && !which(bin.split("/").pop()!)).map(([, pkg]) => pkg))];
  if (missing.length === 0) return;
  if (!existsSync("/usr/bin/apt-get")) throw new Error(`missing ${missing.join(", ")} and no apt-get to install them`);
  const sudo = process.getuid?.() === 0 ? [] : ["sudo", "-n"];
  say(`installing ${missing.join(" ")} (apt-get)`);
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  for (const cmd of [
    [...sudo, "apt-get", "update"],
    [...sudo, "apt-get", "install", "-y", "--no-install-recommends", ...missing],
  ]) {
    const p = Bun.spawn(cmd, { env, stdout: "inherit", stderr: "inherit", stdin: "ignore" });
    if ((await p.exited) !== 0) throw new Error(`${cmd.join(" ")} failed`);
  }
}

export function tool(name: string): string {
  const found = NEEDED.find(([bin]) => bin.endsWith(`/${name}`))?.[0];
  const path = which(name) ?? found;
  if (!path || !existsSync(path)) throw new Error(`${name} not found`);
  return path;
}

/** dist/burrow (or $BENCH_BURROW), built with `npm run build` when missing. */
export async function ensureBinary(root: string, say: (s: string) => void): Promise<string> {
  const override = process.env.BENCH_BURROW;
  if (override) {
    if (!existsSync(override)) throw new Error(`BENCH_BURROW=${override} does not exist`);
    return override;
  }
  const bin = join(root, "dist", "burrow");
  if (existsSync(bin) && process.env.BENCH_REBUILD !== "1") return bin;
  say("building dist/burrow (npm run build)");
  const p = Bun.spawn(["npm", "run", "build"], { cwd: root, stdout: "inherit", stderr: "inherit", stdin: "ignore" });
  if ((await p.exited) !== 0 || !existsSync(bin)) throw new Error("npm run build failed");
  return bin;
}

/**
 * The raw TCP source and counting sink: the C versions (bench/tools/*.c)
 * compiled into `dir` when a C compiler is around (they cost the least CPU
 * per byte), else the Bun versions.
 */
export async function tcpTools(benchDir: string, dir: string): Promise<{ kind: "c" | "bun"; sink: string[]; source: string[] }> {
  const cc = Bun.which("cc") ?? Bun.which("gcc");
  if (cc && process.env.BENCH_BUN_SINK !== "1") {
    const out = { sink: join(dir, "sink"), source: join(dir, "source") };
    let ok = true;
    for (const name of ["sink", "source"] as const) {
      const p = Bun.spawn([cc, "-O2", "-o", out[name], join(benchDir, "tools", `${name}.c`)], { stdout: "ignore", stderr: "pipe" });
      if ((await p.exited) !== 0) ok = false;
    }
    if (ok) return { kind: "c", sink: [out.sink], source: [out.source] };
  }
  return {
    kind: "bun",
    sink: [process.execPath, join(benchDir, "tools", "sink.ts")],
    source: [process.execPath, join(benchDir, "tools", "source.ts")],
  };
}

/** Source files changed after the executable was built (it may not be what src/ says). */
export function newerSources(root: string, bin: string): string[] {
  if (!existsSync(bin)) return [];
  const built = statSync(bin).mtimeMs;
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of readdirSync(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (statSync(p).mtimeMs > built) out.push(p.slice(root.length + 1));
    }
  };
  walk(join(root, "src"));
  return out;
}
