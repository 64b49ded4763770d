/**
 * An SSH public key as a user gives it (a line of id_ed25519.pub), read by
 * ssh2's key parser, the same library that checks the key's signatures at
 * the SSH gateway: the kinds burrow takes (ed25519, ecdsa, RSA of 2,048 bits
 * or more), its normal form ("<type> <base64>", the comment dropped) and its
 * fingerprint as `ssh-keygen -l` prints it. Anything else is refused with a
 * reason a person can act on; a private key given by mistake is refused
 * without a word of it repeated anywhere.
 */
import { createHash, createPublicKey } from "node:crypto";
import { utils } from "ssh2";
import { badRequest, type AppError } from "./errors.ts";

/** The longest line taken: an RSA key of 16,384 bits is some 2,800 characters. */
export const MAX_PUBLIC_KEY_CHARS = 8192;
/** RSA keys below this many bits are refused (OpenSSH's own floor since 8.x is 1,024; NIST's is 2,048). */
export const MIN_RSA_BITS = 2048;
const MAX_RSA_BITS = 16384;

const TAKEN: ReadonlySet<string> = new Set(["ssh-ed25519", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384", "ecdsa-sha2-nistp521", "ssh-rsa"]);

export interface PublicKey {
  /** "ssh-ed25519", "ecdsa-sha2-nistp256", "ssh-rsa"... */
  type: string;
  /** "<type> <base64>": what is stored, and what the gateway checks signatures with. */
  line: string;
  /** "SHA256:<base64 without padding>" of the key's wire form. */
  fingerprint: string;
  /** The comment after the key, when it had one (a default name for it). */
  comment?: string;
  /** RSA: the modulus's size. */
  bits?: number;
}

/** The fingerprint of a key's wire form (what an SSH client presents), as ssh-keygen -l prints it. */
export function fingerprintOf(wire: Uint8Array): string {
  return `SHA256:${createHash("sha256").update(wire).digest("base64").replace(/=+$/, "")}`;
}

/** `text` read as one OpenSSH public key line, or why it is not one burrow takes (BAD_REQUEST, naming `field`). */
export function readPublicKey(text: string, field = "key"): PublicKey | AppError {
  const line = text.trim();
  if (line === "") return badRequest(`${field}: must not be empty`);
  if (line.length > MAX_PUBLIC_KEY_CHARS) return badRequest(`${field}: is too long for a public key (${MAX_PUBLIC_KEY_CHARS} characters at most)`);
  // never parsed, never echoed: whoever pasted this has just shown a secret, and should be told so
  if (/PRIVATE KEY/.test(line)) return badRequest(`${field}: this is a private key; give the public one (the .pub file), and consider this private key exposed`);
  if (/[\r\n]/.test(line)) return badRequest(`${field}: one key, on one line, as in a .pub file`);
  const [type] = line.split(/\s+/, 1);
  if (type?.startsWith("sk-")) return badRequest(`${field}: security-key (${type}) keys are not supported; use an ed25519, ecdsa or RSA key`);
  if (type === "ssh-dss") return badRequest(`${field}: DSA keys are refused (OpenSSH has dropped them); use an ed25519 key (ssh-keygen -t ed25519)`);
  let parsed: ReturnType<typeof utils.parseKey>;
  try {
    parsed = utils.parseKey(line);
  } catch {
    parsed = new Error("unreadable");
  }
  const key = Array.isArray(parsed) ? parsed[0] : parsed;
  if (!key || key instanceof Error) return badRequest(`${field}: not an OpenSSH public key ("ssh-ed25519 AAAA... comment", the line of a .pub file)`);
  if (key.isPrivateKey()) return badRequest(`${field}: this is a private key; give the public one (the .pub file), and consider this private key exposed`);
  if (!TAKEN.has(key.type)) return badRequest(`${field}: ${key.type} keys are not taken; use ed25519, ecdsa or RSA (2048 bits or more)`);
  const wire = key.getPublicSSH();
  let bits: number | undefined;
  if (key.type === "ssh-rsa") {
    bits = createPublicKey(key.getPublicPEM()).asymmetricKeyDetails?.modulusLength ?? 0;
    if (bits < MIN_RSA_BITS) return badRequest(`${field}: an RSA key must have at least ${MIN_RSA_BITS} bits; this one has ${bits} (ssh-keygen -t ed25519 makes a better one)`);
    if (bits > MAX_RSA_BITS) return badRequest(`${field}: an RSA key of ${bits} bits is more than ${MAX_RSA_BITS}`);
  }
  const comment = key.comment.trim();
  return {
    type: key.type,
    line: `${key.type} ${Buffer.from(wire).toString("base64")}`,
    fingerprint: fingerprintOf(wire),
    ...(comment !== "" ? { comment: comment.slice(0, 100) } : {}),
    ...(bits !== undefined ? { bits } : {}),
  };
}
