/**
 * CEL's conformance cases, as @bufbuild/cel-spec ships them, run two ways:
 *
 * - through @bufbuild/cel itself, as its own repository runs them
 *   (cel-es's conformance, parser and comprehension tests), skipping only
 *   the cases it does not claim: the lists in
 *   test/fixtures/policy/cel-es-conformance-skips.json are cel-es's own
 *   (packages/cel/src/*.test.ts), so a case the library stops passing
 *   fails here;
 * - through the policy engine's own compile path (type checker, cost
 *   counter, our functions over the standard ones, the planner) for the
 *   cases a policy could hold: no bindings, no proto messages, no
 *   container. A case that evaluates must check and evaluate to the same
 *   value there; a case that expects an error may be refused at load.
 *
 * The counts are printed at the end (they are what the docs quote).
 */
import { afterAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { celEnv, celList, celMap, celUint, isCelError, isCelList, isCelMap, isCelType, isCelUint, listType, mapType, objectType, parse, plan, CelScalar, type CelInput, type CelResult, type CelType, type CelValue } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import type { Value } from "@bufbuild/cel-spec/cel/expr/value_pb.js";
import { getComprehensionSuite, getConformanceSuite, getParsingSuite, type IncrementalTest, type IncrementalTestSuite } from "@bufbuild/cel-spec/testdata/tests.js";
import { getTestRegistry } from "@bufbuild/cel-spec/testdata/registry.js";
import { KindAdorner, toDebugString } from "@bufbuild/cel-spec/testdata/to-debug-string.js";
import { equals, type Registry } from "@bufbuild/protobuf";
import { anyUnpack } from "@bufbuild/protobuf/wkt";
import { compileExpression } from "../../src/policy/cel/compile.ts";
import { Budget } from "../../src/policy/cel/evaluation.ts";
import { DEFAULT_POLICY_LIMITS } from "../../src/policy/limits.ts";

const SKIPS = JSON.parse(readFileSync(join(import.meta.dir, "..", "fixtures", "policy", "cel-es-conformance-skips.json"), "utf8")) as {
  eval: Record<string, string[]>;
  parse: string[];
  parsingExpressions: string[];
};
const registry = getTestRegistry();

interface Case {
  path: string[];
  test: IncrementalTest;
}
function cases(suite: IncrementalTestSuite, prefix: string[] = []): Case[] {
  return [
    ...suite.suites.flatMap((s) => cases(s, [...prefix, s.name])),
    ...suite.tests.map((t) => ({ path: [...prefix, t.original.name], test: t })),
  ];
}
const skippedBy = (prefixes: string[]) => (path: string[]) => prefixes.some((p) => `${path.join("/")}/`.startsWith(`${p}/`));
const evalSkipped = skippedBy(Object.entries(SKIPS.eval).flatMap(([section, rest]) => rest.map((r) => (r === "" ? section : `${section}/${r}`))));

/** An expected Value as the library takes values. */
function fromValue(value: Value, reg: Registry): CelInput {
  const k = value.kind;
  switch (k.case) {
    case "nullValue":
      return null;
    case "uint64Value":
      return celUint(k.value);
    case "listValue":
      return celList(k.value.values.map((e) => fromValue(e, reg)));
    case "mapValue": {
      const m = new Map<unknown, CelInput>();
      for (const e of k.value.entries) m.set(fromValue(e.key!, reg), fromValue(e.value!, reg));
      return celMap(m as never);
    }
    case "objectValue": {
      const msg = anyUnpack(k.value, reg);
      if (!msg) throw new Error(`unknown message ${k.value.typeUrl}`);
      return msg as never;
    }
    case "typeValue":
      return typeNamed(k.value);
    case "enumValue":
      return BigInt(k.value.value);
    case undefined:
      throw new Error("an empty value");
    default:
      return k.value as CelInput;
  }
}

function typeNamed(name: string): CelType {
  const scalars: Record<string, CelType> = { int: CelScalar.INT, uint: CelScalar.UINT, double: CelScalar.DOUBLE, bool: CelScalar.BOOL, string: CelScalar.STRING, bytes: CelScalar.BYTES, null_type: CelScalar.NULL, type: CelScalar.TYPE };
  if (scalars[name]) return scalars[name]!;
  if (name === "list") return listType(CelScalar.DYN);
  if (name === "map") return mapType(CelScalar.DYN, CelScalar.DYN);
  return objectType(name);
}

/** Strict equality of a result and an expected value: same CEL type, same value (NaN equal to NaN), lists and maps deep. */
function same(a: unknown, b: unknown): boolean {
  if (typeof a === "number" && typeof b === "number") return (Number.isNaN(a) && Number.isNaN(b)) || a === b;
  if (typeof a !== "object" || a === null || typeof b !== "object" || b === null) return a === b;
  if (a instanceof Uint8Array && b instanceof Uint8Array) return Buffer.from(a).equals(Buffer.from(b));
  if (isCelUint(a) && isCelUint(b)) return a.value === b.value;
  if (isCelType(a) && isCelType(b)) return a.name === b.name;
  if (isCelList(a) && isCelList(b)) {
    if (a.size !== b.size) return false;
    for (let i = 0; i < a.size; i++) if (!same(a.get(i), b.get(i))) return false;
    return true;
  }
  if (isCelMap(a) && isCelMap(b)) {
    if (a.size !== b.size) return false;
    for (const [key, value] of b.entries()) if (!same(a.get(key as never), value)) return false;
    return true;
  }
  const ma = messageOf(a);
  const mb = messageOf(b);
  if (ma && mb) {
    if (ma.$typeName !== mb.$typeName) return false;
    const desc = registry.getMessage(ma.$typeName);
    return desc !== undefined && equals(desc, ma as never, mb as never, { registry, unpackAny: true });
  }
  return false;
}
function messageOf(v: object): { $typeName: string } | undefined {
  if ("$typeName" in v) return v as { $typeName: string };
  if ("message" in v && "desc" in v) return (v as { message: { $typeName: string } }).message;
  return undefined;
}

/** Whether `result` is what the case expects (an error, a value, or true). */
function expected(t: IncrementalTest, result: CelResult): boolean {
  const m = t.original.resultMatcher;
  switch (m.case) {
    case "evalError":
    case "anyEvalErrors":
      return isCelError(result);
    case "value":
      return !isCelError(result) && same(result, fromValue(m.value, registry));
    case "typedResult":
      return m.value.result === undefined || (!isCelError(result) && same(result, fromValue(m.value.result, registry)));
    case undefined:
      return result === true;
    default:
      throw new Error(`unsupported result: ${m.case}`);
  }
}

/** A case run as cel-es runs it: its container, its bindings, the strings extension. */
function libraryRun(t: IncrementalTest): CelResult {
  const env = celEnv({ registry, namespace: t.original.container, funcs: strings });
  const bindings: Record<string, CelInput> = {};
  for (const [name, b] of Object.entries(t.original.bindings)) {
    if (b.kind.case !== "value") throw new Error(`binding ${name}: ${b.kind.case}`);
    bindings[name] = fromValue(b.kind.value, registry);
  }
  return plan(env, parse(t.original.expr))(bindings);
}

const counts = { conformance: 0, claimed: 0, passed: 0, parse: 0, parsePassed: 0, ours: 0, oursPassed: 0, oursRefusedErrors: 0, oursRefusedUnchecked: 0 };

describe("the conformance cases @bufbuild/cel claims, through the library", () => {
  const all = cases(getConformanceSuite());
  counts.conformance = all.length;
  const claimed = all.filter((c) => !evalSkipped(c.path));
  counts.claimed = claimed.length;
  test(`${claimed.length} of ${all.length} cases evaluate as the spec says`, () => {
    const failed: string[] = [];
    for (const c of claimed) {
      let ok: boolean;
      try {
        ok = expected(c.test, libraryRun(c.test));
      } catch (err) {
        ok = false;
        failed.push(`${c.path.join("/")}: ${String(err).slice(0, 120)}`);
        continue;
      }
      if (ok) counts.passed++;
      else failed.push(`${c.path.join("/")}: ${c.test.original.expr}`);
    }
    expect(failed).toEqual([]);
  });
});

describe("the parser cases @bufbuild/cel claims", () => {
  const run = (c: Case) => {
    if (c.test.ast) return toDebugString(parse(c.test.original.expr), KindAdorner.singleton) === c.test.ast;
    try {
      parse(c.test.original.expr);
      return false;
    } catch {
      return true;
    }
  };
  const parseSkipped = skippedBy(SKIPS.parse);
  const fromConformance = cases(getConformanceSuite()).filter((c) => c.test.ast !== undefined && !parseSkipped(c.path));
  const parsing = cases(getParsingSuite()).filter((c) => !SKIPS.parsingExpressions.some((e) => e.replace(/\s+/g, " ").trim() === c.test.original.expr.replace(/\s+/g, " ").trim()));
  const comprehension = cases(getComprehensionSuite());
  for (const [name, list] of [["the conformance suite's ASTs", fromConformance], ["cel-go's parser cases", parsing], ["cel-go's comprehension cases", comprehension]] as const) {
    test(`${name}: ${list.length} cases parse to the AST cel-go makes (or fail where it fails)`, () => {
      counts.parse += list.length;
      const failed = list.filter((c) => !run(c)).map((c) => `${c.path.join("/")}: ${c.test.original.expr.slice(0, 80)}`);
      counts.parsePassed += list.length - failed.length;
      expect(failed).toEqual([]);
    });
  }
});

/** Sections whose cases a policy could hold: the language itself, no messages. */
const POLICY_SECTIONS = new Set(["basic", "comparisons", "conversions", "fp_math", "integer_math", "lists", "logic", "macros", "parse", "plumbing", "string", "string_ext", "timestamps"]);

describe("the same cases through the policy engine's compile path", () => {
  const limits = { ...DEFAULT_POLICY_LIMITS, maxExpressionLength: 100_000, maxExpressionDepth: 250, maxExpressionNodes: 100_000, costLimit: Number.MAX_SAFE_INTEGER };
  const scope = { budget: new Budget(Number.MAX_SAFE_INTEGER), caps: limits, variables: {}, header: () => undefined, queryParam: () => undefined, cookie: () => undefined };
  const relevant = cases(getConformanceSuite()).filter(
    (c) =>
      POLICY_SECTIONS.has(c.path[0]!) &&
      !evalSkipped(c.path) &&
      Object.keys(c.test.original.bindings).length === 0 &&
      c.test.original.container === "" &&
      c.test.original.typeEnv.length === 0 &&
      !/[A-Z][A-Za-z]*\{|google\.protobuf\.(?!Timestamp\b|Duration\b)|\bcel\.expr\b|TestAllTypes|NestedEnum|GlobalEnum/.test(c.test.original.expr),
  );
  test(`${relevant.length} cases check and evaluate as through the library, or are refused at load where a checker refuses them`, () => {
    counts.ours = relevant.length;
    const failed: string[] = [];
    for (const c of relevant) {
      const wantsError = c.test.original.resultMatcher.case === "evalError" || c.test.original.resultMatcher.case === "anyEvalErrors";
      const compiled = compileExpression(c.test.original.expr, "on_http_request", "value", limits);
      if ("kind" in compiled) {
        // the spec marks the cases that only evaluate with checking off (an unbound name or a type
        // error absorbed by `|| true`); the parse section's receiver-name cases call functions no
        // environment declares: a checker refuses both, as cel-go's does
        const unchecked = c.test.original.disableCheck || (c.path[0] === "parse" && compiled.message.startsWith("undeclared reference"));
        if (wantsError) counts.oursRefusedErrors++;
        else if (unchecked) counts.oursRefusedUnchecked++;
        else failed.push(`${c.path.join("/")}: refused at load: ${compiled.message} (${c.test.original.expr})`);
        continue;
      }
      if (expected(c.test, compiled.evaluate(scope))) counts.oursPassed++;
      else failed.push(`${c.path.join("/")}: ${c.test.original.expr}`);
    }
    counts.oursPassed += counts.oursRefusedErrors + counts.oursRefusedUnchecked;
    expect(failed).toEqual([]);
  });
});

afterAll(() => {
  console.log(
    `CEL conformance: ${counts.passed}/${counts.claimed} claimed cases pass through @bufbuild/cel (${counts.conformance} in the suite); ` +
      `parser: ${counts.parsePassed}/${counts.parse}; policy engine: ${counts.oursPassed}/${counts.ours} (of which refused at load: ${counts.oursRefusedErrors} that expect an error, ${counts.oursRefusedUnchecked} that evaluate only unchecked)`,
  );
});
