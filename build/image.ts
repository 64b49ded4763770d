/**
 * `npm run image`: the container image, for linux/amd64 and linux/arm64,
 * from the release's linux executables: a root file system with the
 * executable and what it needs (build/image-rootfs.ts), written as an OCI
 * archive without any container engine or registry (build/oci-archive.ts),
 * then loaded into podman (or docker) when one is here:
 *
 *   dist/image/burrow-<version>-oci-<amd64|arm64>.tar   loaded as burrow:<version>-<arch>;
 *                                                       this machine's also as burrow:<version> and burrow:latest
 *
 * What the image runs as, and with which settings, is RUN_CONFIG below: the
 * one place it is written. container/Containerfile, for building on a
 * distroless base with a registry at hand, says the same (a test holds it to it).
 *
 *   bun build/image.ts [--arch amd64,arm64] [--outdir DIR] [--no-load]
 */
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { bindingFile } from "./bindings.ts";
import { buildInfo, compile, type BuildInfo } from "./compile.ts";
import { rootfs, NONROOT, type ImageArch } from "./image-rootfs.ts";
import { ociArchive, type ImageRunConfig } from "./oci-archive.ts";
import { ROOT } from "./paths.ts";
import { RELEASE_TARGETS, releaseFileName, type ReleaseTarget } from "./targets.ts";

/** The release targets an image is made of, by the image's architecture. */
export const IMAGE_TARGETS: Record<ImageArch, string> = { amd64: "linux-x64", arm64: "linux-arm64" };

export const BURROW_IN_IMAGE = "/usr/local/bin/burrow";

const SECOND = 1_000_000_000;

/**
 * How the image runs. The server's defaults hold but for the data dir (the
 * volume); the admin API stays on the container's loopback (the server's
 * default), where only the health check reaches it.
 */
export function runConfig(labels: Record<string, string>): ImageRunConfig {
  return {
    User: `${NONROOT}:${NONROOT}`,
    // the public port (8080 unless BURROW_HTTP_PORT), HTTPS and DNS with ACME, the agents' direct port
    ExposedPorts: { "8080/tcp": {}, "443/tcp": {}, "53/tcp": {}, "53/udp": {}, "4042/tcp": {} },
    Env: [
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
      "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
      "BURROW_DATA_DIR=/data",
    ],
    Entrypoint: [BURROW_IN_IMAGE],
    Cmd: ["server"],
    Volumes: { "/data": {} },
    WorkingDir: "/home/nonroot",
    Labels: labels,
    StopSignal: "SIGTERM",
    Healthcheck: { Test: ["CMD", BURROW_IN_IMAGE, "server", "health"], Interval: 30 * SECOND, Timeout: 10 * SECOND, StartPeriod: 30 * SECOND, Retries: 3 },
  };
}

/** The labels every build of the image carries; the Containerfile's LABEL lines say the same. */
export const FIXED_LABELS = {
  "org.opencontainers.image.title": "burrow",
  "org.opencontainers.image.description": "Self-hosted tunnels: the burrow server and agent, one executable",
  "org.opencontainers.image.source": "https://github.com/burrow-tunnel/burrow",
};

export function imageFileName(version: string, arch: ImageArch): string {
  return `burrow-${version}-oci-${arch}.tar`;
}

export interface BuiltImage {
  file: string;
  /** The compressed layer: what a registry would store and a pull download. */
  layerBytes: number;
  /** The files in it, added up. */
  rootfsBytes: number;
  archiveBytes: number;
}

/** The image of one linux executable, written to `outfile`. */
export async function buildImage(opts: { executable: string; arch: ImageArch; version: string; info: BuildInfo; outfile: string }): Promise<BuiltImage> {
  const target = RELEASE_TARGETS.find((t) => t.name === IMAGE_TARGETS[opts.arch])!;
  const executable = new Uint8Array(readFileSync(opts.executable));
  const binding = new Uint8Array(readFileSync(await bindingFile(target.bindingPackage)));
  const labels = {
    ...FIXED_LABELS,
    "org.opencontainers.image.version": opts.version,
    "org.opencontainers.image.revision": opts.info.commit,
    "org.opencontainers.image.created": opts.info.builtAt,
  };
  const built = await ociArchive({
    arch: opts.arch,
    entries: rootfs({ arch: opts.arch, executable, binding }),
    config: runConfig(labels),
    created: new Date(opts.info.builtAt),
    createdBy: `npm run image: burrow ${opts.version} (${opts.info.commit}) for ${target.name}, its C library, CA certificates and time zones`,
    repoTag: `burrow:${opts.version}`,
    annotations: labels,
  });
  writeFileSync(opts.outfile, built.archive);
  return { file: opts.outfile, layerBytes: built.layerBytes, rootfsBytes: built.rootfsBytes, archiveBytes: built.archive.length };
}

