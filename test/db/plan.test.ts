/**
 * What opening a database decides from what is in it (src/db/plan.ts), and
 * the version record in SQLite's header (src/db/version-record.ts): pure
 * functions, so every case is a row.
 */
import { describe, expect, test } from "bun:test";
import { planOpen, type Migration } from "../../src/db/plan.ts";
import type { DbState } from "../../src/db/inspect.ts";
import { compareVersions, decodeVersion, encodeVersion } from "../../src/db/version-record.ts";

const m = (when: number): Migration => ({ tag: `m${when}`, when, sql: "" });
const known = [m(100), m(200)];
const applied = (...whens: number[]) => whens.map((w) => ({ hash: `h${w}`, createdAt: w }));
const state = (s: Partial<DbState>): DbState => ({ tables: ["users"], applied: applied(100), recorded: undefined, ...s });
const plan = (s: Partial<DbState>, backups: string[] = []) => planOpen({ state: state(s), migrations: known, version: "0.3.0", path: "d/burrow.db", backups });

describe("planOpen", () => {
  test("no tables and no applied migration: create, applying all", () => {
    expect(plan({ tables: [], applied: undefined })).toEqual({ kind: "create", pending: known });
    expect(plan({ tables: [], applied: [] })).toEqual({ kind: "create", pending: known }); // the bookkeeping table made, then a crash
  });

  test("an older database with migrations to apply: upgrade from its recorded version, or 0.1.0 when none is recorded", () => {
    expect(plan({ applied: applied(100) })).toEqual({ kind: "upgrade", from: "0.1.0", pending: [m(200)] });
    expect(plan({ applied: applied(100), recorded: "0.2.1" })).toEqual({ kind: "upgrade", from: "0.2.1", pending: [m(200)] });
  });

  test("everything applied: nothing to do, whether the version recorded is older, the same or missing", () => {
    for (const recorded of [undefined, "0.1.0", "0.3.0"]) expect(plan({ applied: applied(100, 200), recorded })).toEqual({ kind: "current", from: recorded ?? "0.1.0" });
  });

  test("an applied migration this program does not know: refused as newer, naming both versions", () => {
    const p = plan({ applied: applied(100, 200, 300), recorded: "0.4.0" }, ["d/burrow.db.bak-0.3.0"]);
    expect(p.kind).toBe("refuse");
    if (p.kind !== "refuse") return;
    expect(p.error.code).toBe("NEWER_DATABASE");
    expect(p.error.message).toContain("burrow 0.4.0");
    expect(p.error.message).toContain("this is burrow 0.3.0");
    expect(p.error.message).toContain("a migration this burrow does not know");
    expect(p.error.message).toContain("d/burrow.db.bak-0.3.0");
  });

  test("an unknown migration without a recorded version still refuses, naming 'a newer burrow'", () => {
    const p = plan({ applied: applied(100, 300) });
    expect(p.kind === "refuse" && p.error.message).toContain("a newer burrow");
  });

  test("a newer recorded version alone refuses too", () => {
    const p = plan({ applied: applied(100, 200), recorded: "0.3.1" });
    expect(p.kind === "refuse" && p.error.code).toBe("NEWER_DATABASE");
    expect(p.kind === "refuse" && p.error.message).toContain("Run burrow 0.3.1 or newer");
  });

  test("tables without burrow's bookkeeping: refused as not a burrow database", () => {
    const p = plan({ tables: ["notes"], applied: undefined });
    expect(p.kind === "refuse" && p.error.code).toBe("NOT_A_BURROW_DATABASE");
  });
});

describe("the version record", () => {
  test.each([
    ["0.1.0", 1000],
    ["1.2.3", 1_002_003],
    ["2.0.0-rc.1", 2_000_000],
    ["2146.999.999", 2_146_999_999],
  ])("%s is recorded as %d", (version, n) => {
    expect(encodeVersion(version)).toBe(n);
    expect(decodeVersion(n)).toBe(version.replace(/-.*/, ""));
  });

  test("0 is 'not recorded'; versions the header cannot hold are refused", () => {
    expect(decodeVersion(0)).toBeUndefined();
    for (const bad of ["1.2", "v1.2.3", "1.1000.0", "2147.0.0"]) expect(() => encodeVersion(bad)).toThrow();
  });

  test("versions compare by number, not as text", () => {
    expect(compareVersions("0.10.0", "0.9.0")).toBeGreaterThan(0);
    expect(compareVersions("1.0.0", "1.0.0")).toBe(0);
    expect(compareVersions("0.1.0", "0.1.1")).toBeLessThan(0);
  });
});
