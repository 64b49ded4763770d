/** A command's --help made from its flag table (src/cli/usage.ts). */
import { describe, expect, test } from "bun:test";
import type { FlagTable } from "../../src/config/flags.ts";
import { flagGroups, helpText, wrap, type CommandDoc } from "../../src/cli/usage.ts";

const FLAGS = {
  port: { type: "string", arg: "N", env: true, default: "8080", help: "the port to listen on" },
  name: { type: "string", arg: "S", multiple: true, defaultText: "a random one", help: "ask for this name" },
  proxy: { type: "string", arg: "URL", alsoEnv: ["HTTPS_PROXY", "ALL_PROXY"], help: "go through this proxy" },
  quiet: { type: "boolean", help: "say less" },
} as const satisfies FlagTable;

const DOC: CommandDoc = { name: "demo", usage: ["burrow demo [flags]"], about: "Does a demo.", flags: FLAGS };

describe("helpText", () => {
  const text = helpText(DOC);

  test("prints the usage, the words, each flag once with its argument, and --help last", () => {
    expect(text).toStartWith("Usage: burrow demo [flags]\n\nDoes a demo.\n\nFlags:\n");
    const labels = [...text.matchAll(/^ {2}(-h, )?--([a-z-]+)/gm)].map((m) => m[2]);
    expect(labels).toEqual(["port", "name", "proxy", "quiet", "help"]);
    expect(text).toContain("  --port N ");
    expect(text).toEndWith("  -h, --help              this text\n");
  });

  test("says a flag's default, whether it repeats and where else it is read from", () => {
    expect(text).toMatch(/--port N +the port to listen on \(or BURROW_PORT\) +\(default 8080\)\n/);
    expect(text).toMatch(/--name S +ask for this name \(repeatable\) +\(default: a random one\)\n/);
    expect(text).toContain("go through this proxy (or HTTPS_PROXY / ALL_PROXY)");
  });

  test("leaves out BURROW_<FLAG> when the command's text says it once for all", () => {
    expect(helpText({ ...DOC, envSaidOnce: true })).not.toContain("BURROW_PORT");
  });

  test("keeps the flags' words within 78 columns", () => {
    const long = { ...FLAGS, port: { ...FLAGS.port, help: "a port ".repeat(30).trim() } };
    for (const line of helpText({ ...DOC, flags: long }).split("\n")) if (!line.includes("(default")) expect(line.length).toBeLessThanOrEqual(78);
  });
});

describe("flagGroups", () => {
  test("a flag the parser takes but no group shows is a bug, said at once", () => {
    expect(() => flagGroups({ ...DOC, groups: [{ title: "Flags:", flags: ["port", "name", "proxy"] }] })).toThrow("--quiet in no help group");
  });

  test("a group naming a flag the parser does not take is a bug too", () => {
    expect(() => flagGroups({ ...DOC, groups: [{ title: "Flags:", flags: ["port", "name", "proxy", "quiet", "loud"] }] })).toThrow("--loud which it does not take");
  });
});

test("wrap keeps words whole", () => {
  expect(wrap("one two three four", 9)).toEqual(["one two", "three", "four"]);
});
