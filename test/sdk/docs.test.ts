/**
 * docs/sdk.md is written by hand; this keeps it true to the declarations
 * the package ships (sdk/index.d.ts): every option of forward() has a row
 * in the options table and every row is an option, and every event and
 * export the declarations name is in the page.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dir, "..", "..");
const declarations = readFileSync(join(ROOT, "sdk", "index.d.ts"), "utf8");
const page = readFileSync(join(ROOT, "docs", "sdk.md"), "utf8");

/** The property names of `interface name { ... }` in the declarations. */
function members(name: string): string[] {
  const body = new RegExp(`export interface ${name} \\{([\\s\\S]*?)\\n\\}`).exec(declarations)?.[1] ?? "";
  return [...body.matchAll(/^\s{2}(\w+)\??:/gm)].map((m) => m[1]!);
}

test("every option of forward() is in the page's table, and every row of it is an option", () => {
  const options = members("ForwardOptions");
  expect(options.length).toBeGreaterThan(10);
  const table = page.slice(page.indexOf("| option | for | what |"), page.indexOf("Give exactly one of"));
  const rows = [...table.matchAll(/^\| `(\w+)`(?:, `(\w+)`)? \|/gm)].flatMap((m) => [m[1]!, ...(m[2] ? [m[2]] : [])]);
  expect(rows.sort()).toEqual([...options].sort());
});

test("every event, export and connect() option of the declarations is in the page", () => {
  const events = members("TunnelEvents");
  expect(events).toEqual(["request", "reconnecting", "online", "closed"]);
  for (const e of events) expect(page).toContain(`"${e}"`);
  const exported = [...declarations.matchAll(/^export declare (?:class|function) (\w+)/gm)].map((m) => m[1]!);
  expect(exported.sort()).toEqual(["BurrowError", "Reached", "Session", "Tunnel", "connect", "forward", "reach"]);
  for (const name of exported) expect(page).toContain(name);
  for (const option of members("ConnectOptions")) expect(page).toContain(`\`${option}\``);
  for (const option of members("ReachOptions")) expect(page).toContain(`\`${option}\``);
  for (const e of members("ReachedEvents")) expect(page).toContain(`"${e}"`);
});
