/**
 * `npm run release` from this checkout: every platform's executable, its
 * archive and SHA256SUMS. Each file is checked for what it is (ELF, Mach-O
 * or PE of the right architecture, glibc or musl loader) and for carrying
 * exactly its own platform's argon2 binding; the linux-arm64 build really
 * runs, under qemu-user: a server with its database and an admin login, and
 * an agent carrying a request through an x64 server. The container images
 * are there as OCI archives of their architecture, with the compose files
 * that run them (what the images do when run: test/image/).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { constants, gunzipSync } from "node:zlib";
import { unzipSync } from "fflate";
import { extract } from "tar-stream";
import { bindingFile } from "../../build/bindings.ts";
import { RELEASE_TARGETS, releaseFileName } from "../../build/targets.ts";
import { signedIn } from "../harness/admin.ts";
import { manifestAndConfig } from "../harness/oci-archive.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { containsBytes, executableFormat } from "../harness/executable-format.ts";
import { arm64Runner } from "../harness/qemu.ts";
import { startServer } from "../harness/server.ts";

const root = join(import.meta.dir, "..", "..");
const version = (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { version: string }).version;
let outdir: string;
const IMAGES = [`burrow-${version}-oci-amd64.tar`, `burrow-${version}-oci-arm64.tar`];
const COMPOSE_FILES = ["compose.yaml", "compose.cluster.yaml", "compose.agent.yaml"];
let again: string;

function release(dir: string, only?: string[]): void {
  const run = Bun.spawnSync([process.execPath, join(root, "build", "release.ts"), "--outdir", dir, ...(only ? ["--only", only.join(",")] : [])], {
    cwd: root,
    stdout: "pipe",
    stderr: "pipe",
  });
  if (run.exitCode !== 0) throw new Error(`npm run release failed:\n${run.stdout}\n${run.stderr}`);
}

function sums(dir: string): Map<string, string> {
  const lines = readFileSync(join(dir, "SHA256SUMS"), "utf8").trimEnd().split("\n");
  return new Map(lines.map((line) => {
    const m = /^([0-9a-f]{64}) {2}(\S+)$/.exec(line);
    if (!m) throw new Error(`not a sha256sum line: ${line}`);
    return [m[2]!, m[1]!];
  }));
}

const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex");
const read = (dir: string, name: string) => new Uint8Array(readFileSync(join(dir, name)));

async function untar(gz: Uint8Array): Promise<{ name: string; mode: number; bytes: Uint8Array }[]> {
  const entries: { name: string; mode: number; bytes: Uint8Array }[] = [];
  const reader = extract();
  const done = (async () => {
    for await (const entry of reader) {
      const chunks: Buffer[] = [];
      for await (const chunk of entry) chunks.push(chunk as Buffer);
      entries.push({ name: entry.header.name, mode: entry.header.mode ?? 0, bytes: new Uint8Array(Buffer.concat(chunks)) });
    }
  })();
  reader.end(gunzipSync(gz));
  await done;
  return entries;
}

beforeAll(() => {
  outdir = mkdtempSync(join(tmpdir(), "burrow release "));
  again = mkdtempSync(join(tmpdir(), "burrow release again "));
  release(outdir);
}, 600_000);

afterAll(() => {
  executables.clear();
  for (const dir of [outdir, again]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test("every platform's executable and archive is written, and SHA256SUMS holds the hash of each file", () => {
  const listed = sums(outdir);
  const debs = Bun.which("dpkg-deb") ? [`burrow_${version}_amd64.deb`, `burrow_${version}_arm64.deb`] : [];
  if (debs.length && Bun.which("rpmbuild")) debs.push(`burrow-${version}-1.x86_64.rpm`, `burrow-${version}-1.aarch64.rpm`);
  const expected = [...RELEASE_TARGETS.flatMap((t) => [releaseFileName(version, t), `burrow-${version}-${t.name}${t.exe ? ".zip" : ".tar.gz"}`]), ...debs, ...IMAGES, ...COMPOSE_FILES];
  expect([...listed.keys()].sort()).toEqual([...expected, "install.sh"].sort());
  expect(readdirSync(outdir).sort()).toEqual([...expected, "install.sh", "SHA256SUMS"].sort());
  for (const [name, hash] of listed) expect(`${name} ${sha256(read(outdir, name))}`).toBe(`${name} ${hash}`);
  for (const t of RELEASE_TARGETS) expect(statSync(join(outdir, releaseFileName(version, t))).mode & 0o111).not.toBe(0);
  // every file of the release hashed again (well over a GB): seconds on a quiet machine, over 30 s on a loaded one
}, 180_000);

test("each image is an OCI archive of its architecture, loaded as burrow:<version>, and the compose files run that image", async () => {
  for (const [arch, target] of [["amd64", "linux-x64"], ["arm64", "linux-arm64"]] as const) {
    const { index, manifest, config } = await manifestAndConfig(join(outdir, `burrow-${version}-oci-${arch}.tar`));
    expect(index.manifests[0].annotations).toEqual({ "io.containerd.image.name": `docker.io/library/burrow:${version}`, "org.opencontainers.image.ref.name": version });
    expect(index.manifests[0].platform.architecture).toBe(arch);
    expect(config.architecture).toBe(arch);
    expect(manifest.layers).toHaveLength(1);
    expect(config.history[0].created_by).toContain(`for ${target}`);
  }
  for (const name of COMPOSE_FILES) {
    const text = readFileSync(join(outdir, name), "utf8");
    expect(text).toContain(`image: burrow:${version}\n`);
    expect(text).not.toContain("burrow:latest");
  }
});

/** Each executable read once (they are about 100 MiB each). */
const executables = new Map<string, Uint8Array>();

