/**
 * The release's public key, built into the executable by build/compile.ts
 * (--define BURROW_RELEASE_KEY: the base64 line of the minisign public key
 * the release is signed with). An executable built without one (from
 * source, or compiled with no key at hand) cannot check an update.
 */
import { parsePublicKey, type PublicKey } from "../signing/minisign.ts";

declare const BURROW_RELEASE_KEY: string | undefined;

export function releaseKey(): PublicKey | undefined {
  const line = typeof BURROW_RELEASE_KEY === "string" ? BURROW_RELEASE_KEY : "";
  return line === "" ? undefined : parsePublicKey(line);
}

/** What `burrow version` says of the key: its id, or that there is none. */
export function releaseKeyText(): string {
  const key = releaseKey();
  return key ? `${key.id} (burrow update checks releases with it)` : "none (an unsigned build: burrow update cannot check a release)";
}
