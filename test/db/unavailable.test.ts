/**
 * Which failed queries mean "the database cannot serve now" (answered 503,
 * logged quietly) rather than a bug: PostgreSQL's SQLSTATEs and Bun.SQL's
 * connection codes, and a real SQLite file locked by another connection.
 */
import { Database } from "bun:sqlite";
import { expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { databaseUnavailable } from "../../src/db/unavailable.ts";

test.each([
  ["a read-only standby (25006)", { code: "ERR_POSTGRES_SERVER_ERROR", errno: "25006" }, true],
  ["the server shutting down (57P01)", { code: "ERR_POSTGRES_SERVER_ERROR", errno: "57P01" }, true],
  ["too many connections (53300)", { code: "ERR_POSTGRES_SERVER_ERROR", errno: "53300" }, true],
  ["a connection failure (08006)", { code: "ERR_POSTGRES_SERVER_ERROR", errno: "08006" }, true],
  ["a closed connection", { code: "ERR_POSTGRES_CONNECTION_CLOSED" }, true],
  ["a connection timeout", { code: "ERR_POSTGRES_CONNECTION_TIMEOUT" }, true],
  ["a refused socket", { code: "ECONNREFUSED" }, true],
  ["a full SQLite disk", { code: "SQLITE_FULL" }, true],
  ["a unique violation (23505)", { code: "ERR_POSTGRES_SERVER_ERROR", errno: "23505" }, false],
  ["an unknown table (42P01)", { code: "ERR_POSTGRES_SERVER_ERROR", errno: "42P01" }, false],
  ["a SQLite constraint", { code: "SQLITE_CONSTRAINT_UNIQUE" }, false],
  ["a plain error", new Error("boom"), false],
  ["a string", "ECONNREFUSED", false],
  ["nothing", undefined, false],
])("%s: %p", (_, err, unavailable) => {
  expect(databaseUnavailable(err)).toBe(unavailable as boolean);
});

test("a SQLite file another connection holds locked is unavailable for now, not a bug", () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-unavailable-"));
  const holder = new Database(join(dir, "db.sqlite"));
  const other = new Database(join(dir, "db.sqlite"));
  try {
    holder.run("CREATE TABLE t (x INTEGER)");
    other.run("PRAGMA busy_timeout = 0");
    holder.run("BEGIN EXCLUSIVE");
    let caught: unknown;
    try {
      other.run("INSERT INTO t VALUES (1)");
    } catch (err) {
      caught = err;
    }
    expect((caught as { code?: string }).code).toMatch(/^SQLITE_BUSY/);
    expect(databaseUnavailable(caught)).toBe(true);
  } finally {
    holder.close();
    other.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
