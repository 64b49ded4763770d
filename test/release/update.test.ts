/**
 * `burrow update` from one build to a newer one, as a user runs it: an
 * executable built with a release key (made by Debian's `minisign -G -W`),
 * and a newer release made by `npm run release` from a copy of the source
 * whose package.json says the next version. Then everything it must refuse,
 * each time with the installed executable byte for byte as it was: a
 * changed download, a changed SHA256SUMS, no signature, another key's
 * signature, a download cut short, a release without this platform's build
 * or with another platform's build under its name, an older release, a
 * folder it may not write to, a build without a key, a run from source.
 * And the server's daily look, which logs a newer release and sends
 * nothing but two GETs.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Socket } from "bun";
import { chmodSync, chownSync, copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from "node:fs";
import { createHash } from "node:crypto";
import { join } from "node:path";
import { aptInstall } from "../harness/debian-packages.ts";
import { startServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import pkg from "../../package.json";

const root = join(import.meta.dir, "..", "..");
if (!Bun.which("minisign")) aptInstall(["minisign"], "burrow update tests");
const minisign = Bun.which("minisign");

const OLD = pkg.version;
const NEW = OLD.replace(/(\d+)$/, (n) => String(Number(n) + 1));
const TARGET = `${process.platform}-${process.arch}`;
const NO_KEY_ENV = { BURROW_SIGNING_KEY_FILE: "", BURROW_SIGNING_KEY: "", BURROW_SIGNING_PUBLIC_KEY_FILE: "" };

/** Everything lies here, readable by the user `nobody` too (the write-permission case runs as them); removed after the file. */
let work: string;
let keys: string;
/** The executable built with the release key, at the old version. */
let oldBuild: string;
/** A signed release of the new version, as npm run release writes it. */
let newRelease: string;
/** A signed release of the old version, made by hand with minisign -S. */
let oldRelease: string;

function run(cmd: string[], opts: { cwd?: string; env?: Record<string, string> } = {}) {
  const p = Bun.spawnSync(cmd, { cwd: opts.cwd ?? work, env: { ...process.env, ...opts.env }, stdout: "pipe", stderr: "pipe", stdin: "ignore" });
  return { code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

/** Runs burrow without blocking this process's event loop (the tests' own HTTP servers must answer meanwhile). */
async function burrow(exe: string, ...args: string[]): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn([exe, ...args], { cwd: work, stdout: "pipe", stderr: "pipe", stdin: "ignore", env: { ...process.env, BURROW_UPDATE_CHECK: "off" } });
  const timer = setTimeout(() => p.kill("SIGKILL"), 120_000);
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  return { code, out, err };
}

const sha256 = (path: string) => createHash("sha256").update(readFileSync(path)).digest("hex");

/** A copy of the source whose package.json says `version` (node_modules shared by a link). */
function sourceAt(version: string): string {
  const dir = join(work, `source-${version}`);
  mkdirSync(dir);
  for (const name of ["src", "build", "drizzle", "package.json", "package-lock.json", "tsconfig.json", "install.sh"]) cpSync(join(root, name), join(dir, name), { recursive: true });
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"));
  const json = JSON.parse(readFileSync(join(dir, "package.json"), "utf8"));
  writeFileSync(join(dir, "package.json"), JSON.stringify({ ...json, version }, null, 2));
  return dir;
}

/** A directory holding `files` (name → path to copy) and their SHA256SUMS, signed by `key` with minisign -S. */
function handMadeRelease(name: string, files: Record<string, string>, key = join(keys, "burrow.key"), restyle = (text: string) => text): string {
  const dir = join(work, name);
  mkdirSync(dir);
  for (const [file, from] of Object.entries(files)) copyFileSync(from, join(dir, file));
  writeFileSync(join(dir, "SHA256SUMS"), restyle(Object.keys(files).map((file) => `${sha256(join(dir, file))}  ${file}\n`).join("")));
  const signed = run([minisign!, "-S", "-s", key, "-m", "SHA256SUMS", "-t", `burrow ${name} SHA256SUMS`], { cwd: dir });
  if (signed.code !== 0) throw new Error(`minisign -S: ${signed.err}`);
  openToAll(dir);
  return dir;
}

/** Modes that let another user read `dir` and run what is in it (mkdtemp makes 0700). */
function openToAll(dir: string): void {
  chmodSync(dir, 0o755);
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) openToAll(path);
    else if (!entry.isSymbolicLink()) chmodSync(path, 0o755);
  }
}

