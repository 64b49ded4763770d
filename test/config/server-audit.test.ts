/** --audit-days as `burrow server` reads it: the default, the flag, the environment, and mistakes. */
import { expect, test } from "bun:test";
import { parseServerConfig } from "../../src/config/server.ts";
import { UsageError } from "../../src/usage-error.ts";

const parse = (argv: string[], env: Record<string, string> = {}) => {
  const r = parseServerConfig(argv, env);
  if (r.help) throw new Error("help");
  return r.config;
};

test("the audit log keeps 90 days unless told otherwise", () => {
  expect(parse([]).auditDays).toBe(90);
});

test("--audit-days N, or BURROW_AUDIT_DAYS; the flag wins", () => {
  expect(parse(["--audit-days", "7"]).auditDays).toBe(7);
  expect(parse([], { BURROW_AUDIT_DAYS: "365" }).auditDays).toBe(365);
  expect(parse(["--audit-days", "30"], { BURROW_AUDIT_DAYS: "365" }).auditDays).toBe(30);
});

test.each(["0", "-1", "1.5", "ninety", ""])("--audit-days %p is a usage error naming the flag", (value) => {
  expect(() => parse(["--audit-days", value])).toThrow(UsageError);
  expect(() => parse(["--audit-days", value])).toThrow(/--audit-days/);
});
