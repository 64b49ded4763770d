/**
 * install.sh against a fake release served over HTTP: the release's file
 * names and SHA256SUMS are the real ones, the "executables" are tiny shell
 * scripts that print a version, so every build runs here. Each run gets its
 * own install dir, HOME and TMPDIR under a temp dir with spaces in its name,
 * and BURROW_INSTALL_DIR is always set except where the fallback to
 * ~/.local/bin is tested as a user who cannot write /usr/local/bin: nothing
 * is written outside temp dirs.
 */
import { afterAll, beforeEach, describe, expect, test } from "bun:test";
import {
  accessSync,
  chmodSync,
  chownSync,
  constants,
  copyFileSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import pkg from "../../package.json";
import { deferred, within } from "../harness/wait.ts";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { withReleaseKey } from "../../build/install-key.ts";
import { publicKeyFile, signFile, type SecretKey } from "../../src/signing/minisign.ts";

const SCRIPT = resolve(import.meta.dir, "../../install.sh");
const VERSION = pkg.version;
const RAW_TARGETS = ["linux-x64", "linux-arm64", "linux-x64-musl", "linux-arm64-musl", "darwin-x64", "darwin-arm64"];
const SYSTEM_DIR = "/usr/local/bin";
/** A run that takes longer than this is killed (and fails its test). */
const RUN_LIMIT_MS = 15_000;
const TEST_LIMIT_MS = 30_000;

const fakeBinary = (target: string, version = VERSION) => `#!/bin/sh\necho "burrow ${version} (test ${target})"\n`;
const binaryName = (target: string, version = VERSION) => `burrow-${version}-${target}`;
const sha256 = (data: string | Uint8Array) => new Bun.CryptoHasher("sha256").update(data).digest("hex");
const sha256sums = (files: Map<string, string | Uint8Array>) =>
  [...files.keys()]
    .sort()
    .map((name) => `${sha256(files.get(name)!)}  ${name}\n`)
    .join("");

/** The release as `npm run release` lays it out: raw executables, one-file archives, SHA256SUMS. */
function buildRelease(): Map<string, string | Uint8Array> {
  const files = new Map<string, string | Uint8Array>();
  const work = mkdtempSync(join(tmpdir(), "burrow-release-"));
  try {
    for (const target of RAW_TARGETS) {
      const body = fakeBinary(target);
      files.set(binaryName(target), body);
      const one = join(work, target);
      mkdirSync(one);
      writeFileSync(join(one, "burrow"), body, { mode: 0o755 });
      const archive = join(work, `${binaryName(target)}.tar.gz`);
      const tar = Bun.spawnSync(["tar", "-czf", archive, "-C", one, "burrow"]);
      if (tar.exitCode !== 0) throw new Error(`tar failed: ${tar.stderr.toString()}`);
      files.set(`${binaryName(target)}.tar.gz`, readFileSync(archive));
    }
    files.set(`${binaryName("windows-x64")}.exe`, fakeBinary("windows-x64"));
    // the script never opens archives: a stand-in is enough for the zip
    files.set(`${binaryName("windows-x64")}.zip`, "PK stand-in for burrow.exe");
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
  files.set("SHA256SUMS", sha256sums(files));
  return files;
}

const RELEASE = buildRelease();

// --- the server: serves `files` under /dl/, remembers what was asked ------------

let files = new Map(RELEASE);
let requests: string[] = [];
/** When set, the request for `name` is answered only once `open` resolves. */
let gate: { name: string; arrived: () => void; open: Promise<void> } | null = null;

const server = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const path = new URL(req.url).pathname;
    if (!path.startsWith("/dl/")) return new Response("not found", { status: 404 });
    const name = decodeURIComponent(path.slice("/dl/".length));
    requests.push(name);
    if (gate?.name === name) {
      gate.arrived();
      await gate.open;
    }
    const body = files.get(name);
    return body === undefined ? new Response("not found", { status: 404 }) : new Response(body);
  },
});
const BASE = `http://127.0.0.1:${server.port}/dl`;

