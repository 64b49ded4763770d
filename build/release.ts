/**
 * `npm run release`: every platform's executable, its archive, and
 * SHA256SUMS, in dist/release/:
 *
 *   burrow-<version>-<os>-<arch>[-musl][.exe]   the executable
 *   burrow-<version>-<os>-<arch>[-musl].tar.gz  (.zip for Windows) holding it as burrow[.exe]
 *   install.sh                                  the installer, which reads SHA256SUMS
 *   SHA256SUMS                                  sha256sum's format, for sha256sum -c
 *
 *   bun build/release.ts [--only linux-x64,linux-arm64] [--no-bytecode] [--outdir DIR]
 */
import { copyFileSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { tarGz, zip } from "./archives.ts";
import { buildInfo, compile } from "./compile.ts";
import { ROOT } from "./paths.ts";
import { RELEASE_TARGETS, releaseFileName } from "./targets.ts";

const { values } = parseArgs({ options: { only: { type: "string" }, "no-bytecode": { type: "boolean" }, outdir: { type: "string" } } });
const only = values.only?.split(",").map((s) => s.trim());
const unknown = only?.filter((name) => !RELEASE_TARGETS.some((t) => t.name === name)) ?? [];
if (unknown.length > 0) {
  console.error(`unknown target ${unknown.join(", ")}; one of ${RELEASE_TARGETS.map((t) => t.name).join(", ")}`);
  process.exit(64);
}
const targets = RELEASE_TARGETS.filter((t) => only === undefined || only.includes(t.name));

const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
const outdir = values.outdir ?? join(ROOT, "dist", "release");
rmSync(outdir, { recursive: true, force: true });
mkdirSync(outdir, { recursive: true });

const info = buildInfo();
const mtime = new Date(info.builtAt);
const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
const sums: [string, string][] = [];
const sizes: { target: string; file: number; archive: number }[] = [];

/** Targets built at once: compiling and compressing each take a core, and the two overlap. */
const JOBS = 2;

async function buildTarget(target: (typeof targets)[number]): Promise<void> {
  const file = releaseFileName(version, target);
  const started = performance.now();
  await compile({ target, outfile: join(outdir, file), info, bytecode: !values["no-bytecode"] });
  const bytes = new Uint8Array(readFileSync(join(outdir, file)));
  const inner = target.exe ? "burrow.exe" : "burrow";
  const archiveName = `burrow-${version}-${target.name}${target.exe ? ".zip" : ".tar.gz"}`;
  const archive = target.exe ? zip(inner, bytes, mtime) : await tarGz(inner, bytes, mtime);
  writeFileSync(join(outdir, archiveName), archive);
  sums.push([file, sha256(bytes)], [archiveName, sha256(archive)]);
  sizes.push({ target: target.name, file: bytes.length, archive: archive.length });
  console.log(`${file}  ${mib(bytes.length)}  ${archiveName}  ${mib(archive.length)}  (${Math.round(performance.now() - started)} ms)`);
}

const queue = [...targets];
await Promise.all(
  Array.from({ length: JOBS }, async () => {
    for (let next = queue.shift(); next; next = queue.shift()) await buildTarget(next);
  }),
);
sizes.sort((a, b) => targets.findIndex((t) => t.name === a.target) - targets.findIndex((t) => t.name === b.target));

copyFileSync(join(ROOT, "install.sh"), join(outdir, "install.sh"));
sums.push(["install.sh", sha256(readFileSync(join(outdir, "install.sh")))]);
sums.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
writeFileSync(join(outdir, "SHA256SUMS"), sums.map(([name, hash]) => `${hash}  ${name}\n`).join(""));

console.log(`\n| target | executable | compressed |\n|---|---:|---:|`);
for (const s of sizes) console.log(`| ${s.target} | ${mib(s.file)} | ${mib(s.archive)} |`);
console.log(`\n${sums.length} files and SHA256SUMS in ${outdir} (${info.commit})`);

function mib(n: number): string {
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
