/**
 * The type checker of policy expressions, run once at load. @bufbuild/cel
 * evaluates CEL but checks only constants and names, so the checking is
 * here: every name is resolved against the phase's declared variables
 * (variables.ts; a qualified name such as `req.url.path` first as a whole,
 * as CEL's name resolution says), every call against the overloads the
 * environment registers (CEL's standard library, its strings extension
 * and ours), and the types flow from the leaves up. Where a type cannot be
 * known it is `dyn` and the check defers to the evaluation, as CEL's own
 * checkers do.
 *
 * The same walk bounds the expression: its depth, its number of parts, and
 * an estimate of its cost (the steps its macros' loops take, a list or map
 * of the request counted as COLLECTION_ESTIMATE entries, a literal by its
 * size, loops inside loops multiplied), refused past the cap: an
 * expression whose cost grows exponentially is refused here, not run.
 */
import { CelScalar, listType, mapType, type CelEnv, type CelFunc, type CelType } from "@bufbuild/cel";
import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { COLLECTION_ESTIMATE } from "../limits.ts";
import { VARIABLES } from "../variables.ts";
import { estimateCall, orderable } from "./estimates.ts";
import { isSortBy } from "./macros.ts";
import { assignable, constantType, describeArgs, isDyn, isNumber, join, mapKey, PHASE_FUNCTIONS, printable, qualifiedName, TYPE_NAMES } from "./types.ts";

const { BOOL, DOUBLE, DYN, INT, UINT } = CelScalar;

/** A refusal: what is wrong, and the expression's part it is about. */
export class CheckProblem extends Error {
  override name = "CheckProblem";
  constructor(
    message: string,
    readonly exprId: bigint,
    readonly kind: "type" | "complexity",
  ) {
    super(message);
  }
}

/** What the walk knows of a part: its type, how many entries it holds when it is a list or map, and the loop steps it costs. */
interface Info {
  type: CelType;
  /** Entries of a list or map (an estimate: see COLLECTION_ESTIMATE). */
  entries?: number;
  cost: number;
}

export interface CheckBounds {
  maxDepth: number;
  maxNodes: number;
  costLimit: number;
}

export interface Checked {
  type: CelType;
  /** The estimated loop steps (limits.ts costLimit's unit). */
  cost: number;
  /** The declared variables it reads. */
  reads: ReadonlySet<string>;
}


export class Checker {
  private nodes = 0;
  private readonly scopes: Map<string, CelType>[] = [];
  private reads = new Set<string>();

  constructor(
    private readonly env: CelEnv,
    /** The phase's variables. */
    private readonly variables: Readonly<Record<string, CelType>>,
    /** The phase's name, for the error on a variable of another phase. */
    private readonly phase: string,
    private readonly bounds: CheckBounds,
  ) {}

  check(expr: Expr): Checked {
    this.nodes = 0;
    this.reads = new Set();
    const info = this.walk(expr, 1);
    if (info.cost > this.bounds.costLimit) {
      throw new CheckProblem(`its estimated cost (${Math.round(info.cost)}) is over the limit of ${this.bounds.costLimit}: loops inside loops multiply`, expr.id, "complexity");
    }
    return { type: info.type, cost: info.cost, reads: this.reads };
  }

  private walk(e: Expr, depth: number): Info {
    if (depth > this.bounds.maxDepth) throw new CheckProblem(`it nests deeper than ${this.bounds.maxDepth} levels`, e.id, "complexity");
    if (++this.nodes > this.bounds.maxNodes) throw new CheckProblem(`it has more than ${this.bounds.maxNodes} parts`, e.id, "complexity");
    const k = e.exprKind;
    switch (k.case) {
      case "constExpr":
        return { type: constantType(k.value.constantKind.case), cost: 0 };
      case "identExpr":
        return { type: this.name(k.value.name, e), cost: 0 };
      case "selectExpr":
        return this.select(e, k.value.operand!, k.value.field, k.value.testOnly, depth);
      case "callExpr":
        return this.call(e, k.value.function, k.value.target, k.value.args, depth);
      case "listExpr": {
        if (k.value.optionalIndices.length > 0) throw new CheckProblem("optional list elements ([?x]) are not supported", e.id, "type");
        let element: CelType | undefined;
        let cost = 0;
        for (const el of k.value.elements) {
          const info = this.walk(el, depth + 1);
          element = join(element, info.type);
          cost += info.cost;
        }
        return { type: listType(element ?? DYN), entries: k.value.elements.length, cost };
      }
      case "structExpr": {
        if (k.value.messageName !== "") throw new CheckProblem(`messages (${k.value.messageName}{...}) are not supported: a policy has no message types`, e.id, "type");
        let key: CelType | undefined;
        let value: CelType | undefined;
        let cost = 0;
        for (const entry of k.value.entries) {
          if (entry.optionalEntry) throw new CheckProblem("optional map entries ({?k: v}) are not supported", e.id, "type");
          if (entry.keyKind.case !== "mapKey") throw new CheckProblem("a map literal's keys must be values", e.id, "type");
          const ki = this.walk(entry.keyKind.value, depth + 1);
          const vi = this.walk(entry.value!, depth + 1);
          key = join(key, ki.type);
          value = join(value, vi.type);
          cost += ki.cost + vi.cost;
        }
        return { type: mapType(mapKey(key ?? DYN), value ?? DYN), entries: k.value.entries.length, cost };
      }
      case "comprehensionExpr":
        return this.comprehension(e, depth);
      default:
        throw new CheckProblem("an empty expression", e.id, "type");
    }
  }

