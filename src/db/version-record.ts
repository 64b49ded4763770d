/**
 * Which burrow version last opened a database, kept in SQLite's
 * `PRAGMA user_version`, a 32-bit number in the file's header, as
 * major * 1,000,000 + minor * 1,000 + patch (0.1.0 -> 1000).
 *
 * Why there and not in a table of our own: the header exists before any
 * table does, so the record can be read from any database, even one whose
 * tables a newer burrow has reshaped; it is written in the same transaction
 * as the migrations it vouches for (a crash leaves both or neither); and it
 * needs no migration of its own, so adding it did not make every 0.1.0
 * database "in need of an upgrade". What it cannot hold is a pre-release
 * tag: 0.2.0-rc.1 is recorded as 0.2.0.
 *
 * 0 means "not recorded": 0.1.0, the only release before the record, is the
 * one that leaves a database that way.
 */

/** What a database that has burrow's tables but no record was written by. */
export const UNRECORDED_VERSION = "0.1.0";

const PART_LIMIT = 1000;
const MAJOR_LIMIT = 2147; // user_version is a signed 32-bit integer

interface Parts {
  major: number;
  minor: number;
  patch: number;
}

function parse(version: string): Parts | undefined {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:[-+].*)?$/.exec(version);
  if (!m) return undefined;
  const [major, minor, patch] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (major >= MAJOR_LIMIT || minor >= PART_LIMIT || patch >= PART_LIMIT) return undefined;
  return { major, minor, patch };
}

/** The header number for a version; throws on a version the header cannot hold (a release-process mistake). */
export function encodeVersion(version: string): number {
  const p = parse(version);
  if (!p) throw new Error(`version '${version}' cannot be recorded in the database: MAJOR.MINOR.PATCH, each part under ${PART_LIMIT}`);
  return p.major * PART_LIMIT * PART_LIMIT + p.minor * PART_LIMIT + p.patch;
}

/** The version a header number stands for; undefined for 0 (not recorded) or nonsense. */
export function decodeVersion(n: number): string | undefined {
  if (!Number.isInteger(n) || n <= 0) return undefined;
  return `${Math.floor(n / (PART_LIMIT * PART_LIMIT))}.${Math.floor(n / PART_LIMIT) % PART_LIMIT}.${n % PART_LIMIT}`;
}

/** Negative, zero or positive as a is older than, the same as or newer than b (pre-release tags ignored). */
export function compareVersions(a: string, b: string): number {
  return encodeVersion(a) - encodeVersion(b);
}
