/**
 * What Bun's build options do to the executable: its size, and how soon it
 * starts. Builds this machine's target three ways (plain, minified, minified
 * with bytecode) and times, for each, `burrow --version`, `burrow http
 * --help` and a server from exec to its "admin api listening" line on a
 * fresh data dir (which includes creating the database and hashing the
 * first admin's password). Medians of BENCH_STARTUP_RUNS (15) runs, taken
 * in turn so that a busy moment hits every variant alike.
 *
 *   npm run bench:startup      (run by hand, never in CI)
 *
 * Writes bench/results/startup.md.
 */
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { compile } from "../build/compile.ts";
import { hostTarget } from "../build/targets.ts";

const ROOT = join(import.meta.dir, "..");
const RUNS = Math.max(3, Number(process.env.BENCH_STARTUP_RUNS ?? 15));
const VARIANTS = [
  { name: "plain", minify: false, bytecode: false },
  { name: "minify", minify: true, bytecode: false },
  { name: "minify + bytecode", minify: true, bytecode: true },
] as const;

const say = (s: string) => console.error(`[startup] ${s}`);
const work = mkdtempSync(join(tmpdir(), "burrow-startup-"));

async function timeCommand(argv: string[]): Promise<number> {
  const started = performance.now();
  const proc = Bun.spawn(argv, { stdout: "ignore", stderr: "ignore", stdin: "ignore" });
  await proc.exited;
  return performance.now() - started;
}

async function timeServer(binary: string): Promise<number> {
  const dataDir = mkdtempSync(join(work, "data-"));
  const started = performance.now();
  const proc = Bun.spawn([binary, "server", "--http-port", "0", "--admin-port", "0", "--agent-port", "off", "--data-dir", dataDir], {
    env: { ...process.env, BURROW_ADMIN_PASSWORD: "startup-bench-password" },
    stdout: "pipe", // info lines, "admin api listening" among them
    stderr: "ignore",
  });
  const deadline = setTimeout(() => proc.kill("SIGKILL"), 30_000);
  let text = "";
  const decoder = new TextDecoder();
  for await (const chunk of proc.stdout) {
    text += decoder.decode(chunk);
    if (text.includes("admin api listening")) break;
  }
  const elapsed = performance.now() - started;
  clearTimeout(deadline);
  proc.kill("SIGKILL");
  await proc.exited;
  rmSync(dataDir, { recursive: true, force: true });
  if (!text.includes("admin api listening")) throw new Error(`server did not start:\n${text}`);
  return elapsed;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

try {
  const target = hostTarget();
  const built = [];
  for (const v of VARIANTS) {
    const outfile = join(work, v.name.replaceAll(/\W+/g, "-"), "burrow");
    mkdirSync(join(outfile, ".."), { recursive: true });
    say(`building ${v.name}`);
    await compile({ target, outfile, minify: v.minify, bytecode: v.bytecode });
    built.push({ ...v, outfile, size: statSync(outfile).size, version: [] as number[], help: [] as number[], server: [] as number[] });
  }
  for (let i = 0; i < RUNS; i++) {
    say(`round ${i + 1}/${RUNS}`);
    for (const b of built) {
      b.version.push(await timeCommand([b.outfile, "--version"]));
      b.help.push(await timeCommand([b.outfile, "http", "--help"]));
      b.server.push(await timeServer(b.outfile));
    }
  }
  const ms = (x: number) => `${x.toFixed(0)} ms`;
  const lines = [
    `# Startup by build option (${target.name}, ${RUNS} runs each, medians)`,
    "",
    `Run: ${new Date().toISOString().slice(0, 10)}, bun ${Bun.version}. \`npm run bench:startup\`.`,
    "",
    "| build | size | `--version` | `http --help` | server ready |",
    "|---|---:|---:|---:|---:|",
    ...built.map((b) => `| ${b.name} | ${(b.size / 1024 / 1024).toFixed(1)} MiB | ${ms(median(b.version))} | ${ms(median(b.help))} | ${ms(median(b.server))} |`),
    "",
  ];
  mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
  writeFileSync(join(ROOT, "bench", "results", "startup.md"), lines.join("\n"));
  console.log(lines.join("\n"));
} finally {
  rmSync(work, { recursive: true, force: true });
}
