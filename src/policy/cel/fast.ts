/**
 * The shapes most rules are written in, compiled at load to plain
 * functions of the run's state, so that a request does not pay for CEL's
 * interpreter on them: a variable (or one header, one query parameter)
 * compared with a literal (`==`, `!=`, `<`...), tested with `startsWith`,
 * `endsWith`, `contains`, `in` a list of literals, `in` a map
 * (`'x' in req.headers`), an address `inCidrRange(s)` of literal ranges,
 * `hasReqHeader('x')`, and these joined with `&&`, `||` and `!`.
 *
 * The fast path is an answer or no answer: wherever CEL would end in an
 * error (a header that is not there, an index past a list's end) it gives
 * none (undefined), and the expression is evaluated by @bufbuild/cel as
 * any other, so what a rule says, its errors and their words included, is
 * CEL's. An expression of any other shape has no fast path at all. Its
 * results equal CEL's: the same JavaScript operations cel-es's standard
 * functions are (String.prototype.startsWith...), checked against it on
 * generated expressions and requests (test/policy/cel-fast-path.test.ts).
 */
import { CelScalar, type CelType } from "@bufbuild/cel";
import type { Constant, Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { VARIABLE_READERS, type Bindings } from "../context.ts";
import { phaseVariables, type Phase } from "../variables.ts";
import { cidrs } from "./functions.ts";
import { qualifiedName } from "./types.ts";

/** A value of the run, or undefined: no answer here (CEL's evaluation gives it). */
export type FastEvaluation = (b: Bindings) => unknown;

/** What the compiler knows of a part: its kind of value, and its value when it is a literal. */
type Kind = "string" | "int" | "bool" | "strings" | "headers" | "multimap" | "other";

interface Part {
  kind: Kind;
  run: FastEvaluation;
  /** A literal's value (string, bigint, boolean). */
  literal?: string | bigint | boolean;
  /** A list literal's values, when all are literals of one kind. */
  literals?: { kind: Kind; values: (string | bigint | boolean)[] };
  /** `req.headers` or `res.headers`: looked up directly on the working message, not through a map. */
  headersOf?: "req" | "res";
}

/** The variables whose values a fast part reads as JavaScript primitives. */
function kindOf(t: CelType): Kind {
  if (t === CelScalar.STRING) return "string";
  if (t === CelScalar.INT) return "int";
  if (t === CelScalar.BOOL) return "bool";
  if (t.kind === "list" && t.element === CelScalar.STRING) return "strings";
  if (t.kind === "map" && t.key === CelScalar.STRING && t.value.kind === "list" && t.value.element === CelScalar.STRING) return "multimap";
  return "other";
}

const SCALARS = new Set<Kind>(["string", "int", "bool"]);

/**
 * The fast path of a checked expression, or undefined when it has another
 * shape. Its result is a string, an int (bigint) or a bool, as CEL's is.
 */
export function compileFast(expr: Expr, phase: Phase): FastEvaluation | undefined {
  const part = new FastCompiler(phaseVariables(phase)).part(expr);
  return part && SCALARS.has(part.kind) && part.literals === undefined ? part.run : undefined;
}

class FastCompiler {
  constructor(private readonly variables: Readonly<Record<string, CelType>>) {}

  part(e: Expr): Part | undefined {
    const k = e.exprKind;
    switch (k.case) {
      case "constExpr":
        return constant(k.value);
      case "identExpr":
      case "selectExpr":
        return this.variable(e);
      case "listExpr":
        return this.list(k.value.elements, k.value.optionalIndices.length);
      case "callExpr":
        return this.call(k.value.function, k.value.target, k.value.args);
      default:
        return undefined;
    }
  }

  private variable(e: Expr): Part | undefined {
    if (e.exprKind.case === "selectExpr" && e.exprKind.value.testOnly) return undefined;
    const raw = qualifiedName(e);
    if (raw === undefined) return undefined;
    const name = raw.startsWith(".") ? raw.slice(1) : raw;
    const type = this.variables[name];
    const read = VARIABLE_READERS[name];
    if (!type || !read) return undefined;
    const kind = kindOf(type);
    if (name === "req.headers" || name === "res.headers") return { kind: "headers", run: read, headersOf: name === "req.headers" ? "req" : "res" };
    return { kind, run: read };
  }

  private list(elements: Expr[], optional: number): Part | undefined {
    if (optional > 0 || elements.length === 0) return undefined;
    const parts = elements.map((el) => this.part(el));
    const first = parts[0];
    if (!first || first.literal === undefined) return undefined;
    const values: (string | bigint | boolean)[] = [];
    for (const p of parts) {
      if (!p || p.literal === undefined || p.kind !== first.kind) return undefined;
      values.push(p.literal);
    }
    // a list is only ever an operand here (of `in`, of inCidrRanges): never a result
    return { kind: "other", run: () => undefined, literals: { kind: first.kind, values } };
  }

  private call(fn: string, target: Expr | undefined, args: Expr[]): Part | undefined {
    if (target) return this.method(fn, target, args);
    switch (fn) {
      case "_&&_":
      case "_||_":
        return this.logic(fn === "_&&_", args);
      case "!_": {
        const x = this.bool(args[0]);
        return x && { kind: "bool", run: (b) => {
          const v = x(b);
          return v === undefined ? undefined : !v;
        } };
      }
      case "_==_":
      case "_!=_":
        return this.equality(fn === "_==_", args);
      case "_<_":
      case "_<=_":
      case "_>_":
      case "_>=_":
        return this.order(fn, args);
      case "@in":
        return this.membership(args);
      case "_[_]":
        return this.index(args);
      case "inCidrRange":
      case "inCidrRanges":
        return this.cidr(fn, args);
      case "hasReqHeader":
      case "hasResHeader":
        return this.hasHeader(fn === "hasReqHeader" ? "req" : "res", args);
      default:
        return undefined;
    }
  }

  /** A part that gives a bool (or no answer). */
  private bool(e: Expr | undefined): FastEvaluation | undefined {
    const p = e && this.part(e);
    return p && p.kind === "bool" ? p.run : undefined;
  }

  private logic(and: boolean, args: Expr[]): Part | undefined {
    const runs = args.map((a) => this.bool(a));
    if (runs.some((r) => r === undefined)) return undefined;
    const all = runs as FastEvaluation[];
    // CEL's && and || are commutative over errors (false && error is false either way round); an
    // operand without an answer leaves the whole to CEL, which knows how
    return {
      kind: "bool",
      run: and
        ? (b) => {
            let unknown = false;
            for (const r of all) {
              const v = r(b);
              if (v === false) return false;
              if (v === undefined) unknown = true;
            }
            return unknown ? undefined : true;
          }
        : (b) => {
            let unknown = false;
            for (const r of all) {
              const v = r(b);
              if (v === true) return true;
              if (v === undefined) unknown = true;
            }
            return unknown ? undefined : false;
          },
    };
  }

  /** `==` and `!=` of two parts of the same scalar kind (CEL's equality of other kinds is more than ===). */
  private equality(equal: boolean, args: Expr[]): Part | undefined {
    const [l, r] = args.map((a) => this.part(a));
    if (!l || !r || l.kind !== r.kind || !SCALARS.has(l.kind) || l.literals || r.literals) return undefined;
    const [a, c] = [l.run, r.run];
    if (r.literal !== undefined) {
      const lit = r.literal;
      return { kind: "bool", run: equal ? (b) => { const v = a(b); return v === undefined ? undefined : v === lit; } : (b) => { const v = a(b); return v === undefined ? undefined : v !== lit; } };
    }
    return {
      kind: "bool",
      run: (b) => {
        const x = a(b);
        if (x === undefined) return undefined;
        const y = c(b);
        if (y === undefined) return undefined;
        return equal ? x === y : x !== y;
      },
    };
  }

  /** `<`, `<=`, `>`, `>=` of two ints or two strings (cel-es compares both as JavaScript does). */
  private order(fn: string, args: Expr[]): Part | undefined {
    const [l, r] = args.map((a) => this.part(a));
    if (!l || !r || l.kind !== r.kind || (l.kind !== "int" && l.kind !== "string") || l.literals || r.literals) return undefined;
    const compare = fn === "_<_" ? (x: never, y: never) => x < y : fn === "_<=_" ? (x: never, y: never) => x <= y : fn === "_>_" ? (x: never, y: never) => x > y : (x: never, y: never) => x >= y;
    const [a, c] = [l.run, r.run];
    return {
      kind: "bool",
      run: (b) => {
        const x = a(b);
        if (x === undefined) return undefined;
        const y = c(b);
        if (y === undefined) return undefined;
        return compare(x as never, y as never);
      },
    };
  }

  /** `x in [literals]`, `'name' in req.headers` (or a query's, cookies' map). */
  private membership(args: Expr[]): Part | undefined {
    const [l, r] = args.map((a) => this.part(a));
    if (!l || !r || l.literals) return undefined;
    if (r.literals) {
      if (r.literals.kind !== l.kind || !SCALARS.has(l.kind)) return undefined;
      const set = new Set<unknown>(r.literals.values);
      const a = l.run;
      return { kind: "bool", run: (b) => { const v = a(b); return v === undefined ? undefined : set.has(v); } };
    }
    if (l.kind !== "string") return undefined;
    const key = l.run;
    if (r.headersOf) {
      const of = r.headersOf;
      return { kind: "bool", run: (b) => { const k = key(b); return k === undefined ? undefined : b.header(of, k as string) !== undefined; } };
    }
    if (r.kind !== "multimap") return undefined;
    const map = r.run;
    return { kind: "bool", run: (b) => { const k = key(b); return k === undefined ? undefined : (map(b) as Map<string, unknown>).has(k as string); } };
  }

  /** `req.headers['x']`, `req.query_params['x']` (a list of strings), and `[n]` of such a list. */
  private index(args: Expr[]): Part | undefined {
    const [of, at] = args.map((a) => this.part(a));
    if (!of || !at || at.literal === undefined) return undefined;
    if ((of.headersOf || of.kind === "multimap") && typeof at.literal === "string") {
      const name = at.literal;
      if (of.headersOf) {
        const side = of.headersOf;
        return { kind: "strings", run: (b) => b.header(side, name) };
      }
      const map = of.run;
      return { kind: "strings", run: (b) => (map(b) as Map<string, string[]>).get(name) };
    }
    if (of.kind === "strings" && typeof at.literal === "bigint") {
      const i = at.literal;
      if (i < 0n || i > 1_000_000n) return undefined;
      const n = Number(i);
      const list = of.run;
      return { kind: "string", run: (b) => (list(b) as readonly string[] | undefined)?.[n] };
    }
    return undefined;
  }

  /** inCidrRange(ip, 'range'), inCidrRanges(ip, ['range', ...]): the ranges parsed once, here. */
  private cidr(fn: string, args: Expr[]): Part | undefined {
    const [ip, ranges] = args.map((a) => this.part(a));
    if (!ip || ip.kind !== "string" || ip.literals || !ranges) return undefined;
    let list: readonly string[];
    if (fn === "inCidrRange" && typeof ranges.literal === "string") list = [ranges.literal];
    else if (fn === "inCidrRanges" && ranges.literals?.kind === "string") list = ranges.literals.values as string[];
    else return undefined;
    const cidrList = cidrs(list);
    const address = ip.run;
    return { kind: "bool", run: (b) => { const a = address(b); return a === undefined ? undefined : cidrList.matches(a as string); } };
  }

  private hasHeader(of: "req" | "res", args: Expr[]): Part | undefined {
    const name = args.length === 1 ? this.part(args[0]!) : undefined;
    if (typeof name?.literal !== "string") return undefined;
    const n = name.literal;
    return { kind: "bool", run: (b) => b.header(of, n) !== undefined };
  }

  /** startsWith, endsWith, contains: String.prototype's, which cel-es's standard functions are. */
  private method(fn: string, target: Expr, args: Expr[]): Part | undefined {
    if (fn !== "startsWith" && fn !== "endsWith" && fn !== "contains") return undefined;
    const s = this.part(target);
    const arg = args.length === 1 ? this.part(args[0]!) : undefined;
    if (!s || !arg || s.kind !== "string" || arg.kind !== "string" || s.literals || arg.literals) return undefined;
    const of = s.run;
    if (arg.literal !== undefined) {
      const lit = arg.literal as string;
      const test = fn === "startsWith" ? (x: string) => x.startsWith(lit) : fn === "endsWith" ? (x: string) => x.endsWith(lit) : (x: string) => x.includes(lit);
      return { kind: "bool", run: (b) => { const v = of(b); return v === undefined ? undefined : test(v as string); } };
    }
    const other = arg.run;
    const test = fn === "startsWith" ? String.prototype.startsWith : fn === "endsWith" ? String.prototype.endsWith : String.prototype.includes;
    return {
      kind: "bool",
      run: (b) => {
        const v = of(b);
        if (v === undefined) return undefined;
        const w = other(b);
        return w === undefined ? undefined : test.call(v as string, w as string);
      },
    };
  }
}

/** A literal of a kind the fast path compares: strings, ints and bools (others have CEL's own equality). */
function constant(c: Constant): Part | undefined {
  const k = c.constantKind;
  if (k.case === "stringValue" || k.case === "int64Value" || k.case === "boolValue") {
    const value = k.value;
    return { kind: k.case === "stringValue" ? "string" : k.case === "int64Value" ? "int" : "bool", run: () => value, literal: value };
  }
  return undefined;
}
