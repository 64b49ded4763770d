/**
 * A signed release: `npm run release` with a minisign key made by the real
 * `minisign -G -W` writes SHA256SUMS.minisig and burrow.pub, which
 * `minisign -V` accepts, and refuses once one byte of SHA256SUMS changes
 * (and a changed executable no longer matches its SHA256SUMS line). A key
 * whose public half is not the one given is refused before anything is
 * built; without a key the release says loudly that it is unsigned.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { aptInstall } from "../harness/debian-packages.ts";

const root = join(import.meta.dir, "..", "..");
if (!Bun.which("minisign")) aptInstall(["minisign"], "signed release tests");
const minisign = Bun.which("minisign");

function release(outdir: string, env: Record<string, string>): { code: number; out: string } {
  const run = Bun.spawnSync([process.execPath, join(root, "build", "release.ts"), "--only", "linux-x64", "--no-bytecode", "--outdir", outdir], {
    cwd: root,
    env: { ...process.env, BURROW_SIGNING_KEY_FILE: "", BURROW_SIGNING_KEY: "", BURROW_SIGNING_PUBLIC_KEY_FILE: "", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  return { code: run.exitCode, out: run.stdout.toString() + run.stderr.toString() };
}

describe.skipIf(!minisign)("a signed release", () => {
  let keys: string;
  let outdir: string;
  beforeAll(() => {
    keys = mkdtempSync(join(tmpdir(), "burrow-release-keys-"));
    outdir = mkdtempSync(join(tmpdir(), "burrow-release-signed-"));
    const made = Bun.spawnSync([minisign!, "-G", "-W", "-p", "burrow.pub", "-s", "burrow.key"], { cwd: keys, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
    if (made.exitCode !== 0) throw new Error(`minisign -G: ${made.stderr.toString()}`);
  });
  afterAll(() => {
    for (const d of [keys, outdir]) if (d) rmSync(d, { recursive: true, force: true });
  });

  test("minisign -V accepts SHA256SUMS with the release's signature, and refuses it once a byte changes", () => {
    const made = release(outdir, { BURROW_SIGNING_KEY_FILE: join(keys, "burrow.key"), BURROW_SIGNING_PUBLIC_KEY_FILE: join(keys, "burrow.pub") });
    expect(made.code).toBe(0);
    expect(made.out).toContain("signed: SHA256SUMS.minisig");
    expect(made.out).not.toContain("UNSIGNED");
    expect(readFileSync(join(outdir, "burrow.pub"), "utf8")).toBe(readFileSync(join(keys, "burrow.pub"), "utf8"));
    // the released installer carries the key it checks SHA256SUMS.minisig with
    expect(readFileSync(join(outdir, "install.sh"), "utf8")).toContain(`BURROW_PUBLIC_KEY="${readFileSync(join(keys, "burrow.pub"), "utf8").split("\n")[1]}"`);
    const verify = () => Bun.spawnSync([minisign!, "-V", "-p", join(keys, "burrow.pub"), "-m", "SHA256SUMS"], { cwd: outdir, stdout: "pipe", stderr: "pipe" });
    const good = verify();
    expect(good.exitCode).toBe(0);
    expect(good.stdout.toString()).toMatch(/Trusted comment: burrow \d+\.\d+\.\d+ \S+ SHA256SUMS/);
    // every file is listed with its hash: a changed executable no longer matches its line
    const sums = readFileSync(join(outdir, "SHA256SUMS"), "utf8");
    const exe = sums.split("\n").find((l) => / burrow-[\d.]+-linux-x64$/.test(l))!;
    const [hash, name] = exe.split(/\s+/);
    const bytes = readFileSync(join(outdir, name!));
    expect(createHash("sha256").update(bytes).digest("hex")).toBe(hash!);
    bytes[bytes.length >> 1]! ^= 1;
    expect(createHash("sha256").update(bytes).digest("hex")).not.toBe(hash!);
    // the container image and the compose files are in the signed list too, and match it
    for (const file of [/ burrow-[\d.]+-oci-(amd64|arm64)\.tar$/, / compose\.yaml$/]) {
      const line = sums.split("\n").find((l) => file.test(l));
      expect(line).toBeDefined();
      const [listed, named] = line!.split(/\s+/);
      expect(createHash("sha256").update(readFileSync(join(outdir, named!))).digest("hex")).toBe(listed!);
    }
    // and one byte of SHA256SUMS changed: the signature no longer verifies
    writeFileSync(join(outdir, "SHA256SUMS"), sums.replace(hash!, hash!.slice(0, -1) + (hash!.endsWith("0") ? "1" : "0")));
    const bad = verify();
    expect(bad.exitCode).not.toBe(0);
  }, 180_000);

  test("a public key that is not the signing key's is refused before anything is built", () => {
    const other = mkdtempSync(join(tmpdir(), "burrow-release-other-"));
    try {
      expect(Bun.spawnSync([minisign!, "-G", "-W", "-p", "other.pub", "-s", "other.key"], { cwd: other, stdin: "ignore" }).exitCode).toBe(0);
      const made = release(join(other, "out"), { BURROW_SIGNING_KEY_FILE: join(keys, "burrow.key"), BURROW_SIGNING_PUBLIC_KEY_FILE: join(other, "other.pub") });
      expect(made.code).toBe(65);
      expect(made.out).toContain("not the public half of the signing key");
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
  });
});

test("without a key the release is made, unsigned, and says so loudly", () => {
  const outdir = mkdtempSync(join(tmpdir(), "burrow-release-unsigned-"));
  try {
    const made = release(outdir, {});
    expect(made.code).toBe(0);
    expect(made.out).toContain("UNSIGNED RELEASE");
    expect(() => readFileSync(join(outdir, "SHA256SUMS.minisig"))).toThrow();
  } finally {
    rmSync(outdir, { recursive: true, force: true });
  }
}, 180_000);
