/**
 * `npm run build`: the single executable, with what it was built from
 * written into it (burrow version prints it) and the argon2 binding of the
 * platform it is for; ssh2 without its optional native parts
 * (ssh2-pure-js.ts). The build date is the commit's, not the clock's, so the
 * same checkout gives the same bytes.
 *
 * The release's public key (build/signing-key.ts: BURROW_SIGNING_PUBLIC_KEY_FILE,
 * or the signing key's public half) is built in too, for burrow update to
 * check releases with; without one the executable cannot update itself.
 *
 *   bun build/compile.ts [--target linux-arm64] [--outfile dist/burrow] [--no-bytecode]
 */
import { parseArgs } from "node:util";
import { mkdirSync, mkdtempSync, renameSync, rmSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { BunPlugin } from "bun";
import { bindingFile } from "./bindings.ts";
import { bundlePages, pagesPlugin } from "./page-bundles.ts";
import { ROOT } from "./paths.ts";
import { releaseKeyLine } from "./signing-key.ts";
import { ssh2PureJsPlugin } from "./ssh2-pure-js.ts";
import { hostTarget, RELEASE_TARGETS, type ReleaseTarget } from "./targets.ts";

function git(...args: string[]): string | undefined {
  const out = Bun.spawnSync(["git", ...args], { cwd: ROOT, stdout: "pipe", stderr: "ignore" });
  const text = out.stdout.toString().trim();
  return out.exitCode === 0 && text !== "" ? text : undefined;
}

export interface BuildInfo {
  commit: string;
  builtAt: string;
}

export function buildInfo(): BuildInfo {
  const dirty = git("status", "--porcelain", "--untracked-files=no", "--", "src", "build", "package.json", "package-lock.json") !== undefined;
  return {
    commit: (git("rev-parse", "--short=12", "HEAD") ?? "unknown") + (dirty ? "+changes" : ""),
    builtAt: git("log", "-1", "--format=%cI", "HEAD") ?? new Date().toISOString(),
  };
}

/**
 * argon2's own index.js picks its binding at run time from process.platform
 * and arch, among packages npm installed for the build machine. This swaps it
 * for one static require of the target's .node file, which `bun build
 * --compile` embeds (and extracts to a temp file when the server first loads
 * it): the executable carries exactly its own platform's binding.
 */
const ARGON2_EXPORTS = ["Algorithm", "Version", "hash", "hashSync", "hashRaw", "hashRawSync", "verify", "verifySync"];

function argon2BindingPlugin(nodeFile: string): BunPlugin {
  return {
    name: "argon2-binding",
    setup(build) {
      build.onResolve({ filter: /^@node-rs\/argon2$/ }, () => ({ path: "argon2", namespace: "argon2-binding" }));
      build.onLoad({ filter: /.*/, namespace: "argon2-binding" }, () => ({
        // named exports, as argon2's index.js has them, so `import { hash }` binds
        contents: [
          `const binding = require(${JSON.stringify(nodeFile)});`,
          ...ARGON2_EXPORTS.map((name) => `export const ${name} = binding.${name};`),
        ].join("\n"),
        loader: "js",
      }));
    },
  };
}

export interface CompileOptions {
  target: ReleaseTarget;
  outfile: string;
  info?: BuildInfo;
  /**
   * precompile to JavaScriptCore bytecode (on unless turned off): 3 MiB more,
   * and commands start in less than half the time (bench/results/startup.md)
   */
  bytecode?: boolean;
  /** on unless turned off (bench/startup.ts measures both) */
  minify?: boolean;
  /** The base64 line of the release's minisign public key; "" for none; default: from the environment (build/signing-key.ts). */
  releaseKey?: string;
}

export async function compile(options: CompileOptions): Promise<void> {
  const info = options.info ?? buildInfo();
  // Bun writes source-map files beside the executable (the map it needs is
  // inside); a scratch folder beside the output keeps them out of dist/
  const scratch = mkdtempSync(join(dirname(options.outfile), ".build-"));
  try {
    const key = options.releaseKey ?? releaseKeyLine(process.env);
    await compileInto(join(scratch, basename(options.outfile)), options.target, info, options.bytecode ?? true, options.minify ?? true, key);
    renameSync(join(scratch, basename(options.outfile)), options.outfile);
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}

async function compileInto(outfile: string, target: ReleaseTarget, info: BuildInfo, bytecode: boolean, minify: boolean, releaseKey: string): Promise<void> {
  const pages = await bundlePages(minify);
  const result = await Bun.build({
    entrypoints: [join(ROOT, "src", "main.ts")],
    compile: { target: target.bunTarget, outfile },
    minify,
    sourcemap: "inline",
    bytecode,
    define: {
      BURROW_COMMIT: JSON.stringify(info.commit),
      BURROW_BUILT_AT: JSON.stringify(info.builtAt),
      BURROW_TARGET: JSON.stringify(target.name),
      BURROW_RELEASE_KEY: JSON.stringify(releaseKey),
    },
    plugins: [argon2BindingPlugin(await bindingFile(target.bindingPackage)), pagesPlugin(pages), ssh2PureJsPlugin],
  });
  if (!result.success) {
    for (const message of result.logs) console.error(message);
    throw new Error(`build for ${target.name} failed`);
  }
}

if (import.meta.main) {
  const { values } = parseArgs({
    options: { target: { type: "string" }, outfile: { type: "string" }, "no-bytecode": { type: "boolean" } },
  });
  const target = values.target === undefined ? hostTarget() : RELEASE_TARGETS.find((t) => t.name === values.target);
  if (!target) {
    console.error(`unknown --target ${values.target}; one of ${RELEASE_TARGETS.map((t) => t.name).join(", ")}`);
    process.exit(64);
  }
  const outfile = values.outfile ?? join(ROOT, "dist", target.exe ? "burrow.exe" : "burrow");
  mkdirSync(dirname(outfile), { recursive: true });
  let releaseKey: string;
  try {
    releaseKey = releaseKeyLine(process.env);
  } catch (err) {
    console.error(`the release key cannot be used: ${(err as Error).message}`);
    process.exit(65);
  }
  await compile({ target, outfile, bytecode: !values["no-bytecode"], releaseKey });
  console.log(`built ${outfile} (${target.name}; ${releaseKey ? "release key built in" : "no release key: it cannot update itself"})`);
}