beforeEach(() => {
  files = new Map(RELEASE);
  requests = [];
  gate = null;
});

// /usr/local/bin/burrow as it was before the tests: it must be the same after
const systemBefore = statOrNull(join(SYSTEM_DIR, "burrow"));
afterAll(() => server.stop(true));

function statOrNull(path: string): string | null {
  try {
    const s = statSync(path);
    return `${s.ino}:${s.mtimeMs}:${s.size}`;
  } catch {
    return null;
  }
}

// --- one run's world -------------------------------------------------------------

interface Case extends Disposable {
  root: string;
  installDir: string;
  home: string;
  tmp: string;
}

/** A temp dir (spaces in its name) with an install dir, HOME and TMPDIR inside; removed on dispose. */
function newCase(): Case {
  const root = mkdtempSync(join(tmpdir(), "burrow install test "));
  const home = join(root, "home dir");
  const tmp = join(root, "tmp dir");
  mkdirSync(home);
  mkdirSync(tmp);
  return {
    root,
    installDir: join(root, "bin dir"),
    home,
    tmp,
    [Symbol.dispose]: () => rmSync(root, { recursive: true, force: true }),
  };
}

/** A clean machine's environment: no BURROW_* and no proxy; `undefined` in `extra` removes a variable. */
function envFor(c: Case, extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !k.startsWith("BURROW_") && !/^(https?|all|no)_proxy$/i.test(k)) env[k] = v;
  }
  Object.assign(env, { HOME: c.home, TMPDIR: c.tmp, BURROW_DOWNLOAD_BASE: BASE, BURROW_INSTALL_DIR: c.installDir });
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function start(command: string[], env: Record<string, string>, cwd: string) {
  return Bun.spawn(command, { env, cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
}

async function finish(proc: ReturnType<typeof start>): Promise<Run> {
  const timer = setTimeout(() => proc.kill("SIGKILL"), RUN_LIMIT_MS);
  try {
    const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
    return { code, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
}

/** Commands (in a dir of their own) that stand in for the machine's: `uname`, `ldd`, `sysctl`. */
function fakeTools(c: Case, tools: Record<string, string>): string {
  const dir = join(c.root, "fake tools");
  mkdirSync(dir, { recursive: true });
  for (const [name, body] of Object.entries(tools)) writeFileSync(join(dir, name), `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return `${dir}:${process.env.PATH}`;
}

const fakeUname = (s: string, m: string) => `case "$1" in -m) echo '${m}' ;; *) echo '${s}' ;; esac`;

/** A PATH that holds every command of the real one except `names`. */
function pathWithout(c: Case, names: string[]): string {
  const dir = join(c.root, "path without");
  mkdirSync(dir, { recursive: true });
  const seen = new Set(names);
  for (const d of (process.env.PATH ?? "").split(":")) {
    let entries: string[];
    try {
      entries = readdirSync(d);
    } catch {
      continue;
    }
    for (const e of entries) {
      if (seen.has(e)) continue;
      seen.add(e);
      symlinkSync(join(d, e), join(dir, e));
    }
  }
  return dir;
}

/** Files the run left: in TMPDIR, and staged copies in the install dir. */
function leftovers(c: Case): string[] {
  const staged = existsSync(c.installDir) ? readdirSync(c.installDir).filter((f) => f.startsWith(".burrow-install")) : [];
  return [...readdirSync(c.tmp), ...staged];
}

const installed = (c: Case) => join(c.installDir, "burrow");

const hostOs = process.platform === "darwin" ? "darwin" : "linux";
const hostArch = process.arch === "arm64" ? "arm64" : "x64";

// --- the cases, under every shell at hand ------------------------------------------

const shells: string[][] = [[Bun.which("sh")!]];
if (existsSync("/bin/dash")) shells.push(["/bin/dash"]);
const busybox = Bun.which("busybox");
if (busybox && findsCommandsOnPath([busybox, "sh"])) shells.push([busybox, "sh"]);

/**
 * Whether `shell` runs a command from PATH rather than a built-in of its
 * own: the cases stand in uname, ldd, curl... by putting fakes first on
 * PATH. A static busybox (Debian's busybox-static) runs its own applets
 * first, whatever PATH says, so these cases cannot be played under it; a
 * busybox that goes by PATH (Alpine's) can.
 */
function findsCommandsOnPath(shell: string[]): boolean {
  const dir = mkdtempSync(join(tmpdir(), "burrow-shell-"));
  try {
    writeFileSync(join(dir, "uname"), "#!/bin/sh\necho fake-uname\n", { mode: 0o755 });
    const r = Bun.spawnSync([...shell, "-c", "uname"], { env: { PATH: `${dir}:/usr/bin:/bin` } });
    return r.stdout.toString().trim() === "fake-uname";
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

for (const shell of shells) {
  const name = shell.join(" ");
  const install = (c: Case, extra: Record<string, string | undefined> = {}) => finish(start([...shell, SCRIPT], envFor(c, extra), c.root));

  describe(`install.sh under ${name}`, () => {
    test(
      "installs the build for this machine as an executable burrow, runs its --version and says what it did",
      async () => {
        using c = newCase();
        const r = await install(c);
        expect(r.stderr).not.toContain("error");
        expect(r.code).toBe(0);
        const picked = /downloading (burrow-\S+) \((\S+)\)/.exec(r.stdout);
        expect(picked).not.toBeNull();
        const [, file, target] = picked!;
        expect(target).toMatch(new RegExp(`^${hostOs}-${hostArch}(-musl)?$`));
        expect(file).toBe(binaryName(target!));
        expect(readFileSync(installed(c), "utf8")).toBe(fakeBinary(target!));
        expect(statSync(installed(c)).mode & 0o777).toBe(0o755);
        expect(r.stdout).toContain(`installed ${file} (version ${VERSION}) as ${installed(c)}`);
        expect(r.stdout).toContain(`burrow --version: burrow ${VERSION} (test ${target})`);
        expect(r.stdout).toContain(`checksum ok: sha256 ${sha256(fakeBinary(target!))}`);
        expect(requests).toEqual(["SHA256SUMS", file!]);
        expect(leftovers(c)).toEqual([]);
        expect(existsSync(join(c.home, ".local"))).toBe(false);
      },
      TEST_LIMIT_MS,
    );

    test(
      "a binary that differs from SHA256SUMS is refused: checksum mismatch, non-zero exit, nothing installed, nothing left behind",
      async () => {
        using c = newCase();
        const file = binaryName("linux-x64");
        const tampered = fakeBinary("linux-x64") + "# tampered\n";
        files.set(file, tampered);
        const r = await install(c, { BURROW_TARGET: "linux-x64" });
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain(
          `burrow-install: error: checksum mismatch for ${file}: expected ${sha256(fakeBinary("linux-x64"))}, got ${sha256(tampered)}; not installed`,
        );
        expect(existsSync(c.installDir)).toBe(false);
        expect(leftovers(c)).toEqual([]);
      },
      TEST_LIMIT_MS,
    );

    test(
      "a tampered download leaves the burrow already installed untouched",
      async () => {
        using c = newCase();
        mkdirSync(c.installDir);
        writeFileSync(installed(c), "#!/bin/sh\necho old\n", { mode: 0o755 });
        files.set(binaryName("linux-x64"), "#!/bin/sh\necho evil\n");
        const r = await install(c, { BURROW_TARGET: "linux-x64" });
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("checksum mismatch");
        expect(readFileSync(installed(c), "utf8")).toBe("#!/bin/sh\necho old\n");
        expect(readdirSync(c.installDir)).toEqual(["burrow"]);
        expect(leftovers(c)).toEqual([]);
      },
      TEST_LIMIT_MS,
    );

    test(
      "without SHA256SUMS (404) it refuses before downloading the binary",
      async () => {
        using c = newCase();
        files.delete("SHA256SUMS");
        const r = await install(c, { BURROW_TARGET: "linux-x64" });
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain(`burrow-install: error: cannot download ${BASE}/SHA256SUMS, which is needed to verify the download; nothing installed`);
        expect(requests).toEqual(["SHA256SUMS"]);
        expect(existsSync(c.installDir)).toBe(false);
        expect(leftovers(c)).toEqual([]);
      },
      TEST_LIMIT_MS,
    );

    test(
      "BURROW_TARGET picks that build (linux-arm64-musl) without detecting",
      async () => {
        using c = newCase();
        const r = await install(c, { BURROW_TARGET: "linux-arm64-musl" });
        expect(r.code).toBe(0);
        expect(requests).toEqual(["SHA256SUMS", binaryName("linux-arm64-musl")]);
        expect(readFileSync(installed(c), "utf8")).toBe(fakeBinary("linux-arm64-musl"));
        expect(r.stdout).toContain(`burrow --version: burrow ${VERSION} (test linux-arm64-musl)`);
      },
      TEST_LIMIT_MS,
    );

    test(
      "an unknown BURROW_TARGET is refused with the list of builds; windows-x64 gets the by-hand advice",
      async () => {
        using c = newCase();
        const odd = await install(c, { BURROW_TARGET: "linux-riscv64" });
        expect(odd.code).not.toBe(0);
        expect(odd.stderr).toContain(`BURROW_TARGET 'linux-riscv64' is not a build this script installs (one of: ${RAW_TARGETS.join(" ")})`);
        const windows = await install(c, { BURROW_TARGET: "windows-x64" });
        expect(windows.code).not.toBe(0);
        expect(windows.stderr).toContain("burrow-<version>-windows-x64.exe");
        expect(requests).toEqual([]);
      },
      TEST_LIMIT_MS,
    );

    test(
      "an unsupported CPU (uname -m says riscv64) is a clear error before any download",
      async () => {
        using c = newCase();
        const r = await install(c, { PATH: fakeTools(c, { uname: fakeUname("Linux", "riscv64") }) });
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain(
          "burrow-install: error: unsupported CPU architecture 'riscv64': burrow is built for x86_64 (x64) and aarch64 (arm64) only",
        );
        expect(requests).toEqual([]);
        expect(existsSync(c.installDir)).toBe(false);
      },
      TEST_LIMIT_MS,
    );

    test(
      "on Windows (MINGW, MSYS, Cygwin) it says which .exe to download by hand and from where, and exits non-zero",
      async () => {
        using c = newCase();
        for (const os of ["MINGW64_NT-10.0-19045", "MSYS_NT-10.0", "CYGWIN_NT-10.0"]) {
          const r = await install(c, { PATH: fakeTools(c, { uname: fakeUname(os, "x86_64") }) });
          expect(r.code).not.toBe(0);
          expect(r.stderr).toContain("burrow-<version>-windows-x64.exe");
          expect(r.stderr).toContain(`${BASE}/`);
        }
        expect(requests).toEqual([]);
      },
      TEST_LIMIT_MS,
    );

    test(
      "detects musl from ldd (Alpine), and arm64 under Rosetta on macOS",
      async () => {
        using c = newCase();
        const musl = await install(c, {
          PATH: fakeTools(c, { uname: fakeUname("Linux", "x86_64"), ldd: "echo 'musl libc (x86_64)' >&2; echo 'Version 1.2.4' >&2; exit 1" }),
        });
        expect(musl.code).toBe(0);
        expect(requests).toEqual(["SHA256SUMS", binaryName("linux-x64-musl")]);
        expect(readFileSync(installed(c), "utf8")).toBe(fakeBinary("linux-x64-musl"));

        requests = [];
        const glibc = await install(c, {
          PATH: fakeTools(c, { uname: fakeUname("Linux", "aarch64"), ldd: "echo 'ldd (GNU libc) 2.36'" }),
        });
        expect(glibc.code).toBe(0);
        expect(requests).toEqual(["SHA256SUMS", binaryName("linux-arm64")]);

        requests = [];
        const rosetta = await install(c, {
          PATH: fakeTools(c, { uname: fakeUname("Darwin", "x86_64"), sysctl: `[ "$2" = sysctl.proc_translated ] && echo 1` }),
        });
        expect(rosetta.code).toBe(0);
        expect(requests).toEqual(["SHA256SUMS", binaryName("darwin-arm64")]);
      },
      TEST_LIMIT_MS,
    );

    test(
      "BURROW_VERSION picks among versions; without it, two versions for one target is an error that says so",
      async () => {
        using c = newCase();
        const older = binaryName("linux-x64", "0.0.9");
        files.set(older, fakeBinary("linux-x64", "0.0.9"));
        files.set("SHA256SUMS", sha256sums(new Map([...files].filter(([n]) => n !== "SHA256SUMS"))));
        const both = await install(c, { BURROW_TARGET: "linux-x64" });
        expect(both.code).not.toBe(0);
        expect(both.stderr).toContain("lists several builds for linux-x64; set BURROW_VERSION to pick one");

        const pinned = await install(c, { BURROW_TARGET: "linux-x64", BURROW_VERSION: "v0.0.9" });
        expect(pinned.code).toBe(0);
        expect(pinned.stdout).toContain(`installed ${older} (version 0.0.9)`);
        expect(readFileSync(installed(c), "utf8")).toBe(fakeBinary("linux-x64", "0.0.9"));

        const missing = await install(c, { BURROW_TARGET: "linux-x64", BURROW_VERSION: "9.9.9" });
        expect(missing.code).not.toBe(0);
        expect(missing.stderr).toContain(`lists no burrow-9.9.9-linux-x64 (it lists: `);
      },
      TEST_LIMIT_MS,
    );

    test(
      "a build that passes its checksum but does not run is not installed, and the old one stays",
      async () => {
        using c = newCase();
        mkdirSync(c.installDir);
        writeFileSync(installed(c), "#!/bin/sh\necho old\n", { mode: 0o755 });
        const broken = "#!/bin/sh\necho 'cannot execute binary file: Exec format error' >&2\nexit 126\n";
        files.set(binaryName("linux-x64"), broken);
        files.set("SHA256SUMS", sha256sums(new Map([...files].filter(([n]) => n !== "SHA256SUMS"))));
        const r = await install(c, { BURROW_TARGET: "linux-x64" });
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain(
          `${binaryName("linux-x64")} passed its checksum but does not run on this machine ('burrow --version' failed: cannot execute binary file: Exec format error); not installed`,
        );
        expect(readFileSync(installed(c), "utf8")).toBe("#!/bin/sh\necho old\n");
        expect(leftovers(c)).toEqual([]);
      },
      TEST_LIMIT_MS,
    );

    test(
      "an install dir off PATH gets the line to add; on PATH, no warning",
      async () => {
        using c = newCase();
        const off = await install(c, { BURROW_TARGET: "linux-x64" });
        expect(off.code).toBe(0);
        expect(off.stderr).toContain(`burrow-install: warning: ${c.installDir} is not on your PATH`);
        expect(off.stderr).toContain(`  export PATH="${c.installDir}:$PATH"`);
        const on = await install(c, { BURROW_TARGET: "linux-x64", PATH: `${c.installDir}:${process.env.PATH}` });
        expect(on.code).toBe(0);
        expect(on.stderr).toBe("");
      },
      TEST_LIMIT_MS,
    );

    test(
      "SIGTERM during the download removes the temp files and installs nothing",
      async () => {
        using c = newCase();
        const arrived = deferred();
        const open = deferred();
        gate = { name: binaryName("linux-x64"), arrived: arrived.resolve, open: open.promise };
        const proc = start([...shell, SCRIPT], envFor(c, { BURROW_TARGET: "linux-x64" }), c.root);
        const done = finish(proc);
        try {
          await within(arrived.promise, 10_000, "the binary's download to start");
          expect(readdirSync(c.tmp).length).toBe(1); // the script's temp dir, while it works
          proc.kill("SIGTERM");
        } finally {
          open.resolve(); // the shell runs its trap once the download returns
        }
        const r = await done;
        expect(r.code).toBe(143);
        expect(existsSync(c.installDir)).toBe(false);
        expect(leftovers(c)).toEqual([]);
      },
      TEST_LIMIT_MS,
    );

    test.skipIf(!Bun.which("wget"))(
      "uses wget when there is no curl",
      async () => {
        using c = newCase();
        const r = await install(c, { BURROW_TARGET: "linux-x64", PATH: pathWithout(c, ["curl"]) });
        expect(r.code).toBe(0);
        expect(readFileSync(installed(c), "utf8")).toBe(fakeBinary("linux-x64"));
      },
      TEST_LIMIT_MS,
    );

    test(
      "uses shasum -a 256 without sha256sum, and refuses to install unverified without either",
      async () => {
        using c = newCase();
        if (Bun.which("shasum")) {
          const r = await install(c, { BURROW_TARGET: "linux-x64", PATH: pathWithout(c, ["sha256sum"]) });
          expect(r.code).toBe(0);
          expect(r.stdout).toContain("checksum ok");
          rmSync(join(c.root, "path without"), { recursive: true });
          rmSync(installed(c));
        }
        requests = [];
        const r = await install(c, { BURROW_TARGET: "linux-x64", PATH: pathWithout(c, ["sha256sum", "shasum"]) });
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("needs sha256sum or shasum to verify the download, and will not install it unverified");
        expect(requests).toEqual([]);
        expect(existsSync(installed(c))).toBe(false);
      },
      TEST_LIMIT_MS,
    );
  });
}

// --- where it installs without BURROW_INSTALL_DIR -------------------------------------

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;
const setpriv = Bun.which("setpriv");
/** Runs `command` as a user who cannot write /usr/local/bin: ourselves, or (as root) nobody. */
const asUnprivileged = (command: string[]) => (isRoot ? [setpriv!, `--reuid=${NOBODY}`, `--regid=${NOBODY}`, "--clear-groups", ...command] : command);

function systemDirWritableForUs(): boolean {
  if (isRoot) {
    if (!setpriv) return true; // cannot drop privileges: treat as writable, skip
    return Bun.spawnSync(asUnprivileged(["/bin/sh", "-c", `test -w ${SYSTEM_DIR}`])).exitCode === 0;
  }
  try {
    accessSync(SYSTEM_DIR, constants.W_OK);
    return true;
  } catch {
    return false;
  }
}

// --- a signed release: the key written into install.sh, SHA256SUMS.minisig beside SHA256SUMS ----------

/** A minisign key pair made here (Ed25519 from node:crypto), the release's key for these tests. */
function releaseKey(): SecretKey {
  const { privateKey, publicKey } = generateKeyPairSync("ed25519");
  const seed = privateKey.export({ format: "der", type: "pkcs8" }).subarray(-32);
  const pk = publicKey.export({ format: "der", type: "spki" }).subarray(-32);
  return { keyId: new Uint8Array(randomBytes(8)), seed: new Uint8Array(seed), publicKey: new Uint8Array(pk) };
}
const KEY = releaseKey();
const SIGNED_DIR = mkdtempSync(join(tmpdir(), "burrow-signed-installer-"));
const SIGNED_SCRIPT = join(SIGNED_DIR, "install.sh");
writeFileSync(SIGNED_SCRIPT, withReleaseKey(readFileSync(SCRIPT, "utf8"), publicKeyFile(KEY).split("\n")[1]!));
afterAll(() => rmSync(SIGNED_DIR, { recursive: true, force: true }));
const signedRelease = (sums = RELEASE.get("SHA256SUMS") as string) => {
  files.set("SHA256SUMS", sums);
  files.set("SHA256SUMS.minisig", signFile(KEY, Buffer.from(RELEASE.get("SHA256SUMS") as string), `burrow ${VERSION} SHA256SUMS`));
};
const opensslCanVerify = Bun.spawnSync(["sh", "-c", "openssl pkeyutl -help 2>&1 | grep -q rawin && openssl dgst -blake2b512 </dev/null >/dev/null 2>&1"]).exitCode === 0;
const minisignHere = Bun.which("minisign");

for (const shell of shells) {
  const install = (c: Case, extra: Record<string, string | undefined> = {}) => finish(start([...shell, SIGNED_SCRIPT], envFor(c, { BURROW_TARGET: "linux-x64", ...extra }), c.root));
  /** Checkers in turn: minisign when it is here, then openssl alone (a PATH without minisign). */
  const checkers: [string, (c: Case) => Record<string, string>][] = [
    ...(minisignHere ? ([["minisign", () => ({})]] as [string, (c: Case) => Record<string, string>][]) : []),
    ...(opensslCanVerify ? ([["openssl", (c: Case) => ({ PATH: pathWithout(c, ["minisign"]) })]] as [string, (c: Case) => Record<string, string>][]) : []),
  ];

  describe(`a signed release, install.sh under ${shell.join(" ")}`, () => {
    for (const [checker, env] of checkers) {
      test(`${checker}: the signature verifies, then the checksum, then it installs`, async () => {
        using c = newCase();
        signedRelease();
        const r = await install(c, env(c));
        expect(r.code).toBe(0);
        expect(r.stderr).not.toMatch(/error|signature|UNVERIFIED/);
        expect(r.stdout).toContain(`signature ok: SHA256SUMS is signed by the release key (${checker})`);
        expect(requests).toEqual(["SHA256SUMS", "SHA256SUMS.minisig", binaryName("linux-x64")]);
        expect(readFileSync(installed(c), "utf8")).toBe(fakeBinary("linux-x64"));
        expect(leftovers(c)).toEqual([]);
      }, TEST_LIMIT_MS);

      test(`${checker}: one byte of SHA256SUMS changed (a binary swapped with its line): refused, nothing installed`, async () => {
        using c = newCase();
        const evil = fakeBinary("linux-x64") + "# evil\n";
        files.set(binaryName("linux-x64"), evil);
        const sums = (RELEASE.get("SHA256SUMS") as string).replace(sha256(fakeBinary("linux-x64")), sha256(evil));
        signedRelease(sums);
        const r = await install(c, env(c));
        expect(r.code).not.toBe(0);
        expect(r.stderr).toContain("SHA256SUMS's signature does not verify with the release key");
        expect(requests).not.toContain(binaryName("linux-x64"));
        expect(existsSync(c.installDir)).toBe(false);
        expect(leftovers(c)).toEqual([]);
      }, TEST_LIMIT_MS);
    }

    test("no SHA256SUMS.minisig: refused as unsigned; BURROW_INSTALL_INSECURE=1 installs, saying UNVERIFIED", async () => {
      using c = newCase();
      const r = await install(c);
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("has no SHA256SUMS.minisig: it is not signed; nothing installed");
      expect(existsSync(c.installDir)).toBe(false);
      const anyway = await install(c, { BURROW_INSTALL_INSECURE: "1" });
      expect(anyway.code).toBe(0);
      expect(anyway.stderr).toContain("BURROW_INSTALL_INSECURE=1: installing anyway, UNVERIFIED");
      expect(readFileSync(installed(c), "utf8")).toBe(fakeBinary("linux-x64"));
    }, TEST_LIMIT_MS);

    test("neither minisign nor openssl to check with: refused, saying what to install", async () => {
      using c = newCase();
      signedRelease();
      const r = await install(c, { PATH: pathWithout(c, ["minisign", "openssl"]) });
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain("cannot check SHA256SUMS's signature here: install minisign, or openssl 3");
      expect(existsSync(c.installDir)).toBe(false);
    }, TEST_LIMIT_MS);
  });
}

describe("install dir", () => {
  // never run the default where it could write to /usr/local/bin
  test.skipIf(systemDirWritableForUs())(
    "without BURROW_INSTALL_DIR, a user who cannot write /usr/local/bin gets ~/.local/bin (created) and the PATH line for it",
    async () => {
      using c = newCase();
      const script = join(c.root, "install.sh");
      copyFileSync(SCRIPT, script);
      if (isRoot) {
        chmodSync(c.root, 0o755);
        chmodSync(script, 0o644);
        chownSync(c.home, NOBODY, NOBODY);
        chownSync(c.tmp, NOBODY, NOBODY);
      }
      const env = envFor(c, { BURROW_INSTALL_DIR: undefined, BURROW_TARGET: "linux-x64" });
      const r = await finish(start(asUnprivileged([Bun.which("sh")!, script]), env, c.root));
      expect(r.code).toBe(0);
      const local = join(c.home, ".local", "bin", "burrow");
      expect(readFileSync(local, "utf8")).toBe(fakeBinary("linux-x64"));
      expect(statSync(local).mode & 0o777).toBe(0o755);
      expect(r.stdout).toContain(`as ${local}`);
      expect(r.stderr).toContain(`  export PATH="$HOME/.local/bin:$PATH"`);
      expect(readdirSync(c.tmp)).toEqual([]);
    },
    TEST_LIMIT_MS,
  );

  test(
    "BURROW_INSTALL_DIR wins over /usr/local/bin, even for root, and is created when missing",
    async () => {
      using c = newCase();
      const dir = join(c.root, "a", "new dir");
      const r = await finish(start([Bun.which("sh")!, SCRIPT], envFor(c, { BURROW_INSTALL_DIR: dir, BURROW_TARGET: "linux-x64" }), c.root));
      expect(r.code).toBe(0);
      expect(r.stdout).toContain(`as ${dir}/burrow`);
      expect(readFileSync(join(dir, "burrow"), "utf8")).toBe(fakeBinary("linux-x64"));
      expect(existsSync(join(c.home, ".local"))).toBe(false);
    },
    TEST_LIMIT_MS,
  );

  test(
    "a relative BURROW_INSTALL_DIR is taken from the current dir; one that is a file is refused before any download",
    async () => {
      using c = newCase();
      const sh = Bun.which("sh")!;
      const rel = await finish(start([sh, SCRIPT], envFor(c, { BURROW_INSTALL_DIR: "rel dir", BURROW_TARGET: "linux-x64" }), c.root));
      expect(rel.code).toBe(0);
      expect(rel.stdout).toContain(`as ${join(c.root, "rel dir", "burrow")}`);
      expect(existsSync(join(c.root, "rel dir", "burrow"))).toBe(true);

      requests = [];
      const file = join(c.root, "a file");
      writeFileSync(file, "");
      const r = await finish(start([sh, SCRIPT], envFor(c, { BURROW_INSTALL_DIR: file, BURROW_TARGET: "linux-x64" }), c.root));
      expect(r.code).not.toBe(0);
      expect(r.stderr).toContain(`burrow-install: error: ${file} is not a directory`);
      expect(requests).toEqual([]);
    },
    TEST_LIMIT_MS,
  );

  test("no test wrote to /usr/local/bin", () => {
    expect(statOrNull(join(SYSTEM_DIR, "burrow"))).toBe(systemBefore);
  });
});
