/**
 * The regex engine's jump to a pattern's literal prefix (regex.ts): a
 * search with no match under way goes straight to the next place the
 * literal every match begins with is, so a body find-and-replace of a
 * literal-led pattern costs about nothing per character of a large body;
 * and what it finds is what a search position by position finds
 * (JavaScript's own engine, on patterns both read alike).
 */
import { describe, expect, test } from "bun:test";
import { Regex } from "../../src/policy/regex.ts";

const compiled = (p: string) => {
  const re = Regex.compile(p);
  if ("error" in re) throw new Error(re.error);
  return re;
};

describe("a pattern led by a literal", () => {
  const cases: [string, string, string][] = [
    ["secret=(\\w+)", "a secret=1 secret= secret=abc secretsecret=x", "[$1]"],
    ["ab(c|d)*", "abababcdcd ab abx", "<$0>"],
    ["aa", "aaaaa", "b"],
    ["é(\\w)", "café écrit éé", "E$1"],
    ["x*", "", "-"],
  ];
  for (const [pattern, input, to] of cases) {
    test(`${pattern} on ${JSON.stringify(input)}: the same matches as a search position by position`, () => {
      const js = input.replace(new RegExp(pattern, "gu"), to.replace("$0", () => "$&"));
      expect(compiled(pattern).replaceAll(input, to.replace("$0", () => "${0}"))).toBe(js);
    });
  }

  test("on a megabyte of text with a few matches, a replace takes a few steps, not a few a character", () => {
    const body = `${"lorem ipsum dolor sit amet ".repeat(40_000)}token=123 ${"x".repeat(10_000)} token=456`;
    const budget = { steps: 1_000_000 };
    const out = compiled("token=(\\d+)").replaceAll(body, "token=***", budget);
    expect(out.endsWith("token=*** " + "x".repeat(10_000) + " token=***")).toBe(true);
    expect(1_000_000 - budget.steps).toBeLessThan(1000);
  });
});
