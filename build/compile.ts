/**
 * `npm run build`: the single executable, with what it was built from
 * written into it (burrow version prints it). The build date is the
 * commit's, not the clock's, so the same checkout gives the same bytes.
 *
 *   bun build/compile.ts [--target bun-linux-arm64] [--outfile dist/burrow]
 */
import { parseArgs } from "node:util";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..");
const { values } = parseArgs({ options: { target: { type: "string" }, outfile: { type: "string" } } });
const target = values.target ?? `bun-${process.platform}-${process.arch}`;
const outfile = values.outfile ?? join(ROOT, "dist", "burrow");

function git(...args: string[]): string | undefined {
  const out = Bun.spawnSync(["git", ...args], { cwd: ROOT, stdout: "pipe", stderr: "ignore" });
  const text = out.stdout.toString().trim();
  return out.exitCode === 0 && text !== "" ? text : undefined;
}

const dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "package.json", "package-lock.json") !== undefined;
const commit = (git("rev-parse", "--short=12", "HEAD") ?? "unknown") + (dirty ? "+changes" : "");
const builtAt = git("log", "-1", "--format=%cI", "HEAD") ?? new Date().toISOString();

const args = [
  "build",
  "--compile",
  "--minify",
  "--sourcemap",
  `--target=${target}`,
  "--define",
  `BURROW_COMMIT=${JSON.stringify(commit)}`,
  "--define",
  `BURROW_BUILT_AT=${JSON.stringify(builtAt)}`,
  "--define",
  `BURROW_TARGET=${JSON.stringify(target)}`,
  join(ROOT, "src", "main.ts"),
  "--outfile",
  outfile,
];
const proc = Bun.spawnSync([process.execPath, ...args], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
process.exit(proc.exitCode ?? 1);