  private local(name: string): CelType | undefined {
    for (let i = this.scopes.length - 1; i >= 0; i--) {
      const t = this.scopes[i]!.get(name);
      if (t !== undefined) return t;
    }
    return undefined;
  }

  /** A bare or qualified name: a macro's variable, else a declared one; the refusals say which mistake it is. */
  private name(raw: string, e: Expr): CelType {
    const name = raw.startsWith(".") ? raw.slice(1) : raw;
    const local = raw.startsWith(".") ? undefined : this.local(name);
    if (local) return local;
    const declared = this.variables[name];
    if (declared) {
      this.reads.add(name);
      return declared;
    }
    if (TYPE_NAMES.has(name)) return CelScalar.TYPE;
    throw new CheckProblem(this.unknownName(name), e.id, "type");
  }

  private unknownName(name: string): string {
    const elsewhere = VARIABLES[name];
    if (elsewhere) return `${name} is not available in ${this.phase} (only in ${elsewhere.phases.join(", ")})`;
    const under = Object.keys(this.variables).filter((v) => v.startsWith(`${name}.`));
    if (under.length > 0) return `'${name}' is not a value; its variables are ${under.slice(0, 6).join(", ")}${under.length > 6 ? ", ..." : ""}`;
    const root = name.split(".")[0]!;
    const family = Object.keys(this.variables).filter((v) => v.startsWith(`${root}.`));
    const hint = family.length > 0 ? ` (${root}'s variables are ${family.slice(0, 6).join(", ")}${family.length > 6 ? ", ..." : ""})` : "";
    return `undeclared reference to '${name}'${hint}`;
  }

  /**
   * A map whose fields are declared one by one (http-request's
   * `last_attempt.res` and its `status_code`, ...) is checked as a record:
   * a field it does not declare is a mistake, refused at load.
   */
  private knownField(qualified: string, e: Expr): void {
    const parts = qualified.split(".");
    for (let n = parts.length - 1; n >= 1; n--) {
      const prefix = parts.slice(0, n).join(".");
      const t = this.variables[prefix];
      if (t === undefined) continue;
      if (t.kind !== "map") return;
      const fields = Object.keys(this.variables).filter((v) => v.startsWith(`${prefix}.`));
      if (fields.length > 0) throw new CheckProblem(`'${qualified}' is not a field of ${prefix}; its fields are ${fields.map((f) => f.slice(prefix.length + 1)).join(", ")}`, e.id, "type");
      return;
    }
  }

  private select(e: Expr, operand: Expr, field: string, testOnly: boolean, depth: number): Info {
    // a qualified name is resolved whole first (req.url.path is a variable of its own)
    const qualified = testOnly ? undefined : qualifiedName(e);
    if (qualified !== undefined) {
      const root = qualified.split(".")[0]!;
      if (this.local(root) === undefined) {
        if (this.variables[qualified]) {
          this.reads.add(qualified);
          return { type: this.variables[qualified]!, cost: 0 };
        }
        if (TYPE_NAMES.has(qualified)) return { type: CelScalar.TYPE, cost: 0 };
        if (VARIABLES[qualified]) throw new CheckProblem(this.unknownName(qualified), e.id, "type");
        // a prefix that is a variable, with fields selected on it; none: the whole name is unknown
        const parts = qualified.split(".");
        let known = false;
        for (let n = parts.length - 1; n >= 1 && !known; n--) known = this.variables[parts.slice(0, n).join(".")] !== undefined || VARIABLES[parts.slice(0, n).join(".")] !== undefined;
        if (!known) throw new CheckProblem(this.unknownName(qualified), e.id, "type");
        this.knownField(qualified, e);
      }
    }
    const of = this.walk(operand, depth + 1);
    const t = of.type;
    if (testOnly) {
      if (isDyn(t) || t.kind === "map") return { type: BOOL, cost: of.cost };
      throw new CheckProblem(`has() needs a map field; '${field}' is selected on a ${t.toString()}`, e.id, "type");
    }
    if (isDyn(t)) return { type: DYN, cost: of.cost };
    if (t.kind === "map" && (isDyn(t.key) || t.key.name === "string")) return { type: t.value, cost: of.cost };
    throw new CheckProblem(`a ${t.toString()} has no field '${field}'`, e.id, "type");
  }

