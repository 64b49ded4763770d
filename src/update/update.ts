/**
 * `burrow update`'s steps, in their order, each able to refuse with an
 * UpdateError; until the last rename nothing of the installed executable
 * has changed.
 *
 *   1. the release's SHA256SUMS, verified with the built-in key;
 *   2. this platform's executable in it: the newest, or --version's;
 *   3. newer than this one, or named by --version (no silent downgrade);
 *   4. downloaded beside the executable, capped, its SHA-256 the listed one;
 *   5. run once: it must say the version and platform it was listed as;
 *   6. put in place atomically, the replaced one kept as <exe>.old.
 */
import type { PublicKey } from "../signing/minisign.ts";
import { UpdateError } from "./errors.ts";
import { probeExecutable } from "./probe.ts";
import { buildFor, MAX_EXECUTABLE_BYTES, readSignedRelease, type ReleaseBuild } from "./release.ts";
import { discardStaged, finishStaged, replaceExecutable, stageBeside, whileLocked, writeRefusal } from "./replace.ts";
import type { ReleaseSource } from "./source.ts";
import { compareVersions } from "./versions.ts";

export interface Running {
  /** The executable's real path (links followed). */
  exe: string;
  version: string;
  /** The platform it was built for, as release file names say it: linux-x64. */
  target: string;
  key: PublicKey;
}

export interface Found {
  build: ReleaseBuild;
  /** Negative: the release is older; 0: the same; positive: newer. */
  order: number;
}

/** Steps 1 and 2: what the release offers this platform. */
export async function findBuild(source: ReleaseSource, running: Pick<Running, "version" | "target" | "key">, version?: string): Promise<Found> {
  const release = await readSignedRelease(source, running.key);
  const build = buildFor(release, running.target, version);
  return { build, order: compareVersions(build.version, running.version) };
}

export type Outcome = { kind: "same"; version: string } | { kind: "replaced"; from: string; to: string; previous: string };

/** Every step; `version` is --version (which allows going back to an older release). */
export function update(source: ReleaseSource, running: Running, version?: string): Promise<Outcome> {
  // the lock is the first write beside the executable: a folder we may not write to is refused before any download
  return whileLocked(running.exe, () => steps(source, running, version));
}

async function steps(source: ReleaseSource, running: Running, version?: string): Promise<Outcome> {
  const staged = stageBeside(running.exe);
  try {
    const { build, order } = await findBuild(source, running, version);
    if (order === 0) return { kind: "same", version: build.version };
    if (order < 0 && version === undefined) {
      throw new UpdateError("NOT_NEWER", `the release at ${source.where} is ${build.version}, older than this ${running.version}: not installed (burrow update --version ${build.version} goes back to it)`);
    }
    const got = await source.download(build.name, staged.fd!, MAX_EXECUTABLE_BYTES);
    if (got.sha256 !== build.sha256) {
      throw new UpdateError("CHECKSUM_MISMATCH", `${build.name} from ${source.where} is not the file the signed SHA256SUMS lists (${got.bytes} bytes, sha256 ${got.sha256.slice(0, 16)}…, listed ${build.sha256.slice(0, 16)}…): cut short or changed, and not installed`);
    }
    finishStaged(staged, running.exe);
    const probed = await probeExecutable(staged.path);
    if (probed.version !== build.version || probed.target !== running.target) {
      throw new UpdateError("DOES_NOT_RUN", `${build.name} says it is burrow ${probed.version} for ${probed.target}, not ${build.version} for ${running.target}: not installed`);
    }
    const previous = replaceExecutable(staged, running.exe);
    return { kind: "replaced", from: running.version, to: build.version, previous };
  } catch (err) {
    throw writeRefusal(err, running.exe) ?? err;
  } finally {
    discardStaged(staged); // gone already when it was renamed into place
  }
}
