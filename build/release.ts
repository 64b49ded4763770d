/**
 * `npm run release`: every platform's executable, its archive, and
 * SHA256SUMS, in dist/release/:
 *
 *   burrow-<version>-<os>-<arch>[-musl][.exe]   the executable
 *   burrow-<version>-<os>-<arch>[-musl].tar.gz  (.zip for Windows) holding it as burrow[.exe]
 *   install.sh                                  the installer, which reads SHA256SUMS
 *   SHA256SUMS                                  sha256sum's format, for sha256sum -c
 *   SHA256SUMS.minisig                          its signature, for minisign -V (when signed)
 *   burrow_<version>_<amd64|arm64>.deb          Debian packages of the glibc linux builds (build/deb.ts)
 *   burrow-<version>-1.<x86_64|aarch64>.rpm     RPM packages of the same (build/rpm.ts)
 *   burrow-<version>-oci-<amd64|arm64>.tar      the container image of the same, an OCI archive (build/image.ts)
 *   compose.yaml, compose.cluster.yaml,         the compose files of container/, naming that image
 *   compose.agent.yaml
 *
 * Signed with the minisign secret key (without a password, `minisign -G -W`)
 * in the file BURROW_SIGNING_KEY_FILE, or given whole in BURROW_SIGNING_KEY;
 * BURROW_SIGNING_PUBLIC_KEY_FILE, when given, must be its public key. Without
 * a key the release is made unsigned, and says so loudly.
 *
 * The images are made on Linux from this machine's C library, CA
 * certificates and time zones, and Debian's arm64 cross packages for the
 * other architecture (build/image-rootfs.ts); where something is missing the
 * release says so and goes on without that image, as without a .deb where
 * dpkg-deb is missing. --no-images leaves them out.
 *
 *   bun build/release.ts [--only linux-x64,linux-arm64] [--no-bytecode] [--no-packages] [--no-images] [--outdir DIR]
 */
import { mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { tarGz, zip } from "./archives.ts";
import { buildInfo, compile } from "./compile.ts";
import { ROOT } from "./paths.ts";
import { RELEASE_TARGETS, releaseFileName } from "./targets.ts";
import { parsePublicKey, publicKeyFile, signFile, type SecretKey } from "../src/signing/minisign.ts";
import { signingKey } from "./signing-key.ts";
import { withReleaseKey } from "./install-key.ts";
import { buildDeb } from "./deb.ts";
import { buildRpm } from "./rpm.ts";
import { buildImage, imageFileName, IMAGE_TARGETS } from "./image.ts";
import type { ImageArch } from "./image-rootfs.ts";

const { values } = parseArgs({ options: { only: { type: "string" }, "no-bytecode": { type: "boolean" }, "no-packages": { type: "boolean" }, "no-images": { type: "boolean" }, outdir: { type: "string" } } });
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

let key: SecretKey | undefined;
try {
  key = signingKey(process.env);
} catch (err) {
  console.error(`release: the signing key cannot be used: ${(err as Error).message}`);
  process.exit(65);
}

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
  await compile({ target, outfile: join(outdir, file), info, bytecode: !values["no-bytecode"], releaseKey: key ? publicKeyFile(key).split("\n")[1]! : "" });
  const bytes = new Uint8Array(readFileSync(join(outdir, file)));
  const inner = target.exe ? "burrow.exe" : "burrow";
  const archiveName = `burrow-${version}-${target.name}${target.exe ? ".zip" : ".tar.gz"}`;
  const archive = target.exe ? zip(inner, bytes, mtime) : await tarGz(inner, bytes, mtime);
  writeFileSync(join(outdir, archiveName), archive);
  sums.push([file, sha256(bytes)], [archiveName, sha256(archive)]);
  sizes.push({ target: target.name, file: bytes.length, archive: archive.length });
  console.log(`${file}  ${mib(bytes.length)}  ${archiveName}  ${mib(archive.length)}  (${Math.round(performance.now() - started)} ms)`);
}

/** Debian and RPM packages of the glibc linux builds, when dpkg-deb and rpmbuild are here (build/deb.ts, build/rpm.ts). */
const DEB_ARCH: Record<string, "amd64" | "arm64"> = { "linux-x64": "amd64", "linux-arm64": "arm64" };
const RPM_ARCH: Record<string, "x86_64" | "aarch64"> = { "linux-x64": "x86_64", "linux-arm64": "aarch64" };
const canDeb = Bun.which("dpkg-deb") !== null;
const canRpm = Bun.which("rpmbuild") !== null;

