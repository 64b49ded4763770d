/**
 * Signatures in minisign's format (https://jedisct1.github.io/minisign/),
 * made and checked with the runtime's own Ed25519 and BLAKE2b (node:crypto),
 * so that anyone can verify a release with the standard `minisign -V` and
 * the public key, and burrow can check what it downloads with the key built
 * into it. Only what burrow needs: prehashed signatures (the file's
 * BLAKE2b-512 signed, minisign's default), and secret keys without a
 * password (`minisign -G -W`).
 *
 * The formats, all base64 lines under an "untrusted comment:" line:
 *   public key  "Ed" | key id (8 bytes) | public key (32)
 *   secret key  "Ed" | kdf "\0\0" (none) | "B2" | salt (32) | opslimit (8) |
 *               memlimit (8) | key id (8) | secret key (64: seed, public) |
 *               checksum (32)
 *   signature   "ED" | key id (8) | Ed25519(BLAKE2b-512(file)) (64), then
 *               "trusted comment: ..." and Ed25519(signature | comment) (64)
 */
import { createHash, createPrivateKey, createPublicKey, sign, verify } from "node:crypto";

export interface PublicKey {
  /** The key id, as minisign prints it (up to 16 hex digits). */
  id: string;
  keyId: Uint8Array;
  key: Uint8Array;
}

export interface SecretKey {
  keyId: Uint8Array;
  /** The Ed25519 seed (the first half of minisign's 64-byte secret key). */
  seed: Uint8Array;
  publicKey: Uint8Array;
}

/** A refused key or signature, with why in a few words. */
export class SignatureError extends Error {}

const PKCS8_ED25519 = Buffer.from("302e020100300506032b657004220420", "hex");
const SPKI_ED25519 = Buffer.from("302a300506032b6570032100", "hex");

/** minisign prints a key id as the 8 bytes read little-endian, in upper-case hex without leading zeros (printf's %" PRIX64). */
const keyIdText = (keyId: Uint8Array) => Buffer.from(keyId).reverse().toString("hex").toUpperCase().replace(/^0+(?=.)/, "");

/** The base64 line after the "untrusted comment:" line of a key or signature file. */
function payload(text: string, what: string): { comment: string; bytes: Buffer; rest: string[] } {
  const lines = text.replace(/\r\n/g, "\n").split("\n");
  const first = lines.findIndex((l) => l.trim() !== "");
  if (first < 0) throw new SignatureError(`the ${what} is empty`);
  let comment = "";
  let at = first;
  if (lines[at]!.startsWith("untrusted comment:")) {
    comment = lines[at]!.slice("untrusted comment:".length).trim();
    at++;
  }
  const line = (lines[at] ?? "").trim();
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(line)) throw new SignatureError(`the ${what} is not in minisign's format (no base64 line)`);
  return { comment, bytes: Buffer.from(line, "base64"), rest: lines.slice(at + 1) };
}

export function parsePublicKey(text: string): PublicKey {
  // a bare base64 key (as minisign -P takes it) or the .pub file
  const { bytes } = payload(text.includes("\n") || text.startsWith("untrusted") ? text : `untrusted comment: key\n${text}`, "public key");
  if (bytes.length !== 42 || bytes.subarray(0, 2).toString("latin1") !== "Ed") throw new SignatureError("the public key is not a minisign Ed25519 key");
  const keyId = new Uint8Array(bytes.subarray(2, 10));
  return { id: keyIdText(keyId), keyId, key: new Uint8Array(bytes.subarray(10, 42)) };
}

