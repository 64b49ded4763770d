/**
 * The Pike VM redirect and url-rewrite run their patterns on: the same
 * matches and replacements as a backtracking engine gives where both
 * agree on the semantics (leftmost-first, Go's replacement syntax), and
 * time linear in the input on the patterns that make a backtracking engine
 * take exponential time.
 */
import { describe, expect, test } from "bun:test";
import fc from "fast-check";
import { Regex, RegexTooSlow } from "../../src/policy/regex.ts";

const compile = (p: string): Regex => {
  const re = Regex.compile(p);
  if ("error" in re) throw new Error(re.error);
  return re;
};

describe("matches and replacements", () => {
  const cases: [pattern: string, input: string, template: string, want: string][] = [
    ["a+", "baaac", "X", "bXc"],
    ["(a+)(b*)", "xaabbyab", "[$1|$2]", "x[aa|bb]y[a|b]"],
    ["^/api/v1/", "/api/v1/users", "/api/v2/", "/api/v2/users"],
    ["x*", "abc", "-", "-a-b-c-"],
    ["(?i)HELLO", "say hello", "bye", "say bye"],
    ["/api/v1/users\\?id=([0-9]+)", "https://h/api/v1/users?id=42", "/api/v2/users/$1/", "https://h/api/v2/users/42/"],
    ["\\bfoo\\b", "foo food foo", "X", "X food X"],
    ["(?P<year>\\d{4})-(?P<m>\\d\\d)", "on 2024-05!", "${m}/${year}", "on 05/2024!"],
    ["a|ab", "ab", "X", "Xb"],
    ["$", "abc", "!", "abc!"],
    ["é+", "caféé", "E", "cafE"],
    ["😀", "a😀b", "x", "axb"],
    // Go's rules: $1x names group "1x" (none: empty), ${1}x is group 1 then x, $$ is $
    ["(a)", "a", "$1x|${1}x|$$", "|ax|$"],
    ["(a)(b)?", "a", "[$2]", "[]"],
  ];
  for (const [pattern, input, template, want] of cases) {
    test(`${pattern} on ${JSON.stringify(input)} with ${JSON.stringify(template)}`, () => {
      expect(compile(pattern).replaceAll(input, template)).toBe(want);
    });
  }

  test("the first match's groups, the whole match first", () => {
    expect(compile("/users/(\\d+)/(\\w+)").matchGroups("https://h/users/7/edit?x")).toEqual(["/users/7/edit", "7", "edit"]);
    expect(compile("nope").matchGroups("https://h/")).toBeUndefined();
  });

  test("patterns outside RE2 are refused with why: backreferences, lookaround", () => {
    expect(Regex.compile("(a)\\1")).toEqual({ error: expect.stringContaining("not an RE2 regular expression") });
    expect(Regex.compile("(?=a)")).toEqual({ error: expect.stringContaining("not an RE2 regular expression") });
    expect(Regex.compile("a".repeat(2000))).toEqual({ error: expect.stringContaining("longer than") });
  });

  test("agrees with JavaScript's engine on random inputs for patterns both read alike", () => {
    const patterns = ["a+b", "(ab|a)(c*)", "[a-c]+?c", "(a|b)*c", "^a.*b$", "(x?)(y+)", "b{2,3}", "[^a]+"];
    fc.assert(
      fc.property(fc.constantFrom(...patterns), fc.stringMatching(/^[abcxy\n]{0,24}$/), (p, input) => {
        const js = input.replace(new RegExp(p, "g"), (...m) => `<${m[0]}>`);
        const ours = compile(p).replaceAll(input, "<$0>");
        expect(ours).toBe(js);
      }),
      { numRuns: 400 },
    );
  });
});

describe("time linear in the input", () => {
  test("(a+)+$ on 20,000 a's and a b: a backtracking engine's ruin, done in well under a second", () => {
    const input = `${"a".repeat(20_000)}b`;
    const started = performance.now();
    expect(compile("(a+)+$").exec(input)).toBeNull();
    expect(compile("(a|a)*c").replaceAll(input, "x")).toBe(input);
    // a liveness bound, 10x above what a loaded machine takes
    expect(performance.now() - started).toBeLessThan(5000);
  });
});

describe("a bound on the steps of one replace", () => {
  test("a pattern quadratic under replace-all ((a*c)? on a long run of a's) stops at MAX_STEPS instead of holding the edge", () => {
    const input = "a".repeat(20_000);
    const started = performance.now();
    expect(() => compile("(a*c)?").replaceAll(input, "-")).toThrow(RegexTooSlow);
    expect(performance.now() - started).toBeLessThan(5000);
    // the same pattern on a URL-sized input is fine; as in Go, the empty match right after "aac" is not replaced (JavaScript's gives "--a-a-")
    expect(compile("(a*c)?").replaceAll("aacaa", "-")).toBe("-a-a-");
  });
});
