/**
 * src/signing/minisign.ts against the real minisign (Debian's package): a
 * key pair made by `minisign -G -W`, a file signed by us and verified by
 * `minisign -V`, one signed by minisign and verified by us, and every
 * change to the file, the signature or its trusted comment refused by both.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parsePublicKey, parseSecretKey, publicKeyFile, SignatureError, signFile, verifyFile } from "../../src/signing/minisign.ts";
import { aptInstall } from "../harness/debian-packages.ts";

if (!Bun.which("minisign")) aptInstall(["minisign"], "signature tests");
const minisign = Bun.which("minisign");
if (!minisign) console.error("minisign tests skipped: no minisign (Debian's package), and it could not be installed");

const run = (args: string[], cwd: string) => {
  const p = Bun.spawnSync([minisign!, ...args], { cwd, stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, out: p.stdout.toString() + p.stderr.toString() };
};

describe.skipIf(!minisign)("minisign's format, both ways", () => {
  let dir: string;
  const file = new Uint8Array(300_000).map((_, i) => (i * 13 + 5) & 0xff);
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "burrow-minisign-"));
    const made = run(["-G", "-W", "-p", "key.pub", "-s", "key.sec"], dir);
    if (made.code !== 0) throw new Error(`minisign -G failed: ${made.out}`);
    writeFileSync(join(dir, "SHA256SUMS"), file);
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  test("a signature made here verifies with minisign -V, which shows its trusted comment", () => {
    const key = parseSecretKey(readFileSync(join(dir, "key.sec"), "utf8"));
    writeFileSync(join(dir, "SHA256SUMS.minisig"), signFile(key, file, "burrow 1.2.3 release"));
    const checked = run(["-V", "-p", "key.pub", "-m", "SHA256SUMS"], dir);
    expect(checked.code).toBe(0);
    expect(checked.out).toContain("Trusted comment: burrow 1.2.3 release");
    // the public key file written from the secret key is the one minisign wrote
    expect(publicKeyFile(key)).toBe(readFileSync(join(dir, "key.pub"), "utf8"));
  });

  test("a signature made by minisign -S verifies here, and its trusted comment is returned", () => {
    const signed = run(["-S", "-s", "key.sec", "-m", "SHA256SUMS", "-x", "by-minisign.minisig", "-t", "made by minisign"], dir);
    expect(signed.code).toBe(0);
    const key = parsePublicKey(readFileSync(join(dir, "key.pub"), "utf8"));
    expect(verifyFile(key, file, readFileSync(join(dir, "by-minisign.minisig"), "utf8"))).toBe("made by minisign");
    // the bare base64 key, as minisign -P takes it, is read too
    expect(parsePublicKey(readFileSync(join(dir, "key.pub"), "utf8").split("\n")[1]!).id).toBe(key.id);
  });

  test("one byte of the file, of the signature or of its trusted comment changed: refused here and by minisign", () => {
    const key = parseSecretKey(readFileSync(join(dir, "key.sec"), "utf8"));
    const pub = parsePublicKey(readFileSync(join(dir, "key.pub"), "utf8"));
    const good = signFile(key, file, "burrow 1.2.3 release");
    const changed = file.slice();
    changed[12_345]! ^= 1;
    expect(() => verifyFile(pub, changed, good)).toThrow(SignatureError);
    writeFileSync(join(dir, "changed"), changed);
    writeFileSync(join(dir, "changed.minisig"), good);
    expect(run(["-V", "-p", "key.pub", "-m", "changed"], dir).code).not.toBe(0);
    const lines = good.split("\n");
    const sig = Buffer.from(lines[1]!, "base64");
    sig[40]! ^= 1;
    const badSignature = [lines[0], sig.toString("base64"), ...lines.slice(2)].join("\n");
    expect(() => verifyFile(pub, file, badSignature)).toThrow("does not verify");
    const badComment = good.replace("trusted comment: burrow 1.2.3 release", "trusted comment: burrow 9.9.9 release");
    expect(() => verifyFile(pub, file, badComment)).toThrow("trusted comment does not verify");
    writeFileSync(join(dir, "SHA256SUMS.minisig"), badComment);
    expect(run(["-V", "-p", "key.pub", "-m", "SHA256SUMS"], dir).code).not.toBe(0);
  });

  test("another key's signature, a key with a password, and what is no key are refused with words", () => {
    const other = mkdtempSync(join(tmpdir(), "burrow-minisign-other-"));
    try {
      expect(run(["-G", "-W", "-p", "key.pub", "-s", "key.sec"], other).code).toBe(0);
      const otherKey = parseSecretKey(readFileSync(join(other, "key.sec"), "utf8"));
      const pub = parsePublicKey(readFileSync(join(dir, "key.pub"), "utf8"));
      expect(() => verifyFile(pub, file, signFile(otherKey, file, "x"))).toThrow("made with another key");
    } finally {
      rmSync(other, { recursive: true, force: true });
    }
    const sec = readFileSync(join(dir, "key.sec"), "utf8").split("\n");
    const bytes = Buffer.from(sec[1]!, "base64");
    bytes.write("Sc", 2, "latin1");
    expect(() => parseSecretKey(`${sec[0]}\n${bytes.toString("base64")}\n`)).toThrow("has a password");
    expect(() => parsePublicKey("not a key")).toThrow(SignatureError);
    expect(() => parseSecretKey("")).toThrow("empty");
  });
});

test("a key id with leading zero bytes is written as minisign writes it: %PRIX64, no leading zeros", () => {
  // the id's highest digit (its last byte, read little-endian) is 06: written as 6, as minisign -G writes it
  const key = { keyId: new Uint8Array([0x60, 0xfb, 0x5f, 0xfa, 0x3a, 0x19, 0xf2, 0x06]), seed: new Uint8Array(32), publicKey: new Uint8Array(32) };
  expect(publicKeyFile(key).split("\n")[0]).toBe("untrusted comment: minisign public key 6F2193AFA5FFB60");
  const zero = { ...key, keyId: new Uint8Array([0x60, 0xfb, 0x5f, 0xfa, 0x3a, 0x19, 0x00, 0x00]) };
  expect(publicKeyFile(zero).split("\n")[0]).toBe("untrusted comment: minisign public key 193AFA5FFB60");
});
