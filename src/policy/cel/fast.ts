/**
 * The shapes most rules are written in, compiled at load to plain
 * JavaScript of the run's state, so that a request does not pay for CEL's
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
 *
 * What comes out is the text of one JavaScript expression (FastCode), not
 * closures calling closures: a phase's conditions become one function
 * (policy/phase-matcher.ts), which the JIT compiles as one piece of code
 * with each read a call it can inline. The text holds no part of the
 * policy: every literal, name and range is a constant the function is made
 * with (`K3`), every variable a reader it is given (`R2`), so nothing a
 * policy says is ever read as code.
 */
import { CelScalar, type CelType } from "@bufbuild/cel";
import type { Constant, Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { VARIABLE_READERS, type Bindings } from "../context.ts";
import { phaseVariables, type Phase } from "../variables.ts";
import { cidrs } from "./functions.ts";
import { qualifiedName } from "./types.ts";

/** A value of the run, or undefined: no answer here (CEL's evaluation gives it). */
export type FastEvaluation = (b: Bindings) => unknown;

/**
 * One expression's fast path as code: `text` is a JavaScript expression
 * of `b` (the run's Bindings), of the constants `K0`... and readers
 * `R0`... in `scope`, and of temporaries `t0`... (`temps` of them) that
 * the function it is put in declares.
 */
export interface FastCode {
  text: string;
  temps: number;
}

/**
 * What generated code is made with: the constants and readers its text
 * names, each given a name once however often it is used. Shared by every
 * expression of a phase's function.
 */
export class CodeScope {
  readonly constants: unknown[] = [];
  readonly readers: ((b: Bindings) => unknown)[] = [];
  /** Temporaries of the expression being compiled, and the most any needed (each expression's start again from t0: none lives past its expression). */
  private temps = 0;
  private mostTemps = 0;

  constant(value: unknown): string {
    let i = this.constants.indexOf(value);
    if (i < 0) i = this.constants.push(value) - 1;
    return `K${i}`;
  }

  reader(read: (b: Bindings) => unknown): string {
    let i = this.readers.indexOf(read);
    if (i < 0) i = this.readers.push(read) - 1;
    return `R${i}`;
  }

  temp(): string {
    const t = `t${this.temps++}`;
    if (this.temps > this.mostTemps) this.mostTemps = this.temps;
    return t;
  }

  /** An expression begins: its temporaries are t0 on, those of the one before no longer read. */
  nextExpression(): void {
    this.temps = 0;
  }

  /**
   * A function of `b` (and `params`) whose body is `body`, made with this
   * scope's constants and readers bound as its closure's consts; its
   * temporaries declared in it.
   */
  make<F>(params: string, body: string): F {
    const consts = [...this.constants.map((_, i) => `K${i} = K[${i}]`), ...this.readers.map((_, i) => `R${i} = R[${i}]`)];
    const temps = this.mostTemps > 0 ? `let ${Array.from({ length: this.mostTemps }, (_, i) => `t${i}`).join(", ")};\n` : "";
    const source = `${consts.length ? `const ${consts.join(", ")};\n` : ""}return function (${params}) {\n${temps}${body}\n};`;
    return new Function("K", "R", source)(this.constants, this.readers) as F;
  }
}

/** What the compiler knows of a part: its kind of value, and its value when it is a literal. */
type Kind = "string" | "int" | "bool" | "strings" | "headers" | "multimap" | "other";

interface Part {
  kind: Kind;
  /** A JavaScript expression giving the part's value, or undefined (no answer). */
  code: string;
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
 * The fast path of a checked expression as code in `scope`, or undefined
 * when it has another shape. Its value is a string, an int (bigint) or a
 * bool, as CEL's is, or undefined.
 */
export function fastCode(expr: Expr, phase: Phase, scope: CodeScope): string | undefined {
  scope.nextExpression();
  const part = new FastCompiler(phaseVariables(phase), scope).part(expr);
  return part && SCALARS.has(part.kind) && part.literals === undefined ? part.code : undefined;
}

/** `(t = x) === undefined ? undefined : then`: a value that has no answer when `x` has none. */
function given(t: string, x: string, then: string): string {
  return `((${t} = ${x}) === undefined ? undefined : ${then})`;
}

class FastCompiler {
  constructor(
    private readonly variables: Readonly<Record<string, CelType>>,
    private readonly scope: CodeScope,
  ) {}

  part(e: Expr): Part | undefined {
    const k = e.exprKind;
    switch (k.case) {
      case "constExpr":
        return this.constant(k.value);
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

  /** A literal of a kind the fast path compares: strings, ints and bools (others have CEL's own equality). */
  private constant(c: Constant): Part | undefined {
    const k = c.constantKind;
    if (k.case === "stringValue" || k.case === "int64Value" || k.case === "boolValue") {
      const value = k.value;
      return { kind: k.case === "stringValue" ? "string" : k.case === "int64Value" ? "int" : "bool", code: this.scope.constant(value), literal: value };
    }
    return undefined;
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
    const code = `${this.scope.reader(read)}(b)`;
    if (name === "req.headers" || name === "res.headers") return { kind: "headers", code, headersOf: name === "req.headers" ? "req" : "res" };
    return { kind, code };
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
    return { kind: "other", code: "undefined", literals: { kind: first.kind, values } };
  }

  private call(fn: string, target: Expr | undefined, args: Expr[]): Part | undefined {
    if (target) return this.method(fn, target, args);
    switch (fn) {
      case "_&&_":
      case "_||_":
        return this.logic(fn === "_&&_", args);
      case "!_": {
        const x = this.bool(args[0]);
        if (x === undefined) return undefined;
        const t = this.scope.temp();
        return { kind: "bool", code: given(t, x, `!${t}`) };
      }
      case "_==_":
      case "_!=_":
        return this.compare(fn === "_==_" ? "===" : "!==", args, SCALARS);
      case "_<_":
      case "_<=_":
      case "_>_":
      case "_>=_":
        // ints and strings only: cel-es compares both as JavaScript does
        return this.compare(fn === "_<_" ? "<" : fn === "_<=_" ? "<=" : fn === "_>_" ? ">" : ">=", args, ORDERED);
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

  /** A part that gives a bool (or no answer), as code. */
  private bool(e: Expr | undefined): string | undefined {
    const p = e && this.part(e);
    return p && p.kind === "bool" ? p.code : undefined;
  }

  /**
   * `&&` and `||`: the operands in order until one decides (false for
   * `&&`, true for `||`); otherwise no answer when one had none. CEL's
   * `&&` and `||` are commutative over errors (false && error is false
   * either way round); an operand without an answer leaves the whole to
   * CEL, which knows how.
   */
  private logic(and: boolean, args: Expr[]): Part | undefined {
    const codes = args.map((a) => this.bool(a));
    if (codes.some((c) => c === undefined)) return undefined;
    const decides = and ? "false" : "true";
    const temps = codes.map(() => this.scope.temp());
    const unknown = temps.map((t) => `${t} === undefined`).join(" || ");
    let code = `(${unknown} ? undefined : ${and})`;
    for (let i = codes.length - 1; i >= 0; i--) code = `(${temps[i]} = ${codes[i]}) === ${decides} ? ${decides} : ${code}`;
    return { kind: "bool", code: `(${code})` };
  }

  /** `==`, `!=` of two parts of the same scalar kind (CEL's equality of other kinds is more than ===); `<`... of ints or strings. */
  private compare(op: string, args: Expr[], kinds: ReadonlySet<Kind>): Part | undefined {
    const [l, r] = args.map((a) => this.part(a));
    if (!l || !r || l.kind !== r.kind || !kinds.has(l.kind) || l.literals || r.literals) return undefined;
    const x = this.scope.temp();
    if (r.literal !== undefined) return { kind: "bool", code: given(x, l.code, `${x} ${op} ${r.code}`) };
    const y = this.scope.temp();
    return { kind: "bool", code: given(x, l.code, given(y, r.code, `${x} ${op} ${y}`)) };
  }

  /** `x in [literals]`, `'name' in req.headers` (or a query's, cookies' map). */
  private membership(args: Expr[]): Part | undefined {
    const [l, r] = args.map((a) => this.part(a));
    if (!l || !r || l.literals) return undefined;
    const k = this.scope.temp();
    if (r.literals) {
      if (r.literals.kind !== l.kind || !SCALARS.has(l.kind)) return undefined;
      const set = this.scope.constant(new Set<unknown>(r.literals.values));
      return { kind: "bool", code: given(k, l.code, `${set}.has(${k})`) };
    }
    if (l.kind !== "string") return undefined;
    if (r.headersOf) return { kind: "bool", code: given(k, l.code, `b.header("${r.headersOf}", ${k}) !== undefined`) };
    if (r.kind !== "multimap") return undefined;
    return { kind: "bool", code: given(k, l.code, `${r.code}.has(${k})`) };
  }

  /** `req.headers['x']`, `req.query_params['x']` (a list of strings), and `[n]` of such a list. */
  private index(args: Expr[]): Part | undefined {
    const [of, at] = args.map((a) => this.part(a));
    if (!of || !at || at.literal === undefined) return undefined;
    if ((of.headersOf || of.kind === "multimap") && typeof at.literal === "string") {
      if (of.headersOf) return { kind: "strings", code: `b.header("${of.headersOf}", ${at.code})` };
      return { kind: "strings", code: `${of.code}.get(${at.code})` };
    }
    if (of.kind === "strings" && typeof at.literal === "bigint") {
      const i = at.literal;
      if (i < 0n || i > 1_000_000n) return undefined;
      return { kind: "string", code: `(${of.code})?.[${this.scope.constant(Number(i))}]` };
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
    const a = this.scope.temp();
    return { kind: "bool", code: given(a, ip.code, `${this.scope.constant(cidrs(list))}.matches(${a})`) };
  }

  private hasHeader(of: "req" | "res", args: Expr[]): Part | undefined {
    const name = args.length === 1 ? this.part(args[0]!) : undefined;
    if (typeof name?.literal !== "string") return undefined;
    return { kind: "bool", code: `(b.header("${of}", ${name.code}) !== undefined)` };
  }

  /** startsWith, endsWith, contains: String.prototype's, which cel-es's standard functions are. */
  private method(fn: string, target: Expr, args: Expr[]): Part | undefined {
    if (fn !== "startsWith" && fn !== "endsWith" && fn !== "contains") return undefined;
    const s = this.part(target);
    const arg = args.length === 1 ? this.part(args[0]!) : undefined;
    if (!s || !arg || s.kind !== "string" || arg.kind !== "string" || s.literals || arg.literals) return undefined;
    const method = fn === "contains" ? "includes" : fn;
    const v = this.scope.temp();
    if (arg.literal !== undefined) return { kind: "bool", code: given(v, s.code, `${v}.${method}(${arg.code})`) };
    const w = this.scope.temp();
    return { kind: "bool", code: given(v, s.code, given(w, arg.code, `${v}.${method}(${w})`)) };
  }
}

const ORDERED = new Set<Kind>(["int", "string"]);