const queue = [...targets];
await Promise.all(
  Array.from({ length: JOBS }, async () => {
    for (let next = queue.shift(); next; next = queue.shift()) await buildTarget(next);
  }),
);
sizes.sort((a, b) => targets.findIndex((t) => t.name === a.target) - targets.findIndex((t) => t.name === b.target));

for (const target of targets) {
  const arch = DEB_ARCH[target.name];
  if (!arch || values["no-packages"]) continue;
  if (!canDeb) {
    console.error(`no dpkg-deb here: no .deb for ${target.name} (Debian's dpkg package has it)`);
    continue;
  }
  const executable = join(outdir, releaseFileName(version, target));
  const epoch = Math.floor(mtime.getTime() / 1000);
  const packages = [buildDeb({ executable, version, arch, outdir, epoch })];
  if (canRpm) packages.push(buildRpm({ executable, version, arch: RPM_ARCH[target.name]!, outdir, epoch }));
  else console.error(`no rpmbuild here: no .rpm for ${target.name} (Debian's rpm package has it)`);
  for (const file of packages) {
    const name = file.slice(outdir.length + 1);
    sums.push([name, sha256(readFileSync(file))]);
    console.log(`${name}  ${mib(statSync(file).size)}`);
  }
}

// the container image of each glibc linux build, and the compose files that run it
for (const [arch, name] of Object.entries(IMAGE_TARGETS) as [ImageArch, string][]) {
  const target = targets.find((t) => t.name === name);
  if (!target || values["no-images"]) continue;
  const file = imageFileName(version, arch);
  try {
    if (process.platform !== "linux") throw new Error("images are made on Linux, from its C library");
    const image = await buildImage({ executable: join(outdir, releaseFileName(version, target)), arch, version, info, outfile: join(outdir, file) });
    sums.push([file, sha256(readFileSync(image.file))]);
    console.log(`${file}  ${mib(image.archiveBytes)}`);
  } catch (err) {
    console.error(`no image for linux/${arch}: ${(err as Error).message}`);
  }
}
if (!values["no-images"]) {
  for (const name of ["compose.yaml", "compose.cluster.yaml", "compose.agent.yaml"]) {
    // the image as the release's archives load it
    const text = readFileSync(join(ROOT, "container", name), "utf8").replaceAll("image: burrow:latest", `image: burrow:${version}`);
    writeFileSync(join(outdir, name), text);
    sums.push([name, sha256(new TextEncoder().encode(text))]);
  }
}

// a signed release's installer carries its key, to check SHA256SUMS.minisig before it installs
const installer = readFileSync(join(ROOT, "install.sh"), "utf8");
writeFileSync(join(outdir, "install.sh"), key ? withReleaseKey(installer, publicKeyFile(key).split("\n")[1]!) : installer, { mode: 0o755 });
sums.push(["install.sh", sha256(readFileSync(join(outdir, "install.sh")))]);
sums.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
const sumsText = sums.map(([name, hash]) => `${hash}  ${name}\n`).join("");
writeFileSync(join(outdir, "SHA256SUMS"), sumsText);
if (key) {
  writeFileSync(join(outdir, "SHA256SUMS.minisig"), signFile(key, Buffer.from(sumsText), `burrow ${version} ${info.commit} SHA256SUMS`));
  writeFileSync(join(outdir, "burrow.pub"), publicKeyFile(key));
}

console.log(`\n| target | executable | compressed |\n|---|---:|---:|`);
for (const s of sizes) console.log(`| ${s.target} | ${mib(s.file)} | ${mib(s.archive)} |`);
console.log(`\n${sums.length} files and SHA256SUMS in ${outdir} (${info.commit})`);
if (key) console.log(`signed: SHA256SUMS.minisig, key ${parsePublicKey(publicKeyFile(key)).id} (burrow.pub); check with: minisign -V -p burrow.pub -m SHA256SUMS`);
else {
  console.error("");
  console.error("!!! UNSIGNED RELEASE: no BURROW_SIGNING_KEY_FILE or BURROW_SIGNING_KEY, so there is no SHA256SUMS.minisig.");
  console.error("!!! A checksum catches a broken download, not a tampered one: sign releases you publish (docs/install.md).");
}

function mib(n: number): string {
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