/** The container engine here: podman, else a docker whose daemon answers; undefined when neither. */
export function containerEngine(): "podman" | "docker" | undefined {
  if (Bun.which("podman")) return "podman";
  if (Bun.which("docker") && Bun.spawnSync(["docker", "info"], { stdout: "ignore", stderr: "ignore", timeout: 20_000 }).exitCode === 0) return "docker";
  return undefined;
}

/**
 * Loads an archive; returns what names the image now. podman reads a
 * HEALTHCHECK only from an image in Docker's format, so it is given the
 * archive's docker-archive side (the same image, the same id); docker reads
 * it from either.
 */
function load(engine: "podman" | "docker", file: string): string {
  const command = engine === "podman" ? ["podman", "pull", "--quiet", `docker-archive:${file}`] : ["docker", "load", "-i", file];
  const run = Bun.spawnSync(command, { stdout: "pipe", stderr: "pipe" });
  const said = run.stdout.toString() + run.stderr.toString();
  const name = engine === "podman" ? run.stdout.toString().trim().split("\n").at(-1) : /Loaded image(?:\(s\))?: *(\S+)/.exec(said)?.[1]?.split(",")[0];
  if (run.exitCode !== 0 || !name) throw new Error(`${command.join(" ")} failed: ${said.trim()}`);
  return name;
}

function tag(engine: "podman" | "docker", from: string, to: string): void {
  const run = Bun.spawnSync([engine, "tag", from, to], { stdout: "pipe", stderr: "pipe" });
  if (run.exitCode !== 0) throw new Error(`${engine} tag ${from} ${to} failed: ${run.stderr.toString().trim()}`);
}

export const mib = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MiB`;

if (import.meta.main) {
  const { values } = parseArgs({ options: { arch: { type: "string" }, outdir: { type: "string" }, "no-load": { type: "boolean" } } });
  const arches = (values.arch?.split(",").map((s) => s.trim()) ?? ["amd64", "arm64"]) as ImageArch[];
  const unknown = arches.filter((a) => !(a in IMAGE_TARGETS));
  if (unknown.length > 0) {
    console.error(`unknown --arch ${unknown.join(", ")}; amd64 or arm64`);
    process.exit(64);
  }
  const version = (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { version: string }).version;
  const outdir = values.outdir ?? join(ROOT, "dist", "image");
  mkdirSync(outdir, { recursive: true });
  const info = buildInfo();
  const here: ImageArch = process.arch === "arm64" ? "arm64" : "amd64";
  // this machine's last, so that burrow:<version> ends up naming it
  arches.sort((a, b) => Number(a === here) - Number(b === here));
  const built: { arch: ImageArch; image: BuiltImage; executableBytes: number }[] = [];
  for (const arch of arches) {
    const target = RELEASE_TARGETS.find((t) => t.name === IMAGE_TARGETS[arch]) as ReleaseTarget;
    const executable = join(outdir, releaseFileName(version, target));
    await compile({ target, outfile: executable, info });
    const image = await buildImage({ executable, arch, version, info, outfile: join(outdir, imageFileName(version, arch)) });
    built.push({ arch, image, executableBytes: readFileSync(executable).length });
    console.log(`${image.file}  ${mib(image.archiveBytes)}`);
  }
  console.log(`\n| image | executable | image, compressed | image, on disk |\n|---|---:|---:|---:|`);
  for (const b of built) console.log(`| linux/${b.arch} | ${mib(b.executableBytes)} | ${mib(b.image.layerBytes)} | ${mib(b.image.rootfsBytes)} |`);

  const engine = values["no-load"] ? undefined : containerEngine();
  if (!engine) {
    if (!values["no-load"]) console.error(`\nno podman or docker here: the images are not loaded; load one with podman load -i (or docker load -i) ${join(outdir, imageFileName(version, here))}`);
    process.exit(0);
  }
  for (const b of built) {
    const name = load(engine, b.image.file);
    tag(engine, name, `burrow:${version}-${b.arch}`);
    if (b.arch === here) {
      tag(engine, name, `burrow:${version}`);
      tag(engine, name, "burrow:latest");
    }
  }
  const names = built.map((b) => `burrow:${version}-${b.arch}`);
  if (built.some((b) => b.arch === here)) names.unshift(`burrow:${version}`, "burrow:latest");
  console.log(`\nloaded into ${engine}: ${names.join(", ")}`);
}
