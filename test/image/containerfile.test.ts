/**
 * container/Containerfile, the image built the usual way on a distroless
 * base, is the image `npm run image` makes: the same executable, user,
 * volume (owned by that user, mode 0700), settings, ports, labels and
 * health check.
 *
 * Its bases cannot be pulled here (no registry), so podman builds it, for
 * real, on stand-ins of the same names made here: the distroless base is
 * npm run image's own root file system without burrow and /data, with the
 * distroless image's user and environment (PATH, SSL_CERT_FILE); the
 * Debian stage's base is Debian's static busybox (sh, mkdir, chown, chmod). What is
 * checked is what the Containerfile itself adds and says.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildInfo } from "../../build/compile.ts";
import { BURROW_IN_IMAGE, FIXED_LABELS, runConfig } from "../../build/image.ts";
import { NONROOT, rootfs, type ImageArch, type RootfsEntry } from "../../build/image-rootfs.ts";
import { ociArchive } from "../../build/oci-archive.ts";
import { bindingFile } from "../../build/bindings.ts";
import { elfNeeds } from "../../build/elf.ts";
import { hostTarget } from "../../build/targets.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { podmanSkipReason, startPodman, type Podman } from "../harness/podman.ts";

const ROOT = join(import.meta.dir, "..", "..");
const CONTAINERFILE = join(ROOT, "container", "Containerfile");
const here: ImageArch = process.arch === "arm64" ? "arm64" : "amd64";
const BUSYBOX = "/bin/busybox";
/** busybox-static's: a busybox that needs no C library, alone in the Debian stage's stand-in (busybox's own package links glibc). */
const staticBusybox = () => existsSync(BUSYBOX) && elfNeeds(new Uint8Array(readFileSync(BUSYBOX))).interpreter === undefined;
const skip = podmanSkipReason() ?? (staticBusybox() || (aptInstall(["busybox-static"], "the Containerfile's test") && staticBusybox()) ? undefined : "no busybox-static here, the stand-in for the Debian stage");
if (skip) console.error(`Containerfile build test skipped: ${skip}`);

/** What gcr.io/distroless/cc-debian12:nonroot's config sets, which the Containerfile takes from it. */
const DISTROLESS_CONFIG = {
  User: "65532",
  WorkingDir: "/home/nonroot",
  Env: ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"],
};

/** The Containerfile's instructions, continuation lines joined, comments left out. */
function instructions(text: string): { word: string; rest: string }[] {
  return text
    .replace(/\\\n/g, " ")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"))
    .map((l) => ({ word: l.split(/\s+/, 1)[0]!.toUpperCase(), rest: l.slice(l.split(/\s+/, 1)[0]!.length).trim() }));
}

const expected = runConfig({});
const SECOND = 1_000_000_000;