  private call(e: Expr, fn: string, target: Expr | undefined, args: Expr[], depth: number): Info {
    // base64.encode(x): a function with a qualified name, not a method of a variable
    if (target) {
      const q = qualifiedName(target);
      if (q !== undefined && this.local(q.split(".")[0]!) === undefined && this.env.funcs.find(`${q}.${fn}`)) return this.overload(e, `${q}.${fn}`, undefined, args, depth);
    }
    switch (fn) {
      case "_&&_":
      case "_||_": {
        const infos = args.map((a) => this.walk(a, depth + 1));
        for (const i of infos) if (!assignable(BOOL, i.type)) throw new CheckProblem(`${fn === "_&&_" ? "&&" : "||"} takes bools, not a ${i.type.toString()}`, e.id, "type");
        return { type: BOOL, cost: sum(infos) };
      }
      case "@not_strictly_false":
        return { type: BOOL, cost: this.walk(args[0]!, depth + 1).cost };
      case "_?_:_": {
        const [c, a, b] = args.map((x) => this.walk(x, depth + 1)) as [Info, Info, Info];
        if (!assignable(BOOL, c.type)) throw new CheckProblem(`a condition (?:) must be a bool, not a ${c.type.toString()}`, e.id, "type");
        return { type: join(a.type, b.type), entries: Math.max(a.entries ?? 0, b.entries ?? 0) || undefined, cost: c.cost + Math.max(a.cost, b.cost) };
      }
      case "_[_]":
        return this.index(e, args, depth);
      case "sortBy":
        if (isSortBy(e)) return this.sortBy(e, target!, args, depth);
        break;
      case "_[?_]":
      case "_?._":
        throw new CheckProblem("optional selection (?. and [?]) is not supported", e.id, "type");
    }
    return this.overload(e, fn, target, args, depth);
  }

  private index(e: Expr, args: Expr[], depth: number): Info {
    const [of, key] = args.map((x) => this.walk(x, depth + 1)) as [Info, Info];
    const cost = of.cost + key.cost;
    const t = of.type;
    if (isDyn(t)) return { type: DYN, cost };
    if (t.kind === "list") {
      if (!assignable(INT, key.type) && !assignable(UINT, key.type) && !assignable(DOUBLE, key.type)) throw new CheckProblem(`a list is indexed by an int, not a ${key.type.toString()}`, e.id, "type");
      return { type: t.element, cost };
    }
    if (t.kind === "map") {
      if (!assignable(t.key, key.type) && !isNumber(t.key)) throw new CheckProblem(`this map's keys are ${t.key.toString()}s, not ${key.type.toString()}s`, e.id, "type");
      return { type: t.value, cost };
    }
    throw new CheckProblem(`a ${t.toString()} cannot be indexed with []`, e.id, "type");
  }

  private overload(e: Expr, fn: string, target: Expr | undefined, args: Expr[], depth: number): Info {
    const group = this.env.funcs.find(fn);
    if (!group) throw new CheckProblem(`undeclared reference to function '${printable(fn)}'`, e.id, "type");
    const phases = PHASE_FUNCTIONS[fn];
    if (phases && !target && !phases.includes(this.phase)) throw new CheckProblem(`${fn}() is not available in ${this.phase} (only in ${phases.join(", ")})`, e.id, "type");
    const self = target ? this.walk(target, depth + 1) : undefined;
    const infos = args.map((a) => this.walk(a, depth + 1));
    const types = infos.map((i) => i.type);
    let result: CelType | undefined;
    let found = false;
    for (const f of group as Iterable<CelFunc>) {
      if ((f.target === undefined) !== (self === undefined) || f.arguments.length !== types.length) continue;
      if (self && f.target && !assignable(f.target, self.type)) continue;
      if (!f.arguments.every((p, i) => assignable(p, types[i]!))) continue;
      result = found ? join(result, f.result) : f.result;
      found = true;
    }
    if (!found) {
      const shape = self ? `${self.type.toString()}.${printable(fn)}${describeArgs(types)}` : `${printable(fn)}${describeArgs(types)}`;
      throw new CheckProblem(`found no matching overload for '${printable(fn)}' applied to '${shape}'`, e.id, "type");
    }
    let cost = (self?.cost ?? 0) + sum(infos);
    // list + list holds both; a split string is a list of the request's size
    let entries: number | undefined;
    if (fn === "_+_" && result!.kind === "list") entries = (infos[0]!.entries ?? COLLECTION_ESTIMATE) + (infos[1]!.entries ?? COLLECTION_ESTIMATE);
    const estimate = estimateCall(fn, self, infos, args);
    if (typeof estimate === "string") throw new CheckProblem(estimate, e.id, "type");
    if (estimate) {
      cost += estimate.cost;
      entries = estimate.entries;
      if (estimate.type) result = estimate.type;
    }
    return { type: result!, entries, cost };
  }

