/**
 * The event catalogue against the code: each example has exactly its
 * schema's fields and passes it, each type is produced somewhere in src/
 * (a catalogue entry nothing emits is a promise nobody keeps), each
 * subscription pattern names what it says, and a user's own webhook can
 * never take an event about someone else or an admin's event.
 */
import { describe, expect, test } from "bun:test";
import { readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { EVENT_CATALOGUE, EVENT_TYPES, USER_EVENT_TYPES } from "../../src/core/events/catalogue.ts";
import { patternProblem, typesOf, wants } from "../../src/core/events/subscriptions.ts";

const SRC = join(import.meta.dir, "..", "..", "src");
const files = (dir: string): string[] => readdirSync(dir).flatMap((n) => (statSync(join(dir, n)).isDirectory() ? files(join(dir, n)) : /\.tsx?$/.test(n) ? [join(dir, n)] : []));
const code = files(SRC)
  .filter((f) => !f.endsWith(join("events", "catalogue.ts")))
  .map((f) => readFileSync(f, "utf8"))
  .join("\n");

describe("the catalogue", () => {
  for (const type of EVENT_TYPES) {
    test(`${type}: its example has exactly its fields and passes its schema; the code produces it`, () => {
      const spec = EVENT_CATALOGUE[type];
      expect(Object.keys(spec.example).sort()).toEqual(Object.keys(spec.data.entries).sort());
      const checked = v.safeParse(spec.data, spec.example);
      expect(checked.issues?.map((i) => i.message) ?? []).toEqual([]);
      expect(spec.about.length).toBeGreaterThan(20);
      expect(code).toContain(`"${type}"`);
    });
  }

  test("types are <subject>.<what>, in lower case", () => {
    for (const t of EVENT_TYPES) expect(t).toMatch(/^[a-z]+\.[a-z_]+$/);
  });
});

describe("subscriptions", () => {
  test("patterns name what they say; unknown ones are refused", () => {
    expect(typesOf("*")).toEqual(EVENT_TYPES);
    expect(typesOf("tunnel.*")).toEqual(["tunnel.online", "tunnel.offline", "tunnel.refused"]);
    expect(typesOf("token.revoked")).toEqual(["token.revoked"]);
    expect(typesOf("tunnel")).toEqual([]);
    expect(typesOf("tun*")).toEqual([]);
    expect(patternProblem("nope.*", false)).toContain("not an event type");
    expect(patternProblem("user.*", true)).toContain("names no event about your own");
    expect(patternProblem("*", true)).toBeUndefined();
  });

  test("a user's own webhook takes only their own events of the user types; an admin's takes what it names", () => {
    const own = { id: 1, userId: 7, patterns: ["*"] };
    const admin = { id: 2, userId: null, patterns: ["*"] };
    for (const t of EVENT_TYPES) {
      expect(wants(own, t, 7)).toBe(USER_EVENT_TYPES.includes(t));
      expect(wants(own, t, 8)).toBe(false);
      expect(wants(own, t, undefined)).toBe(false);
      expect(wants(admin, t, 8)).toBe(true);
    }
    expect(wants({ id: 3, userId: null, patterns: ["alert.*"] }, "alert.node_down", undefined)).toBe(true);
    expect(wants({ id: 3, userId: null, patterns: ["alert.*"] }, "node.down", undefined)).toBe(false);
  });
});
