/**
 * How a prefixed secret (a token, an admin key) is made and found: the
 * lookup is its prefix and next 12 characters, only its SHA-256 is kept,
 * and a presented secret that is not a string with the prefix, or is
 * absurdly long, is refused before any query.
 */
import { expect, test } from "bun:test";
import { findBySecret, newPrefixedSecret, sha256Hex } from "../../src/core/secrets.ts";

test("a new secret: the prefix and 43 base62 characters; the lookup its first 16; the hash its SHA-256", () => {
  const { secret, lookup, secretHash } = newPrefixedSecret("brw_");
  expect(secret).toMatch(/^brw_[0-9A-Za-z]{43}$/);
  expect(lookup).toBe(secret.slice(0, 16));
  expect(secretHash).toBe(sha256Hex(secret));
});

test("found by its lookup when the hash matches; not when only the lookup does; nothing asked for a stranger", async () => {
  const stored = newPrefixedSecret("brk_");
  const asked: string[] = [];
  const find = async (lookup: string) => {
    asked.push(lookup);
    return lookup === stored.lookup ? { id: 7, hash: stored.secretHash } : undefined;
  };
  const byHash = (row: { hash: string }) => row.hash;
  expect(await findBySecret("brk_", stored.secret, find, byHash)).toEqual({ id: 7, hash: stored.secretHash });
  expect(await findBySecret("brk_", `${stored.lookup}${"x".repeat(31)}`, find, byHash)).toBeUndefined();
  expect(asked).toEqual([stored.lookup, stored.lookup]);
  for (const stranger of [undefined, 42, "brw_" + stored.secret.slice(4), "brk_" + "a".repeat(300), ""]) {
    expect(await findBySecret("brk_", stranger, find, byHash)).toBeUndefined();
  }
  expect(asked).toHaveLength(2);
});