/** Archives unpacked whole and compared byte for byte: one of each kind; the others are checked by their header. */
const UNPACKED_WHOLE = new Set(["linux-arm64", "windows-x64"]);

describe.each(RELEASE_TARGETS.map((t) => [t.name, t] as const))("%s", (_name, target) => {
  const file = () => {
    let bytes = executables.get(target.name);
    if (!bytes) executables.set(target.name, (bytes = read(outdir, releaseFileName(version, target))));
    return bytes;
  };

  test("is an executable of its format and architecture, asking for its C library's loader", () => {
    const format = executableFormat(file());
    expect(format.arch).toBe(target.arch);
    expect(format.format).toBe(target.os === "linux" ? "elf" : target.os === "darwin" ? "mach-o" : "pe");
    if (target.os === "linux") expect(format.interpreter).toMatch(target.name.endsWith("-musl") ? /^\/lib\/ld-musl-/ : /^\/lib(64)?\/ld-linux-/);
  });

  test(`carries ${target.bindingPackage}'s binding at package-lock's version, and no other platform's`, async () => {
    const bytes = file();
    expect(containsBytes(bytes, new Uint8Array(readFileSync(await bindingFile(target.bindingPackage))))).toBe(true);
    const other = RELEASE_TARGETS.find((t) => t.bindingPackage !== target.bindingPackage)!;
    expect(containsBytes(bytes, new Uint8Array(readFileSync(await bindingFile(other.bindingPackage))))).toBe(false);
  });

  test("its archive holds it, executable, under the name burrow", async () => {
    const name = `burrow-${version}-${target.name}${target.exe ? ".zip" : ".tar.gz"}`;
    const archive = read(outdir, name);
    if (target.exe) {
      const entries = unzipSync(archive);
      expect(Object.keys(entries)).toEqual(["burrow.exe"]);
      expect(sha256(entries["burrow.exe"]!)).toBe(sha256(file()));
    } else if (UNPACKED_WHOLE.has(target.name)) {
      const entries = await untar(archive);
      expect(entries.map((e) => [e.name, e.mode.toString(8)])).toEqual([["burrow", "755"]]);
      expect(sha256(entries[0]!.bytes)).toBe(sha256(file()));
    } else {
      // the tar header at the front: name, mode and size; the bytes are SHA256SUMS's to vouch for
      const head = gunzipSync(archive.subarray(0, 64 * 1024), { finishFlush: constants.Z_SYNC_FLUSH });
      const field = (at: number, len: number) => new TextDecoder().decode(head.subarray(at, at + len)).replace(/\0.*$/s, "").trim();
      expect([field(0, 100), Number.parseInt(field(100, 8), 8).toString(8), Number.parseInt(field(124, 12), 8)]).toEqual(["burrow", "755", file().length]);
    }
  });
});

test("building the same checkout again gives the same bytes", () => {
  release(again, ["linux-arm64"]);
  const first = sums(outdir);
  const second = sums(again);
  // the executable, its archive, install.sh, its image and the compose files, and its .deb and .rpm where dpkg-deb and rpmbuild are
  expect(second.size).toBe(3 + 1 + COMPOSE_FILES.length + (Bun.which("dpkg-deb") ? 1 + (Bun.which("rpmbuild") ? 1 : 0) : 0));
  for (const [name, hash] of second) expect(`${name} ${hash}`).toBe(`${name} ${first.get(name)}`);
}, 300_000);

describe("linux-arm64 under qemu-user", () => {
  const runner = arm64Runner();
  const arm64 = () => join(outdir, releaseFileName(version, RELEASE_TARGETS.find((t) => t.name === "linux-arm64")!));
  if (!runner) console.error("release tests: no qemu-user for arm64 here (Debian's qemu-user-static could not be installed); the arm64 runs are skipped");

  test.skipIf(!runner)("--version names the arm64 build", () => {
    const run = Bun.spawnSync([...runner!, arm64(), "--version"], { stdout: "pipe", stderr: "pipe", timeout: 60_000 });
    expect(run.stderr.toString()).toBe("");
    expect(run.stdout.toString()).toMatch(new RegExp(`^burrow ${version.replaceAll(".", "\\.")}\\n[^]*\\ntarget  linux-arm64\\nkey     none \\(an unsigned build[^\\n]*\\n$`));
  }, 90_000);

  test.skipIf(!runner)("a server creates its database, answers the admin API and signs the admin in (argon2 through the arm64 binding)", async () => {
    await using server = await startServer({ prefix: runner, executable: arm64(), args: ["--agent-port", "off"], startTimeoutMs: 90_000 });
    expect(statSync(join(server.dataDir, "burrow.db")).size).toBeGreaterThan(0);
    const api = await signedIn(server);
    const me = await api.get("/api/auth/me");
    expect(me.status).toBe(200);
    expect(me.body.username).toBe("admin");
    const id = await api.createUser("arm64-user");
    expect((await api.createToken(id)).startsWith("brw_")).toBe(true);
    expect((await api.login("admin", "not-the-password")).status).toBe(401);
  }, 120_000);

  test.skipIf(!runner)("the arm64 agent carries a request through an x64 server", async () => {
    const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`arm64 agent says ${new URL(req.url).pathname}`) });
    try {
      await using server = await startServer();
      const api = await signedIn(server);
      const token = await api.createToken(await api.createUser("arm64-agent"));
      await using agent = await startAgent({ prefix: runner, executable: arm64(), kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "arm"], startTimeoutMs: 90_000 });
      const res = await tunnelFetch(server.edgePort, "arm", "/from-x64");
      expect(res.status).toBe(200);
      expect(await res.text()).toBe("arm64 agent says /from-x64");
    } finally {
      upstream.stop(true);
    }
  }, 120_000);
});
