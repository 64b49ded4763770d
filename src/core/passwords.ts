/** Password hashing with argon2id, and a way to spend the same time when there is no user. */
import { hash, verify } from "@node-rs/argon2";

const OPTIONS = { algorithm: 2 /* Algorithm.Argon2id, a const enum */, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export const hashPassword = (password: string) => hash(password, OPTIONS);

export async function verifyPassword(passwordHash: string, password: string): Promise<boolean> {
  try {
    return await verify(passwordHash, password);
  } catch {
    return false; // a malformed stored hash never matches
  }
}

let dummyHash: Promise<string> | undefined;

/**
 * Verifies against a hash nobody's password matches, so that a login for an
 * unknown username takes as long as one for a known username.
 */
export async function burnVerifyTime(password: string): Promise<void> {
  dummyHash ??= hashPassword(crypto.randomUUID());
  await verifyPassword(await dummyHash, password);
}