  /** `list.sortBy(x, key)`, cel-go's macro: the key read once per element (a loop step each), then the sort of as many. */
  private sortBy(e: Expr, target: Expr, args: Expr[], depth: number): Info {
    const list = this.walk(target, depth + 1);
    const t = list.type;
    if (!isDyn(t) && t.kind !== "list") throw new CheckProblem(`sortBy() sorts a list, not a ${t.toString()}`, e.id, "type");
    const x = args[0]!.exprKind.case === "identExpr" ? args[0]!.exprKind.value.name : "";
    this.scopes.push(new Map([[x, t.kind === "list" ? t.element : DYN]]));
    try {
      const key = this.walk(args[1]!, depth + 1);
      if (!orderable(key.type)) throw new CheckProblem(`sortBy() needs a key that can be ordered, not a ${key.type.toString()}`, args[1]!.id, "type");
      const steps = list.entries ?? COLLECTION_ESTIMATE;
      const cost = list.cost + steps * (2 + key.cost);
      if (!Number.isFinite(cost) || cost > this.bounds.costLimit) {
        throw new CheckProblem(`its estimated cost (${Number.isFinite(cost) ? Math.round(cost) : "unbounded"}) is over the limit of ${this.bounds.costLimit}: loops inside loops multiply`, e.id, "complexity");
      }
      return { type: t.kind === "list" ? t : listType(DYN), entries: steps, cost };
    } finally {
      this.scopes.pop();
    }
  }

  private comprehension(e: Expr, depth: number): Info {
    const c = e.exprKind.case === "comprehensionExpr" ? e.exprKind.value : undefined;
    if (!c || !c.iterRange || !c.accuInit || !c.loopCondition || !c.loopStep || !c.result) throw new CheckProblem("an incomplete macro", e.id, "type");
    const range = this.walk(c.iterRange, depth + 1);
    const t = range.type;
    let first: CelType;
    let second: CelType | undefined;
    if (isDyn(t)) [first, second] = [DYN, DYN];
    else if (t.kind === "list") [first, second] = c.iterVar2 ? [INT, t.element] : [t.element, undefined];
    else if (t.kind === "map") [first, second] = [t.key, t.value];
    else throw new CheckProblem(`a macro cannot loop over a ${t.toString()}`, c.iterRange.id, "type");
    const init = this.walk(c.accuInit, depth + 1);
    const scope = new Map<string, CelType>([[c.accuVar, init.type.kind === "list" ? listType(DYN) : init.type]]);
    scope.set(c.iterVar, first);
    if (c.iterVar2) scope.set(c.iterVar2, second ?? DYN);
    this.scopes.push(scope);
    try {
      const cond = this.walk(c.loopCondition, depth + 1);
      const step = this.walk(c.loopStep, depth + 1);
      const result = this.walk(c.result, depth + 1);
      const steps = range.entries ?? COLLECTION_ESTIMATE;
      const cost = range.cost + init.cost + steps * (1 + cond.cost + step.cost) + result.cost;
      if (!Number.isFinite(cost) || cost > this.bounds.costLimit) {
        throw new CheckProblem(`its estimated cost (${Number.isFinite(cost) ? Math.round(cost) : "unbounded"}) is over the limit of ${this.bounds.costLimit}: loops inside loops multiply`, e.id, "complexity");
      }
      return { type: result.type, entries: result.type.kind === "list" ? steps : undefined, cost };
    } finally {
      this.scopes.pop();
    }
  }
}

const sum = (infos: Info[]) => infos.reduce((n, i) => n + i.cost, 0);