describe("container/Containerfile, read", () => {
  const all = instructions(readFileSync(CONTAINERFILE, "utf8"));
  const last = all.slice(all.findLastIndex((i) => i.word === "FROM"));
  const one = (word: string) => {
    const found = last.filter((i) => i.word === word);
    expect(found.map((f) => f.word)).toEqual([word]);
    return found[0]!.rest;
  };

  test("its last stage is the distroless base, and names the executable where the image has it", () => {
    expect(last[0]!.rest).toBe("gcr.io/distroless/cc-debian12:nonroot");
    expect(last.some((i) => i.word === "COPY" && i.rest === `--chmod=0755 \${BURROW} ${BURROW_IN_IMAGE}`)).toBe(true);
  });

  test("its user, entrypoint, command, volume, working dir, stop signal and ports are the image's", () => {
    expect(one("USER")).toBe(expected.User);
    expect(JSON.parse(one("ENTRYPOINT"))).toEqual(expected.Entrypoint);
    expect(JSON.parse(one("CMD"))).toEqual(expected.Cmd);
    expect(one("VOLUME").split(/\s+/)).toEqual(Object.keys(expected.Volumes));
    expect(one("WORKDIR")).toBe(expected.WorkingDir);
    expect(one("STOPSIGNAL")).toBe(expected.StopSignal);
    expect(one("EXPOSE").split(/\s+/).sort()).toEqual(Object.keys(expected.ExposedPorts).sort());
  });

  test("its environment and the base's together are the image's", () => {
    const own = one("ENV").split(/\s+/);
    expect([...DISTROLESS_CONFIG.Env, ...own].sort()).toEqual([...expected.Env].sort());
  });

  test("its health check is the image's", () => {
    const m = /^--interval=(\d+)s --timeout=(\d+)s --start-period=(\d+)s --retries=(\d+) CMD (\[.*\])$/.exec(one("HEALTHCHECK"));
    expect(m).not.toBeNull();
    expect({ Test: ["CMD", ...JSON.parse(m![5]!)], Interval: Number(m![1]) * SECOND, Timeout: Number(m![2]) * SECOND, StartPeriod: Number(m![3]) * SECOND, Retries: Number(m![4]) }).toEqual(expected.Healthcheck);
  });

  test("its labels are the image's fixed ones", () => {
    const labels = Object.fromEntries([...one("LABEL").matchAll(/(\S+)="([^"]*)"/g)].map((m) => [m[1]!, m[2]!]));
    expect(labels).toEqual(FIXED_LABELS);
  });
});

describe.skipIf(!!skip)("container/Containerfile, built by podman on stand-ins of its bases", () => {
  let pm: Podman;
  let work: string;
  let executable: string;

  /** A stand-in base image, loaded under `name`. */
  async function standIn(name: string, entries: RootfsEntry[], config: Parameters<typeof ociArchive>[0]["config"]): Promise<void> {
    const file = join(work, `${name.replace(/[/:]/g, "_")}.tar`);
    const made = await ociArchive({ arch: here, entries, config, created: new Date(0), createdBy: "a test's stand-in", repoTag: "stand-in:latest", annotations: {} });
    await Bun.write(file, made.archive);
    const loaded = /Loaded image: (\S+)/.exec(await pm.ok(["load", "-i", file]))![1]!;
    await pm.ok(["tag", loaded, name]);
    await pm.ok(["rmi", loaded]);
  }

  beforeAll(async () => {
    pm = startPodman();
    work = mkdtempSync(join(tmpdir(), "burrow-containerfile-"));
    executable = await compiledBurrow(join(work, "exe"));
    const bytes = new Uint8Array(readFileSync(executable));
    const binding = new Uint8Array(readFileSync(await bindingFile(hostTarget().bindingPackage)));
    const base = rootfs({ arch: here, executable: bytes, binding }).filter((e) => e.path !== "usr/local/bin/burrow" && e.path !== "data");
    await standIn("gcr.io/distroless/cc-debian12:nonroot", base, DISTROLESS_CONFIG);
    const busybox = new Uint8Array(readFileSync(BUSYBOX));
    await standIn(
      "docker.io/library/debian:12-slim",
      [
        { path: "bin", type: "directory", mode: 0o755 },
        { path: "bin/busybox", type: "file", mode: 0o755, bytes: busybox },
        { path: "bin/sh", type: "symlink", target: "busybox" },
        ...["mkdir", "chown", "chmod"].map((tool) => ({ path: `bin/${tool}`, type: "symlink" as const, target: "busybox" })),
        { path: "tmp", type: "directory", mode: 0o1777 },
      ],
      { Env: ["PATH=/bin"] },
    );
    // the build's context: the checkout's .dockerignore and what npm run build writes
    const context = join(work, "context");
    mkdirSync(join(context, "dist"), { recursive: true });
    copyFileSync(executable, join(context, "dist", "burrow"));
    copyFileSync(join(ROOT, ".dockerignore"), join(context, ".dockerignore"));
    await pm.ok(["build", "--pull=never", "--format", "docker", "--file", CONTAINERFILE, "--tag", "burrow-containerfile", context], 300_000);
  }, 600_000);

  afterAll(async () => {
    await pm?.close();
  });

  test("the image it builds runs as the image's user, with its settings, ports, labels and health check", async () => {
    const [built] = JSON.parse(await pm.ok(["image", "inspect", "burrow-containerfile"]));
    const config = built.Config;
    expect(config.User).toBe(expected.User);
    expect(config.Entrypoint).toEqual(expected.Entrypoint);
    expect(config.Cmd).toEqual(expected.Cmd);
    expect(config.Volumes).toEqual(expected.Volumes);
    expect(config.WorkingDir).toBe(expected.WorkingDir);
    expect(config.StopSignal).toBe(expected.StopSignal);
    expect(config.ExposedPorts).toEqual(expected.ExposedPorts);
    expect([...config.Env].sort()).toEqual([...expected.Env].sort());
    expect(config.Labels).toMatchObject(FIXED_LABELS);
    expect(built.Healthcheck).toEqual(expected.Healthcheck);
    expect(built.Architecture).toBe(here);
  });

  test("its /data is the image's user's alone, and its burrow is the executable, byte for byte", async () => {
    const root = (await pm.ok(["image", "mount", "burrow-containerfile"])).trim();
    try {
      expect(statSync(join(root, "data"))).toMatchObject({ uid: NONROOT, gid: NONROOT });
      expect(statSync(join(root, "data")).mode & 0o7777).toBe(0o700);
      const inside = join(root, BURROW_IN_IMAGE);
      expect(statSync(inside).mode & 0o777).toBe(0o755);
      const hash = (f: string) => new Bun.CryptoHasher("sha256").update(readFileSync(f)).digest("hex");
      expect(hash(inside)).toBe(hash(executable));
    } finally {
      await pm.run(["image", "unmount", "burrow-containerfile"]);
    }
  });

  test("it runs: burrow version, and a server that says it is ready to its own health check", async () => {
    const version = await pm.run(["run", "--rm", "burrow-containerfile", "version"]);
    expect(version.stdout).toContain(`commit  ${buildInfo().commit}`);
    await pm.ok(["run", "--detach", "--name", "from-containerfile", "burrow-containerfile"]);
    const { output } = pm.follow("from-containerfile");
    await output.waitFor(/admin api listening/, 30_000);
    expect((await pm.run(["healthcheck", "run", "from-containerfile"])).code).toBe(0);
  }, 60_000);
});
