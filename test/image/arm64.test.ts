/**
 * The linux/arm64 image, built on this x64 machine from the linux-arm64
 * release executable and Debian's arm64 C library (libc6-arm64-cross,
 * libgcc-s1-arm64-cross): its archive's index, manifest and config say
 * arm64, podman loads it as arm64, and it runs under qemu-user-static.
 *
 * Where the kernel has qemu registered with binfmt_misc, podman runs the
 * image as it would on an arm64 machine. Where it has not (binfmt_misc is
 * the machine's, not a test's to register), the image's own root file
 * system, mounted from podman's storage, is run with
 * `qemu-aarch64-static -L <rootfs>`: the loader and every library come
 * from the image, none from this machine.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { buildInfo, compile } from "../../build/compile.ts";
import { buildImage, imageFileName, mib, type BuiltImage } from "../../build/image.ts";
import { RELEASE_TARGETS } from "../../build/targets.ts";
import { signedIn } from "../harness/admin.ts";
import { podmanSkipReason, startPodman, type Podman } from "../harness/podman.ts";
import { arm64Runner } from "../harness/qemu.ts";
import { startServer } from "../harness/server.ts";
import { layerFiles, manifestAndConfig } from "../harness/oci-archive.ts";

const version = (JSON.parse(readFileSync(join(import.meta.dir, "..", "..", "package.json"), "utf8")) as { version: string }).version;
const QEMU = "/usr/bin/qemu-aarch64-static";
const skip = process.arch !== "x64" ? "the arm64 image is checked under qemu from an x64 machine" : (podmanSkipReason() ?? (arm64Runner() ? undefined : "no qemu-user-static and arm64 C library here"));
if (skip) console.error(`arm64 image tests skipped: ${skip}`);
/** binfmt_misc runs arm64 executables through qemu for every process, podman's containers included. */
const binfmt = existsSync("/proc/sys/fs/binfmt_misc/qemu-aarch64");

let pm: Podman;
let work: string;
let executable: string;
let image: BuiltImage;
let rootfs = "";
const IMAGE = `docker.io/library/burrow:${version}`;

beforeAll(async () => {
  if (skip) return;
  pm = startPodman();
  work = mkdtempSync(join(tmpdir(), "burrow-arm64-image-"));
  executable = join(work, "burrow");
  await compile({ target: RELEASE_TARGETS.find((t) => t.name === "linux-arm64")!, outfile: executable, info: buildInfo() });
  image = await buildImage({ executable, arch: "arm64", version, info: buildInfo(), outfile: join(work, imageFileName(version, "arm64")) });
  await pm.ok(["load", "-i", image.file]);
  if (!binfmt) rootfs = (await pm.ok(["image", "mount", IMAGE])).trim();
}, 300_000);

afterAll(async () => {
  await pm?.close();
});

describe.skipIf(!!skip)("the linux/arm64 image", () => {
  test("its index, manifest and config say linux/arm64 (v8), and podman loads it as such", async () => {
    const { index, config } = await manifestAndConfig(image.file);
    expect(index.manifests).toHaveLength(1);
    expect(index.manifests[0].platform).toEqual({ architecture: "arm64", os: "linux", variant: "v8" });
    expect([config.architecture, config.os, config.variant]).toEqual(["arm64", "linux", "v8"]);
    const [loaded] = JSON.parse(await pm.ok(["image", "inspect", IMAGE]));
    expect([loaded.Architecture, loaded.Os]).toEqual(["arm64", "linux"]);
    console.log(`image linux/arm64: ${mib(image.layerBytes)} compressed, ${mib(image.rootfsBytes)} of files; the executable: ${mib(readFileSync(executable).length)}`);
  });

  test("it holds arm64's loader where the executable looks for it, and arm64's libraries", async () => {
    const entries = new Map((await layerFiles(image.file)).map((e) => [e.name, e]));
    expect(entries.get("lib")).toMatchObject({ type: "symlink", linkname: "usr/lib" });
    expect(entries.get("usr/lib/ld-linux-aarch64.so.1")).toMatchObject({ type: "symlink", linkname: "aarch64-linux-gnu/ld-linux-aarch64.so.1" });
    for (const lib of ["ld-linux-aarch64.so.1", "libc.so.6", "libm.so.6", "libgcc_s.so.1"]) expect(entries.get(`usr/lib/aarch64-linux-gnu/${lib}`)?.type).toBe("file");
    expect([...entries.keys()].filter((n) => n.includes("x86_64"))).toEqual([]);
  });

  test(`burrow version runs in it under qemu (${binfmt ? "podman run, through binfmt_misc" : "qemu-aarch64-static -L on the image's mounted root"})`, async () => {
    const run = binfmt
      ? await pm.run(["run", "--rm", "--platform", "linux/arm64", IMAGE, "version"])
      : await runIn(rootfs, ["version"]);
    expect(run.stderr).toBe("");
    expect(run.stdout).toMatch(new RegExp(`^burrow ${version.replaceAll(".", "\\.")}\\n[^]*\\ntarget  linux-arm64\\n`));
  }, 120_000);

  test.skipIf(binfmt)("a server from the image's root, under qemu, creates its database and signs the admin in (argon2's arm64 binding, on the image's libgcc)", async () => {
    await using server = await startServer({ prefix: [QEMU, "-L", rootfs], executable: join(rootfs, "usr/local/bin/burrow"), args: ["--agent-port", "off"] });
    const api = await signedIn(server);
    expect((await api.get("/api/auth/me")).body.username).toBe("admin");
  }, 120_000);
});

async function runIn(root: string, args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  const proc = Bun.spawn([QEMU, "-L", root, join(root, "usr/local/bin/burrow"), ...args], { stdout: "pipe", stderr: "pipe", env: { PATH: "/usr/bin:/bin", HOME: work } });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(timer);
  return { code, stdout, stderr };
}
