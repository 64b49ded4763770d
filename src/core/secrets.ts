/**
 * Random secrets and their digests, and how a prefixed secret (a device
 * token brw_..., an admin API key brk_...) is kept: its first characters in
 * clear to find its row (the lookup), the whole only as SHA-256, compared in
 * constant time. Tokens and keys both go through the two functions below.
 */
import { timingSafeEqual } from "node:crypto";

const BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";

/** `length` characters drawn uniformly from [0-9A-Za-z] (rejection sampling, no modulo bias). */
export function randomBase62(length: number): string {
  let out = "";
  while (out.length < length) {
    for (const byte of crypto.getRandomValues(new Uint8Array(length * 2))) {
      if (byte < 248 && out.length < length) out += BASE62[byte % 62];
    }
  }
  return out;
}

/** 32 random bytes, base64url: a session cookie value. */
export function randomKey(): string {
  return Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString("base64url");
}

export const sha256Hex = (text: string) => new Bun.CryptoHasher("sha256").update(text).digest("hex");

/** Constant-time equality of two hex digests. */
export function digestsEqual(a: string, b: string): boolean {
  return a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));
}

/** Random characters after a secret's prefix: 43 base62 characters carry 256 bits. */
const SECRET_CHARS = 43;
/** Of those, how many the lookup keeps in clear (with the prefix): enough to find one row, far too few to guess the rest. */
const LOOKUP_CHARS = 12;
/** A presented secret longer than this is refused before it is hashed or looked up (a secret is 47 characters). */
const MAX_PRESENTED = 200;

const lookupOf = (prefix: string, secret: string) => secret.slice(0, prefix.length + LOOKUP_CHARS);

/** A new secret starting with `prefix`, and what is stored of it. The secret itself exists nowhere else. */
export function newPrefixedSecret(prefix: string): { secret: string; lookup: string; secretHash: string } {
  const secret = prefix + randomBase62(SECRET_CHARS);
  return { secret, lookup: lookupOf(prefix, secret), secretHash: sha256Hex(secret) };
}

/**
 * The row a presented secret is: `find` fetches the row stored with its
 * lookup, whose hash (`hashOf`) must then match the secret's. undefined for
 * no match, and without a query for anything that is not a string with
 * `prefix` of a sane length.
 */
export async function findBySecret<R>(prefix: string, secret: unknown, find: (lookup: string) => Promise<R | undefined>, hashOf: (row: R) => string): Promise<R | undefined> {
  if (typeof secret !== "string" || !secret.startsWith(prefix) || secret.length > MAX_PRESENTED) return undefined;
  const row = await find(lookupOf(prefix, secret));
  return row !== undefined && digestsEqual(hashOf(row), sha256Hex(secret)) ? row : undefined;
}