/** A fresh install of `build` alone in a directory of its own: the executable `burrow update` replaces. */
function installed(build = oldBuild): { dir: string; exe: string } {
  const dir = mkdtempSync(join(work, "bin-"));
  chmodSync(dir, 0o755);
  const exe = join(dir, "burrow");
  copyFileSync(build, exe);
  chmodSync(exe, 0o755);
  return { dir, exe };
}

describe.skipIf(!minisign || process.platform !== "linux")("burrow update", () => {
  beforeAll(() => {
    // under /tmp itself, not the test file's scratch dir (0700): the user nobody must reach it
    work = mkdtempSync("/tmp/burrow-update-test-");
    chmodSync(work, 0o755);
    keys = join(work, "keys");
    mkdirSync(keys);
    for (const name of ["burrow", "other"]) {
      const made = run([minisign!, "-G", "-W", "-p", `${name}.pub`, "-s", `${name}.key`], { cwd: keys });
      if (made.code !== 0) throw new Error(`minisign -G: ${made.err}`);
    }
    const keyEnv = { ...NO_KEY_ENV, BURROW_SIGNING_KEY_FILE: join(keys, "burrow.key"), BURROW_SIGNING_PUBLIC_KEY_FILE: join(keys, "burrow.pub") };
    oldBuild = join(work, "old", "burrow");
    mkdirSync(join(work, "old"));
    const compiled = run([process.execPath, join(root, "build", "compile.ts"), "--no-bytecode", "--outfile", oldBuild], { cwd: root, env: keyEnv });
    if (compiled.code !== 0) throw new Error(`compile: ${compiled.err}`);
    newRelease = join(work, "release-new");
    const released = run([process.execPath, join("build", "release.ts"), "--only", TARGET, "--no-bytecode", "--no-packages", "--no-images", "--outdir", newRelease], { cwd: sourceAt(NEW), env: keyEnv });
    if (released.code !== 0) throw new Error(`release: ${released.err}`);
    oldRelease = handMadeRelease("release-old", { [`burrow-${OLD}-${TARGET}`]: oldBuild });
    openToAll(work);
  }, 240_000);
  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test("the build says which release key it carries", async () => {
    const said = await burrow(oldBuild, "version");
    const id = run([minisign!, "-V", "-p", join(keys, "burrow.pub"), "-m", join(newRelease, "SHA256SUMS")]);
    expect(id.code).toBe(0);
    expect(said.out).toContain(`burrow ${OLD}\n`);
    expect(said.out).toMatch(/\nkey +[0-9A-F]{1,16} \(burrow update checks releases with it\)\n$/);
    expect(readFileSync(join(newRelease, "burrow.pub"), "utf8")).toContain(said.out.match(/key +([0-9A-F]+)/)![1]!);
  });

  test("the release's own install.sh installs from it as a local mirror, and refuses it after one byte of the executable or of SHA256SUMS changes", () => {
    const installer = (base: string) => {
      const into = mkdtempSync(join(work, "installed-"));
      const got = run(["sh", join(newRelease, "install.sh")], { env: { BURROW_DOWNLOAD_BASE: `file://${base}`, BURROW_INSTALL_DIR: into, BURROW_VERSION: "", BURROW_TARGET: "", BURROW_INSTALL_INSECURE: "" } });
      return { ...got, into };
    };
    const good = installer(newRelease);
    expect(good.out).toContain("signature ok");
    expect(good.code).toBe(0);
    expect(sha256(join(good.into, "burrow"))).toBe(sha256(join(newRelease, exeName())));

    const changedExe = join(work, "mirror-changed-exe");
    cpSync(newRelease, changedExe, { recursive: true });
    flipByte(join(changedExe, exeName()));
    const refusedExe = installer(changedExe);
    expect(refusedExe.code).not.toBe(0);
    expect(refusedExe.err).toContain("checksum mismatch");
    expect(readdirSync(refusedExe.into)).toEqual([]);

    const changedSums = join(work, "mirror-changed-sums");
    cpSync(newRelease, changedSums, { recursive: true });
    const sums = readFileSync(join(changedSums, "SHA256SUMS"));
    sums[0] = sums[0] === 0x61 ? 0x62 : 0x61; // the first hash's first digit
    writeFileSync(join(changedSums, "SHA256SUMS"), sums);
    const refusedSums = installer(changedSums);
    expect(refusedSums.code).not.toBe(0);
    expect(refusedSums.err).toContain("signature does not verify");
    expect(readdirSync(refusedSums.into)).toEqual([]);
  });

  test("--check: exit 100 when the release is newer, 0 once it is installed", async () => {
    const { exe } = installed();
    const check = await burrow(exe, "update", "--check", "--from", newRelease);
    expect(check.code).toBe(100);
    expect(check.out).toContain(`burrow ${NEW} is out (this is ${OLD})`);
    const same = await burrow(exe, "update", "--check", "--from", oldRelease);
    expect(same.code).toBe(0);
    expect(same.out).toContain(`burrow ${OLD} is the newest release`);
  });

  test("update: old → new in place, the old kept as burrow.old; again: nothing to do; --rollback and back", async () => {
    const { dir, exe } = installed();
    const oldHash = sha256(exe);
    const updated = await burrow(exe, "update", "--from", newRelease);
    expect(updated.err).toBe("");
    expect(updated.code).toBe(0);
    expect(updated.out).toContain(`burrow ${OLD} → ${NEW}`);
    expect(updated.out).toContain(`kept as ${exe}.old`);
    expect(updated.out).toContain("goes on with the old version until it is restarted");
    expect(sha256(exe)).toBe(sha256(join(newRelease, `burrow-${NEW}-${TARGET}`)));
    expect(sha256(`${exe}.old`)).toBe(oldHash);
    expect((await burrow(exe, "version")).out).toStartWith(`burrow ${NEW}\n`);
    // nothing left beside it but the two
    expect(readdirSync(dir).sort()).toEqual(["burrow", "burrow.old"]);

    const again = await burrow(exe, "update", "--from", newRelease);
    expect(again.code).toBe(0);
    expect(again.out).toContain(`burrow ${NEW} is installed already`);

    const back = await burrow(exe, "update", "--rollback");
    expect(back.code).toBe(0);
    expect(back.out).toContain(`burrow ${NEW} → ${OLD}`);
    expect(sha256(exe)).toBe(oldHash);
    expect((await burrow(exe, "version")).out).toStartWith(`burrow ${OLD}\n`);
    const forth = await burrow(exe, "update", "--rollback");
    expect(forth.code).toBe(0);
    expect((await burrow(exe, "version")).out).toStartWith(`burrow ${NEW}\n`);
    expect(readdirSync(dir).sort()).toEqual(["burrow", "burrow.old"]);
  });

  test("an older release is refused unless --version names it", async () => {
    const { exe } = installed(join(newRelease, `burrow-${NEW}-${TARGET}`));
    const refused = await burrow(exe, "update", "--from", oldRelease);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain(`is ${OLD}, older than this ${NEW}`);
    expect(refused.err).toContain("[NOT_NEWER]");
    expect((await burrow(exe, "version")).out).toStartWith(`burrow ${NEW}\n`);
    const named = await burrow(exe, "update", "--from", oldRelease, "--version", OLD);
    expect(named.code).toBe(0);
    expect(named.out).toContain(`burrow ${NEW} → ${OLD}`);
    const absent = await burrow(exe, "update", "--from", oldRelease, "--version", "9.9.9");
    expect(absent.code).toBe(1);
    expect(absent.err).toContain("[VERSION_NOT_THERE]");
  });

  /** A copy of the new release with `change` made to it; the update must refuse it with `code`, leaving the executable as it was. */
  async function refusedRelease(name: string, change: (dir: string) => void, code: string, words: string): Promise<void> {
    const dir = join(work, name);
    cpSync(newRelease, dir, { recursive: true });
    change(dir);
    const { dir: bin, exe } = installed();
    const before = sha256(exe);
    const got = await burrow(exe, "update", "--from", dir);
    expect(got.err).toContain(words);
    expect(got.err).toContain(`[${code}]`);
    expect(got.code).toBe(1);
    expect(sha256(exe)).toBe(before);
    expect(readdirSync(bin)).toEqual(["burrow"]); // no download left behind, no burrow.old
  }

  const exeName = () => `burrow-${NEW}-${TARGET}`;
  const flipByte = (path: string) => {
    const bytes = readFileSync(path);
    bytes[bytes.length >> 1]! ^= 1;
    writeFileSync(path, bytes);
  };

  test("a changed executable is refused: it is not the file the signed SHA256SUMS lists", async () => {
    await refusedRelease("tampered-exe", (dir) => flipByte(join(dir, exeName())), "CHECKSUM_MISMATCH", "is not the file the signed SHA256SUMS lists");
  });

  test("a changed SHA256SUMS (naming the changed executable) is refused: its signature does not verify", async () => {
    await refusedRelease(
      "tampered-sums",
      (dir) => {
        flipByte(join(dir, exeName()));
        const sums = readFileSync(join(dir, "SHA256SUMS"), "utf8");
        const line = sums.split("\n").find((l) => l.endsWith(`  ${exeName()}`))!;
        writeFileSync(join(dir, "SHA256SUMS"), sums.replace(line, `${sha256(join(dir, exeName()))}  ${exeName()}`));
      },
      "BAD_SIGNATURE",
      "the signature does not verify",
    );
  });

  test("a release without a signature, or signed with another key, is refused", async () => {
    await refusedRelease("unsigned", (dir) => rmSync(join(dir, "SHA256SUMS.minisig")), "BAD_SIGNATURE", "is not signed");
    await refusedRelease(
      "other-key",
      (dir) => {
        rmSync(join(dir, "SHA256SUMS.minisig"));
        expect(run([minisign!, "-S", "-s", join(keys, "other.key"), "-m", "SHA256SUMS"], { cwd: dir }).code).toBe(0);
      },
      "BAD_SIGNATURE",
      "made with another key",
    );
  });

  test("a release without this platform's build, or with another platform's build under its name, is refused", async () => {
    const noBuild = handMadeRelease("darwin-only", { [`burrow-${NEW}-darwin-arm64`]: join(newRelease, exeName()) });
    const { exe } = installed();
    const none = await burrow(exe, "update", "--from", noBuild);
    expect(none.code).toBe(1);
    expect(none.err).toContain(`has no executable for ${TARGET} (it has darwin-arm64)`);
    expect(none.err).toContain("[NO_BUILD]");

    // the other architecture's real build, listed and signed as this one's
    const otherArch = process.arch === "x64" ? "linux-arm64" : "linux-x64";
    const foreign = join(work, "foreign", "burrow");
    mkdirSync(join(work, "foreign"));
    const built = run([process.execPath, join("build", "compile.ts"), "--target", otherArch, "--no-bytecode", "--outfile", foreign], { cwd: join(work, `source-${NEW}`), env: NO_KEY_ENV });
    expect(built.code).toBe(0);
    const mislabelled = handMadeRelease("mislabelled", { [exeName()]: foreign });
    const before = sha256(exe);
    const refused = await burrow(exe, "update", "--from", mislabelled);
    expect(refused.code).toBe(1);
    expect(refused.err).toContain("[DOES_NOT_RUN]"); // it does not start here, or (under binfmt's qemu) says it is for otherArch
    expect(sha256(exe)).toBe(before);
  }, 120_000);

  test("no permission to write beside the executable: refused before anything is downloaded", async () => {
    const { dir, exe } = installed();
    const before = sha256(exe);
    let got: { code: number; out: string; err: string };
    if (process.getuid?.() === 0) {
      // root writes anywhere: run it as nobody, who may run the executable but not change its folder
      got = await burrow("/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", exe, "update", "--from", newRelease);
    } else {
      chmodSync(dir, 0o555);
      got = await burrow(exe, "update", "--from", newRelease);
      chmodSync(dir, 0o755);
    }
    expect(got.code).toBe(1);
    expect(got.err).toContain(`cannot write beside ${exe} (permission denied)`);
    expect(got.err).toContain("[NOT_WRITABLE]");
    expect(sha256(exe)).toBe(before);
    expect(readdirSync(dir)).toEqual(["burrow"]);
  });

  test("a SHA256SUMS written on Windows (CRLF, upper-case hashes) is read as sha256sum reads it", async () => {
    const dir = handMadeRelease("crlf", { [exeName()]: join(newRelease, exeName()) }, undefined, (text) => text.replace(/^[0-9a-f]{64}/gm, (hash) => hash.toUpperCase()).replace(/\n/g, "\r\n"));
    expect(readFileSync(join(dir, "SHA256SUMS"), "utf8")).toMatch(/^[0-9A-F]{64}  burrow-\S+\r\n$/);
    const { exe } = installed();
    const got = await burrow(exe, "update", "--from", dir);
    expect(got.err).toBe("");
    expect(got.code).toBe(0);
    expect((await burrow(exe, "version")).out).toStartWith(`burrow ${NEW}\n`);
  });

  test("one update at a time: a live update's lock refuses a second; a killed one's is taken over", async () => {
    const { dir, exe } = installed();
    writeFileSync(join(dir, ".burrow.update-lock"), `${process.pid}\n`);
    const busy = await burrow(exe, "update", "--from", newRelease);
    expect(busy.code).toBe(1);
    expect(busy.err).toContain(`another burrow update (pid ${process.pid}) is at work on ${exe}`);
    expect(busy.err).toContain("[IN_PROGRESS]");
    expect((await burrow(exe, "update", "--rollback")).err).toContain("[IN_PROGRESS]");
    writeFileSync(join(dir, ".burrow.update-lock"), `${Bun.spawnSync(["true"]).pid}\n`);
    const taken = await burrow(exe, "update", "--from", newRelease);
    expect(taken.code).toBe(0);
    expect(readdirSync(dir).sort()).toEqual(["burrow", "burrow.old"]);
  });

  test.skipIf(process.getuid?.() !== 0)("as root, the new executable keeps the old one's owner, group and mode (a service's user may still run it)", async () => {
    const { exe } = installed();
    chownSync(exe, 65534, 65534);
    chmodSync(exe, 0o750);
    const got = await burrow(exe, "update", "--from", newRelease);
    expect(got.code).toBe(0);
    const now = statSync(exe);
    expect([now.uid, now.gid, now.mode & 0o7777]).toEqual([65534, 65534, 0o750]);
  });

  test("a download an earlier update left when it was killed is swept away; a live one's is not", async () => {
    const { dir, exe } = installed();
    const gone = Bun.spawnSync(["true"]).pid; // a process that has exited
    writeFileSync(join(dir, `.burrow.update-${gone}`), "half a download");
    writeFileSync(join(dir, `.burrow.update-${process.pid}`), "this test's own: alive");
    const got = await burrow(exe, "update", "--from", newRelease);
    expect(got.code).toBe(0);
    expect(readdirSync(dir).sort()).toEqual([`.burrow.update-${process.pid}`, "burrow", "burrow.old"]);
  });

  /** Root, or a user namespace of our own, may mount a small tmpfs: a disk that fills up. */
  const mountPrefix = process.getuid?.() === 0 ? ["unshare", "-m"] : ["unshare", "-Urm"];
  const canMount = process.platform === "linux" && Bun.which("unshare") !== null && Bun.spawnSync([...mountPrefix, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], { stderr: "ignore" }).exitCode === 0;
  if (!canMount) console.error("burrow update tests: no tmpfs can be mounted here (unshare -m); the full-disk case is skipped");

  describe("over HTTP", () => {
    /**
     * Serves a release directory; with `cutAt`, the executable's answer ends
     * after that many bytes of its declared length; with `stall`, it stops
     * sending there and keeps the connection open.
     */
    function serveRelease(dir: string, cutAt?: number, stall = false, gzipSmall = false) {
      const asked: { method: string; path: string; headers: Record<string, string> }[] = [];
      const server = Bun.listen<{ rest: Uint8Array; stall: boolean }>({
        hostname: "127.0.0.1",
        port: 0,
        socket: {
          data(socket, data) {
            const head = data.toString("latin1");
            const [method = "", target = ""] = head.split(" ");
            const headers = Object.fromEntries(
              head
                .split("\r\n")
                .slice(1)
                .filter((l) => l.includes(":"))
                .map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]),
            );
            asked.push({ method, path: target, headers });
            const name = decodeURIComponent(target.slice(1));
            const path = join(dir, name);
            if (name.includes("/") || !existsSync(path)) {
              socket.end("HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
              return;
            }
            let body = readFileSync(path);
            let encoding = "";
            if (gzipSmall && name.startsWith("SHA256SUMS")) {
              body = Buffer.from(Bun.gzipSync(body));
              encoding = "content-encoding: gzip\r\n";
            }
            const sent = cutAt !== undefined && name.startsWith("burrow-") ? body.subarray(0, cutAt) : body;
            socket.write(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n${encoding}connection: close\r\n\r\n`);
            socket.data = { rest: sent, stall };
            sendMore(socket);
          },
          drain: sendMore,
        },
        data: { rest: new Uint8Array(0), stall: false },
      });
      return { url: `http://127.0.0.1:${server.port}`, asked, stop: () => server.stop(true) };
    }

    /** Writes what the socket takes of the body, the rest on its next drain; ends after the last byte. */
    function sendMore(socket: Socket<{ rest: Uint8Array; stall: boolean }>): void {
      const { rest } = socket.data;
      if (rest.length === 0) return;
      const n = socket.write(rest);
      socket.data.rest = rest.subarray(Math.max(n, 0));
      if (socket.data.rest.length === 0 && !socket.data.stall) socket.end();
    }

    test("from a mirror's URL: --check, then the update", async () => {
      const mirror = serveRelease(newRelease);
      try {
        const { exe } = installed();
        expect((await burrow(exe, "update", "--check", "--from", mirror.url)).code).toBe(100);
        const updated = await burrow(exe, "update", "--from", `${mirror.url}/`);
        expect(updated.code).toBe(0);
        expect(updated.out).toContain(`burrow ${OLD} → ${NEW}`);
        expect(sha256(exe)).toBe(sha256(join(newRelease, exeName())));
      } finally {
        mirror.stop();
      }
    });

    test("a download cut short is refused and leaves nothing behind", async () => {
      const mirror = serveRelease(newRelease, 10 << 20);
      try {
        const { dir, exe } = installed();
        const before = sha256(exe);
        const got = await burrow(exe, "update", "--from", mirror.url);
        expect(got.code).toBe(1);
        expect(got.err).toContain("[CUT_SHORT]");
        // what came before the connection ended: at most the 10 MiB sent (a reset may drop the last of them)
        const [, came, declared] = /(?:cut short: |stopped after )(\d+) of (\d+) bytes/.exec(got.err) ?? [];
        expect(Number(came)).toBeLessThanOrEqual(10 << 20);
        expect(Number(declared)).toBe(statSync(join(newRelease, exeName())).size);
        expect(got.err).not.toContain("verbose: true"); // Bun's advice to programmers is not for users
        expect(sha256(exe)).toBe(before);
        expect(readdirSync(dir)).toEqual(["burrow"]);
      } finally {
        mirror.stop();
      }
    });

    test("a download that stalls is given up after --timeout, and leaves nothing behind", async () => {
      const mirror = serveRelease(newRelease, 1 << 20, true);
      try {
        const { dir, exe } = installed();
        const before = sha256(exe);
        // 5 s: the mirror's first answers (the sums, the download's head) must come within it, which a loaded machine took over 1 s for
        const got = await burrow(exe, "update", "--from", mirror.url, "--timeout", "5");
        expect(got.code).toBe(1);
        expect(got.err).toContain("nothing came for 5 s");
        expect(got.err).toContain("[CUT_SHORT]");
        expect(sha256(exe)).toBe(before);
        expect(readdirSync(dir)).toEqual(["burrow"]);
      } finally {
        mirror.stop();
      }
    });

    test.skipIf(!canMount)("a disk that fills up during the download, from a directory or a mirror: refused, the executable as it was, nothing left beside it", async () => {
      const mirror = serveRelease(newRelease);
      try {
        // a 160 MiB tmpfs holds the executable (~110 MiB) but not a second one
        const script = `set -e; d=$(mktemp -d); mount -t tmpfs -o size=160m tmpfs "$d"; cp "$1" "$d/burrow"; before=$(sha256sum "$d/burrow"); set +e
"$d/burrow" update --from "$2" 2>&1; echo "exit=$?"; ls -A "$d"; [ "$(sha256sum "$d/burrow")" = "$before" ] && echo unchanged`;
        for (const from of [newRelease, mirror.url]) {
          const got = await burrow(mountPrefix[0]!, ...mountPrefix.slice(1), "sh", "-c", script, "sh", oldBuild, from);
          expect(got.out).toContain("[NO_SPACE]");
          expect(got.out).toContain("the disk is full");
          expect(got.out).toMatch(/exit=1\nburrow\nunchanged\n$/);
        }
      } finally {
        mirror.stop();
      }
    }, 60_000);

    test("a mirror that compresses what it sends anyway (asked for identity): its declared length is of the compressed bytes, and the update works", async () => {
      const mirror = serveRelease(newRelease, undefined, false, true);
      try {
        const { exe } = installed();
        const got = await burrow(exe, "update", "--from", mirror.url);
        expect(got.err).toBe("");
        expect(got.code).toBe(0);
        expect(mirror.asked.every((r) => r.headers["accept-encoding"] === "identity")).toBe(true);
        expect(sha256(exe)).toBe(sha256(join(newRelease, exeName())));
      } finally {
        mirror.stop();
      }
    });

    test("the server's daily look logs a newer release, and asks for the two files only, with nothing of its own", async () => {
      const mirror = serveRelease(newRelease);
      try {
        await using server = await startServer({ executable: oldBuild, args: ["--update-check", "on", "--update-from", mirror.url, "--update-check-interval", "1"] });
        const line = await server.output.waitFor(/a newer burrow release exists/, 20_000);
        expect(line).toContain(`version=${NEW}`);
        expect(line).toContain(`running=${OLD}`);
        await waitUntil(() => mirror.asked.length >= 4, 20_000, "a second look, a second after the first");
        for (const req of mirror.asked) {
          expect(req.method).toBe("GET");
          expect(["/SHA256SUMS", "/SHA256SUMS.minisig"]).toContain(req.path);
          expect(Object.keys(req.headers).sort()).toEqual(expect.arrayContaining(["host"]));
          expect(req.headers.cookie).toBeUndefined();
          expect(req.headers.authorization).toBeUndefined();
          expect(req.headers["user-agent"]).toBe("burrow-update");
        }
      } finally {
        mirror.stop();
      }
    }, 60_000);

    test("--update-check off: the server never looks", async () => {
      const mirror = serveRelease(newRelease);
      try {
        await using server = await startServer({ executable: oldBuild, args: ["--update-check", "off", "--update-from", mirror.url, "--update-check-interval", "1"] });
        await Bun.sleep(2500);
        expect(mirror.asked).toEqual([]);
        expect(server.output.text()).not.toContain("newer burrow release");
      } finally {
        mirror.stop();
      }
    }, 60_000);
  });

  test("an executable built without the release key refuses to update, and says so in burrow version", async () => {
    const bare = join(work, "bare", "burrow");
    mkdirSync(join(work, "bare"));
    expect(run([process.execPath, join(root, "build", "compile.ts"), "--no-bytecode", "--outfile", bare], { cwd: root, env: NO_KEY_ENV }).code).toBe(0);
    expect((await burrow(bare, "version")).out).toContain("key     none (an unsigned build");
    const got = await burrow(bare, "update", "--from", newRelease);
    expect(got.code).toBe(1);
    expect(got.err).toContain("[NO_RELEASE_KEY]");
    expect((await burrow(bare, "version")).out).toStartWith(`burrow ${OLD}\n`);
  }, 60_000);

  test("bad input: flags are usage errors (exit 2); a --from that is no source, or a rollback with nothing kept, is refused", async () => {
    const { exe } = installed();
    for (const args of [["--version", "banana"], ["--rollback", "--check"], ["extra"], ["--from"], ["--nope"], ["--timeout", "0"], ["--timeout", "soon"]]) {
      const got = await burrow(exe, "update", ...args);
      expect(got.code).toBe(2);
      expect(got.err).toStartWith("burrow: ");
    }
    const nowhere = await burrow(exe, "update", "--from", join(work, "no-such-dir"));
    expect(nowhere.code).toBe(1);
    expect(nowhere.err).toContain("[BAD_SOURCE]");
    for (const from of ["https://user:hunter2@example.com/r", "https://user:hunter2@example.com:99999/r", "ftp://user:hunter2@example.com/r"]) {
      const secret = await burrow(exe, "update", "--from", from);
      expect(secret.code).toBe(1);
      expect(secret.err).toContain("[BAD_SOURCE]");
      expect(secret.err).not.toContain("hunter2");
    }
    const badFile = await burrow(exe, "update", "--from", "file://%zz");
    expect(badFile.code).toBe(1);
    expect(badFile.err).toContain("[BAD_SOURCE]");
    const none = await burrow(exe, "update", "--rollback");
    expect(none.code).toBe(1);
    expect(none.err).toContain("[NO_PREVIOUS]");
    const server = await burrow(exe, "server", "--update-from", join(work, "no-such-dir"));
    expect(server.code).toBe(2);
    expect(server.err).toContain("--update-from");
  });

  test("run from source, there is nothing to update", async () => {
    const got = await burrow(process.execPath, join(root, "src", "main.ts"), "update", "--check");
    expect(got.code).toBe(1);
    expect(got.err).toContain("[NOT_COMPILED]");
  });
});