export function parseSecretKey(text: string): SecretKey {
  const { bytes } = payload(text, "secret key");
  if (bytes.length !== 158 || bytes.subarray(0, 2).toString("latin1") !== "Ed") throw new SignatureError("the secret key is not a minisign Ed25519 secret key");
  const kdf = bytes.subarray(2, 4);
  if (kdf[0] !== 0 || kdf[1] !== 0) throw new SignatureError("the secret key has a password: make one without (minisign -G -W), or remove it (minisign -C)");
  const keyId = new Uint8Array(bytes.subarray(54, 62));
  const secret = bytes.subarray(62, 126);
  const key = { keyId, seed: new Uint8Array(secret.subarray(0, 32)), publicKey: new Uint8Array(secret.subarray(32, 64)) };
  // the seed must give the public key the file holds: a damaged file is refused here, not at verification
  const derived = createPublicKey(createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, key.seed]), format: "der", type: "pkcs8" })).export({ format: "der", type: "spki" }).subarray(SPKI_ED25519.length);
  if (!Buffer.from(derived).equals(Buffer.from(key.publicKey))) throw new SignatureError("the secret key is damaged (its public half does not match)");
  return key;
}

/** The public key file minisign writes for `key` (what `minisign -V -p` reads). */
export function publicKeyFile(key: SecretKey | PublicKey): string {
  const pk = "seed" in key ? key.publicKey : key.key;
  const bytes = Buffer.concat([Buffer.from("Ed", "latin1"), key.keyId, pk]);
  return `untrusted comment: minisign public key ${keyIdText(key.keyId)}\n${bytes.toString("base64")}\n`;
}

const ed25519Sign = (key: SecretKey, data: Uint8Array) => new Uint8Array(sign(null, data, createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, key.seed]), format: "der", type: "pkcs8" })));
const ed25519Verify = (key: PublicKey, data: Uint8Array, signature: Uint8Array) =>
  verify(null, data, createPublicKey({ key: Buffer.concat([SPKI_ED25519, key.key]), format: "der", type: "spki" }), signature);

/** `file`'s signature, as `minisign -S` writes it; `trusted` goes in its trusted comment (one line). */
export function signFile(key: SecretKey, file: Uint8Array, trusted: string): string {
  if (/[\r\n]/.test(trusted)) throw new SignatureError("a trusted comment is one line");
  const digest = createHash("blake2b512").update(file).digest();
  const signature = ed25519Sign(key, digest);
  const global = ed25519Sign(key, Buffer.concat([signature, Buffer.from(trusted, "utf8")]));
  const line = Buffer.concat([Buffer.from("ED", "latin1"), key.keyId, signature]).toString("base64");
  return `untrusted comment: signature from minisign secret key\n${line}\ntrusted comment: ${trusted}\n${Buffer.from(global).toString("base64")}\n`;
}

/**
 * Checks `signatureText` (a .minisig file) over `file` with `key`, as
 * `minisign -V` does; returns the trusted comment, or throws a
 * SignatureError saying why not.
 */
export function verifyFile(key: PublicKey, file: Uint8Array, signatureText: string): string {
  const { bytes, rest } = payload(signatureText, "signature");
  if (bytes.length !== 74) throw new SignatureError("the signature is not in minisign's format");
  const alg = bytes.subarray(0, 2).toString("latin1");
  if (alg !== "ED" && alg !== "Ed") throw new SignatureError("the signature's algorithm is not one minisign uses");
  if (!Buffer.from(bytes.subarray(2, 10)).equals(Buffer.from(key.keyId))) throw new SignatureError(`the signature was made with another key than ${key.id}`);
  const signature = bytes.subarray(10, 74);
  // "ED": the file's BLAKE2b-512 was signed (minisign's default); "Ed": the file itself (legacy)
  const signed = alg === "ED" ? createHash("blake2b512").update(file).digest() : file;
  if (!ed25519Verify(key, signed, signature)) throw new SignatureError("the signature does not verify: the file is not the one signed");
  const trustedLine = rest.find((l) => l.startsWith("trusted comment:"));
  const globalLine = rest[rest.indexOf(trustedLine ?? "") + 1]?.trim();
  if (trustedLine === undefined || !globalLine) throw new SignatureError("the signature has no trusted comment");
  const trusted = trustedLine.slice("trusted comment:".length).replace(/^ /, "");
  const global = Buffer.from(globalLine, "base64");
  if (global.length !== 64 || !ed25519Verify(key, Buffer.concat([signature, Buffer.from(trusted, "utf8")]), global)) {
    throw new SignatureError("the signature's trusted comment does not verify");
  }
  return trusted;
}
