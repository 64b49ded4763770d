/**
 * What opening a database must do, decided from what is in it (inspect.ts)
 * and what this program knows, before anything is written: create it,
 * leave it, upgrade it (after a backup), or refuse it. Pure, so every case
 * is a table row in a unit test.
 */
import type { DbState } from "./inspect.ts";
import { compareVersions, UNRECORDED_VERSION } from "./version-record.ts";

export interface Migration {
  tag: string;
  /** drizzle-kit's journal timestamp: migrations apply in this order, and are known by it. */
  when: number;
  sql: string;
}

export type OpenPlan<M extends Migration = Migration> =
  | { kind: "create"; pending: M[] }
  | { kind: "current"; from: string }
  | { kind: "upgrade"; from: string; pending: M[] }
  | { kind: "refuse"; error: DatabaseRefused };

export type RefusalCode = "NEWER_DATABASE" | "NOT_A_BURROW_DATABASE";

/** A database this program must not open for writing; the server exits with code 2 and the message. */
export class DatabaseRefused extends Error {
  override name = "DatabaseRefused";
  constructor(
    readonly code: RefusalCode,
    message: string,
  ) {
    super(message);
  }
}

export interface PlanInput<M extends Migration> {
  state: DbState;
  migrations: readonly M[];
  /** This program's version. */
  version: string;
  /** How to name the database in messages. */
  path: string;
  /** Backups of this database already in its directory, for the advice in a refusal. */
  backups?: readonly string[];
}

export function planOpen<M extends Migration>({ state, migrations, version, path, backups = [] }: PlanInput<M>): OpenPlan<M> {
  const applied = state.applied ?? [];
  if (applied.length === 0 && state.tables.length === 0) return { kind: "create", pending: [...migrations] };
  if (state.applied === undefined || applied.length === 0) {
    return {
      kind: "refuse",
      error: new DatabaseRefused(
        "NOT_A_BURROW_DATABASE",
        `${path} has tables (${state.tables.join(", ")}) but no record of burrow's migrations: it is not a burrow database, and it was left as it is. Point --data-dir at burrow's data directory, or move this file away to start afresh.`,
      ),
    };
  }
  const known = new Set(migrations.map((m) => m.when));
  const unknown = applied.filter((a) => !known.has(a.createdAt));
  const recordedNewer = state.recorded !== undefined && compareVersions(state.recorded, version) > 0;
  if (unknown.length > 0 || recordedNewer) {
    const writer = state.recorded !== undefined && recordedNewer ? `burrow ${state.recorded}` : "a newer burrow";
    const why =
      unknown.length > 0
        ? `it has ${unknown.length === 1 ? "a migration" : `${unknown.length} migrations`} this burrow does not know`
        : "its schema is one this burrow knows, but the newer one may have stored what this one would misread";
    const restore =
      backups.length > 0
        ? `the backup the upgrade made (${backups.join(", ")})`
        : `a backup made before the upgrade (a burrow.db.bak-${version} file, if there is one)`;
    const runNewer = state.recorded !== undefined && recordedNewer ? `burrow ${state.recorded} or newer` : "the newer burrow";
    return {
      kind: "refuse",
      error: new DatabaseRefused(
        "NEWER_DATABASE",
        `${path} was last opened by ${writer}, and this is burrow ${version}: ${why}, so it was not opened and nothing in it changed. Run ${runNewer} on it; or, to go back to ${version}, restore ${restore} as burrow.db (with the server stopped, and burrow.db-wal and burrow.db-shm removed).`,
      ),
    };
  }
  const from = state.recorded ?? UNRECORDED_VERSION;
  const last = Math.max(...applied.map((a) => a.createdAt));
  const pending = migrations.filter((m) => m.when > last);
  return pending.length === 0 ? { kind: "current", from } : { kind: "upgrade", from, pending };
}
