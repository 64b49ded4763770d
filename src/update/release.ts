/**
 * One release, as its signed list says: SHA256SUMS checked against
 * SHA256SUMS.minisig with the key built into this executable, then read as
 * sha256sum's lines, and the executable for this platform found in it.
 * Nothing in SHA256SUMS is believed before its signature verifies.
 */
import { SignatureError, verifyFile, type PublicKey } from "../signing/minisign.ts";
import { UpdateError } from "./errors.ts";
import type { ReleaseSource } from "./source.ts";
import { compareVersions, isVersion } from "./versions.ts";

/** Caps on what a source may send: far above the real files (SHA256SUMS is about 2 KB, an executable about 120 MB). */
export const MAX_SUMS_BYTES = 1 << 20;
export const MAX_SIGNATURE_BYTES = 16 << 10;
export const MAX_EXECUTABLE_BYTES = 1 << 30;

export interface ReleaseBuild {
  version: string;
  /** The file's name in the release, e.g. burrow-0.2.0-linux-x64 */
  name: string;
  sha256: string;
}

export interface SignedRelease {
  where: string;
  /** The signature's trusted comment, e.g. "burrow 0.2.0 1a2b3c4d5e6f SHA256SUMS". */
  trusted: string;
  /** The executables it lists, by the platform each is for. */
  builds: Map<string, ReleaseBuild[]>;
}

/** Reads and verifies the release at `source`; throws an UpdateError saying why not. */
export async function readSignedRelease(source: ReleaseSource, key: PublicKey): Promise<SignedRelease> {
  const sums = await source.read("SHA256SUMS", MAX_SUMS_BYTES);
  let signature: Uint8Array;
  try {
    signature = await source.read("SHA256SUMS.minisig", MAX_SIGNATURE_BYTES);
  } catch (err) {
    if (err instanceof UpdateError && err.code === "NOT_FOUND") {
      throw new UpdateError("BAD_SIGNATURE", `the release at ${source.where} is not signed (no SHA256SUMS.minisig): it cannot be checked, so it is not installed`);
    }
    throw err;
  }
  let trusted: string;
  try {
    trusted = verifyFile(key, sums, Buffer.from(signature).toString("utf8"));
  } catch (err) {
    if (err instanceof SignatureError) throw new UpdateError("BAD_SIGNATURE", `SHA256SUMS at ${source.where} is refused: ${err.message}`);
    throw err;
  }
  return { where: source.where, trusted, builds: parseSums(Buffer.from(sums).toString("utf8"), source.where) };
}

const EXECUTABLE = /^burrow-(.+)-((?:linux|darwin|windows)-(?:x64|arm64)(?:-musl)?)(\.exe)?$/;

function parseSums(text: string, where: string): Map<string, ReleaseBuild[]> {
  const builds = new Map<string, ReleaseBuild[]>();
  for (const [i, raw] of text.split("\n").entries()) {
    const line = raw.replace(/\r$/, ""); // a list written on Windows
    if (line.trim() === "") continue;
    // sha256sum's format: the hash, a space, a space or "*" (binary mode), the name
    const m = /^([0-9a-f]{64}) [ *](\S.*)$/i.exec(line);
    if (!m) throw new UpdateError("BAD_LIST", `SHA256SUMS at ${where}, line ${i + 1}, is not "<sha256>  <file>"`);
    const exe = EXECUTABLE.exec(m[2]!);
    if (!exe || !isVersion(exe[1]!) || (exe[3] !== undefined) !== exe[2]!.startsWith("windows")) continue;
    const list = builds.get(exe[2]!) ?? [];
    list.push({ version: exe[1]!, name: m[2]!, sha256: m[1]!.toLowerCase() });
    builds.set(exe[2]!, list);
  }
  return builds;
}

/**
 * The build of `target` to install: of `version` when given, else the newest
 * the release lists for it.
 */
export function buildFor(release: SignedRelease, target: string, version?: string): ReleaseBuild {
  const list = release.builds.get(target) ?? [];
  if (list.length === 0) {
    const others = [...release.builds.keys()].sort();
    throw new UpdateError("NO_BUILD", `the release at ${release.where} has no executable for ${target}${others.length > 0 ? ` (it has ${others.join(", ")})` : ""}`);
  }
  if (version !== undefined) {
    const found = list.find((b) => b.version === version);
    if (!found) throw new UpdateError("VERSION_NOT_THERE", `the release at ${release.where} holds ${[...new Set(list.map((b) => b.version))].join(", ")} for ${target}, not ${version}`);
    return found;
  }
  return list.reduce((a, b) => (compareVersions(b.version, a.version) > 0 ? b : a));
}
