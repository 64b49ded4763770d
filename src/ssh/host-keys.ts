/**
 * The SSH gateway's host keys: an ed25519 key, and an RSA one for old
 * clients, made once in the data dir (`ssh/`, 0700; each key 0600 from its
 * first byte) and kept, so the fingerprints users check stay the same from
 * one start to the next. Their fingerprints are what the server prints at
 * start, `server init` reports and the portal shows.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { utils } from "ssh2";
import { fingerprintOf } from "../core/ssh-public-key.ts";
import { ensurePrivateDir, writePrivateFile } from "../tls/private-files.ts";

/** RSA host keys are made this large: 3,072 bits, OpenSSH's own default. */
const RSA_BITS = 3072;

const KINDS = [
  { file: "ssh_host_ed25519_key", type: "ed25519", label: "ED25519" },
  { file: "ssh_host_rsa_key", type: "rsa", label: "RSA" },
] as const;

export interface HostKey {
  /** The private key, in OpenSSH's format. */
  privateKey: string;
  /** "ED25519" or "RSA", as ssh-keygen -l names them. */
  label: string;
  /** "SHA256:...", as ssh-keygen -l and OpenSSH's first-connection question print it. */
  fingerprint: string;
  /** The public key's line, for a known_hosts file: "ssh-ed25519 AAAA...". */
  publicLine: string;
}

/** Where the host keys are kept. */
export const hostKeyDir = (dataDir: string) => join(dataDir, "ssh");

/** The gateway's host keys, made now when they are not there yet. */
export function loadHostKeys(dataDir: string): HostKey[] {
  const dir = hostKeyDir(dataDir);
  ensurePrivateDir(dir);
  return KINDS.map(({ file, type, label }) => {
    const path = join(dir, file);
    if (!existsSync(path)) writePrivateFile(path, type === "rsa" ? newRsaKey() : newEd25519Key());
    return describe(readFileSync(path, "utf8"), label, path);
  });
}

/** An RSA private key, as PEM (PKCS #1), which OpenSSH and ssh2 read as their own. */
function newRsaKey(): string {
  return generateKeyPairSync("rsa", { modulusLength: RSA_BITS }).privateKey.export({ type: "pkcs1", format: "pem" }).toString();
}

/**
 * An ed25519 private key in OpenSSH's own format (PROTOCOL.key), written
 * here from node:crypto's key: ssh2's generator drops a leading zero byte
 * of the public key about once in two hundred keys, which makes the key
 * unreadable.
 */
function newEd25519Key(): string {
  const jwk = generateKeyPairSync("ed25519").privateKey.export({ format: "jwk" });
  const seed = Buffer.from(jwk.d!, "base64url");
  const pub = Buffer.from(jwk.x!, "base64url");
  const string = (b: Buffer | string) => {
    const bytes = typeof b === "string" ? Buffer.from(b) : b;
    const length = Buffer.alloc(4);
    length.writeUInt32BE(bytes.length);
    return Buffer.concat([length, bytes]);
  };
  const u32 = (n: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32BE(n >>> 0);
    return b;
  };
  const publicKey = Buffer.concat([string("ssh-ed25519"), string(pub)]);
  const check = randomBytes(4).readUInt32BE();
  let secret = Buffer.concat([u32(check), u32(check), string("ssh-ed25519"), string(pub), string(Buffer.concat([seed, pub])), string("burrow ssh gateway")]);
  // padded with 1, 2, 3... to the cipher's block ("none": 8)
  const pad = (8 - (secret.length % 8)) % 8;
  secret = Buffer.concat([secret, Buffer.from(Array.from({ length: pad }, (_, i) => i + 1))]);
  const body = Buffer.concat([Buffer.from("openssh-key-v1\0"), string("none"), string("none"), string(""), u32(1), string(publicKey), string(secret)]);
  const lines = body.toString("base64").match(/.{1,70}/g)!;
  return `-----BEGIN OPENSSH PRIVATE KEY-----\n${lines.join("\n")}\n-----END OPENSSH PRIVATE KEY-----\n`;
}

/** A host key's public facts, read from its private key; what cannot be read is the data dir's problem, said with its path. */
function describe(privateKey: string, label: string, path: string): HostKey {
  const parsed = utils.parseKey(privateKey);
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!key || key instanceof Error || !key.isPrivateKey()) {
    const why = key instanceof Error ? ` (${key.message})` : "";
    throw new Error(`${path} is not an SSH private key${why}: remove it and a new one is made at the next start`);
  }
  const wire = key.getPublicSSH();
  return { privateKey, label, fingerprint: fingerprintOf(wire), publicLine: `${key.type} ${Buffer.from(wire).toString("base64")}` };
}
