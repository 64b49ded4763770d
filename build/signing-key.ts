/**
 * The release's signing key from the environment, as `npm run release` and
 * `npm run build` read it:
 *
 *   BURROW_SIGNING_KEY_FILE         a minisign secret key file without a password
 *   BURROW_SIGNING_KEY              or that file's content
 *   BURROW_SIGNING_PUBLIC_KEY_FILE  its public key (checked against it); alone,
 *                                   enough for a build that checks updates
 *
 * The public key is built into the executable (burrow update checks releases
 * with it); the secret key only signs SHA256SUMS.
 */
import { readFileSync } from "node:fs";
import { parsePublicKey, parseSecretKey, publicKeyFile, type SecretKey } from "../src/signing/minisign.ts";

/** The secret key, checked against the public key file when both are given; undefined: unsigned. */
export function signingKey(env: Record<string, string | undefined>): SecretKey | undefined {
  const text = env.BURROW_SIGNING_KEY_FILE ? readFileSync(env.BURROW_SIGNING_KEY_FILE, "utf8") : env.BURROW_SIGNING_KEY;
  if (!text) return undefined;
  const key = parseSecretKey(text);
  if (env.BURROW_SIGNING_PUBLIC_KEY_FILE) {
    const pub = parsePublicKey(readFileSync(env.BURROW_SIGNING_PUBLIC_KEY_FILE, "utf8"));
    if (publicKeyFile(pub) !== publicKeyFile(key)) throw new Error(`BURROW_SIGNING_PUBLIC_KEY_FILE holds key ${pub.id}, not the public half of the signing key`);
  }
  return key;
}

/** The base64 line of the public key to build in: the signing key's, or the public key file's alone; "" for none. */
export function releaseKeyLine(env: Record<string, string | undefined>): string {
  const key = signingKey(env);
  if (key) return publicKeyFile(key).split("\n")[1]!;
  if (env.BURROW_SIGNING_PUBLIC_KEY_FILE) return publicKeyFile(parsePublicKey(readFileSync(env.BURROW_SIGNING_PUBLIC_KEY_FILE, "utf8"))).split("\n")[1]!;
  return "";
}
