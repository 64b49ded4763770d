/**
 * docs/policy.md names every variable, action and cap the engine has, and
 * every ngrok action it does not: a variable or action added without its
 * line there fails here.
 */
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { RETRY_VARIABLES } from "../../src/policy/actions/http-request-retry.ts";
import { ACTIONS, DEFAULT_POLICY_LIMITS, NOT_IN_BURROW, VARIABLES } from "../../src/policy/index.ts";

const page = readFileSync(join(import.meta.dir, "..", "..", "docs", "policy.md"), "utf8");

test("every variable is in docs/policy.md (a family's members as `.member` on its row)", () => {
  const missing = Object.keys(VARIABLES).filter((name) => !page.includes(`\`${name}\``) && !page.includes(`\`.${name.split(".").pop()}\``) && !page.includes(`\`${name}.`));
  expect(missing).toEqual([]);
});

test("every variable of http-request's retry_condition is in docs/policy.md", () => {
  expect(Object.keys(RETRY_VARIABLES).filter((name) => !page.includes(`\`${name}\``))).toEqual([]);
});

test("every action has its section, and every ngrok action burrow lacks is in the comparison", () => {
  const headings = page.split("\n").filter((l) => l.startsWith("### "));
  expect([...ACTIONS.keys()].filter((type) => !headings.some((h) => h.includes(type)))).toEqual([]);
  expect(Object.keys(NOT_IN_BURROW).filter((type) => !page.includes(`\`${type}\``))).toEqual([]);
});

test("the caps' defaults are the ones the code has", () => {
  const said = [
    `| rules in a policy (all phases) | ${DEFAULT_POLICY_LIMITS.maxRules.toLocaleString("en")} |`,
    `${DEFAULT_POLICY_LIMITS.costLimit.toLocaleString("en")} units`,
    `${DEFAULT_POLICY_LIMITS.maxExpressionLength.toLocaleString("en")} characters`,
    `${DEFAULT_POLICY_LIMITS.maxExpressionDepth} levels, ${DEFAULT_POLICY_LIMITS.maxExpressionNodes.toLocaleString("en")} parts`,
  ];
  expect(said.filter((text) => !page.includes(text))).toEqual([]);
});
