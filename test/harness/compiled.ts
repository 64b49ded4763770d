/**
 * The compiled executable, built once per test file: every test of a file
 * that runs "the compiled burrow" shares one build (this module's promise),
 * which saves a compile of several seconds per test. Each caller gets its own
 * copy, alone in an empty directory of its own, so nothing of the source tree
 * is beside it. All of it lies in the run's temporary directory, removed when
 * the file ends (test/harness/scratch.ts).
 */
import { copyFileSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const root = join(import.meta.dir, "..", "..");
let built: Promise<string> | undefined;

function build(): Promise<string> {
  built ??= (async () => {
    const dir = mkdtempSync(join(tmpdir(), "burrow-compiled-"));
    const out = join(dir, "burrow");
    // the build `npm run build` makes (build/compile.ts: its plugins, bytecode and all), so the
    // tests run what users run
    const proc = Bun.spawn([process.execPath, join(root, "build", "compile.ts"), "--outfile", out], { cwd: dir, stdout: "pipe", stderr: "pipe" });
    const [stderr, code] = await Promise.all([new Response(proc.stderr).text(), proc.exited]);
    if (code !== 0) throw new Error(`build failed: ${stderr}`);
    return out;
  })();
  return built;
}

/** A fresh copy of the compiled burrow in `dir` (made if missing), or in a new temp dir; returns its path. */
export async function compiledBurrow(dir?: string): Promise<string> {
  const source = await build();
  const home = dir ?? mkdtempSync(join(tmpdir(), "burrow-compiled-run-"));
  mkdirSync(home, { recursive: true });
  const binary = join(home, "burrow");
  copyFileSync(source, binary);
  Bun.spawnSync(["chmod", "+x", binary]);
  return binary;
}
