/**
 * Regular expressions with capture groups in linear time, for redirect's
 * and url-rewrite's `from` and `to`: the pattern is matched against the
 * visitor's URL, so an engine that backtracks (JavaScript's own) would let
 * one request with a crafted URL hold the edge for minutes on a pattern
 * like `(a+)+$`. RE2's syntax and its guarantee are what ngrok's users
 * write for (Go's regexp): the pattern is compiled by @bufbuild/re2, the
 * RE2 that CEL's `matches()` runs on, and run here by a Pike VM (a thread
 * per program counter, advanced over the input once), which that package,
 * made for boolean matches, leaves out. Leftmost-first semantics and the
 * replacement's `$1`, `${1}`, `${name}`, `$$` are Go's.
 */
import { RE2JS } from "@bufbuild/re2";

/** The parts of @bufbuild/re2's compiled program the VM reads (its Prog and Inst). */
interface Inst {
  op: number;
  out: number;
  arg: number;
  matchRune(r: number): boolean;
}
interface Prog {
  inst: Inst[];
  start: number;
  numCap: number;
}
/** Inst's operation codes, read from the class itself (it is not exported). */
interface InstOps {
  ALT: number;
  ALT_MATCH: number;
  CAPTURE: number;
  EMPTY_WIDTH: number;
  FAIL: number;
  MATCH: number;
  NOP: number;
  RUNE: number;
  RUNE1: number;
  RUNE_ANY: number;
  RUNE_ANY_NOT_NL: number;
}

// the empty-width conditions, as RE2 numbers them
const BEGIN_LINE = 1;
const END_LINE = 2;
const BEGIN_TEXT = 4;
const END_TEXT = 8;
const WORD_BOUNDARY = 16;
const NO_WORD_BOUNDARY = 32;

/** The longest pattern a policy may give, by default (its maxPatternLength, limits.ts). */
export const MAX_PATTERN_LENGTH = 1024;

/**
 * Thread steps one replace may take (a few tens of ms), by default (a
 * policy's maxPatternSteps, limits.ts). A single search is linear in the
 * input, but replacing every match searches again after each, and a
 * pattern whose preferred branch runs to the end before an empty branch
 * matches (`(a*c)?` on a long run of a's) makes that quadratic: past this
 * the replace fails rather than hold the edge.
 */
export const MAX_STEPS = 1_000_000;

export class RegexTooSlow extends Error {
  override name = "RegexTooSlow";
  constructor() {
    super("the pattern took more steps on this input than its budget");
  }
}

/** A replace's result would be longer than the caller allows (a short pattern made into a long text at every match). */
export class ReplaceTooLong extends Error {
  override name = "ReplaceTooLong";
  constructor(readonly maxLength: number) {
    super(`the result would be longer than ${maxLength} characters`);
  }
}

/** Steps left to a search (or to all the searches of one replace). */
export interface StepBudget {
  steps: number;
}

const isWordRune = (r: number) => (r >= 0x30 && r <= 0x39) || (r >= 0x41 && r <= 0x5a) || (r >= 0x61 && r <= 0x7a) || r === 0x5f;

function runeAt(s: string, i: number): number {
  return i < s.length ? s.codePointAt(i)! : -1;
}
function runeBefore(s: string, i: number): number {
  if (i <= 0) return -1;
  const c = s.charCodeAt(i - 1);
  if (c >= 0xdc00 && c <= 0xdfff && i >= 2) {
    const hi = s.charCodeAt(i - 2);
    if (hi >= 0xd800 && hi <= 0xdbff) return s.codePointAt(i - 2)!;
  }
  return c;
}
const width = (r: number) => (r > 0xffff ? 2 : 1);

function emptyContext(s: string, pos: number): number {
  const r1 = runeBefore(s, pos);
  const r2 = runeAt(s, pos);
  let op = 0;
  if (r1 < 0) op |= BEGIN_TEXT | BEGIN_LINE;
  if (r1 === 0x0a) op |= BEGIN_LINE;
  if (r2 < 0) op |= END_TEXT | END_LINE;
  if (r2 === 0x0a) op |= END_LINE;
  op |= isWordRune(r1) !== isWordRune(r2) ? WORD_BOUNDARY : NO_WORD_BOUNDARY;
  return op;
}

interface Thread {
  pc: number;
  caps: Int32Array;
}

export class Regex {
  private readonly ops: InstOps;
  private readonly names: Map<string, number>;

  private constructor(
    readonly pattern: string,
    private readonly prog: Prog,
    readonly groups: number,
    names: Map<string, number>,
    /** The literal every match begins with ("" when none): a search with no thread alive jumps to its next occurrence. */
    private readonly prefix: string,
  ) {
    this.ops = (prog.inst[0]!.constructor as unknown) as InstOps;
    this.names = names;
  }

  /** The compiled pattern, or why it is not one (RE2 syntax: no backreferences, no lookaround). */
  static compile(pattern: string, maxLength = MAX_PATTERN_LENGTH): Regex | { error: string } {
    if (pattern.length > maxLength) return { error: `the pattern is longer than ${maxLength} characters` };
    try {
      const re = RE2JS.compile(pattern);
      const re2 = re.re2() as unknown as { prog: Prog; prefix?: string };
      return new Regex(pattern, re2.prog, re.groupCount(), re.namedGroups(), typeof re2.prefix === "string" ? re2.prefix : "");
    } catch (err) {
      return { error: `not an RE2 regular expression: ${(err as Error).message}` };
    }
  }

  /** The first match at or after `from`: [start, end] of the match and of each group (-1 for a group that took no part); throws RegexTooSlow past the budget. */
  exec(input: string, from = 0, budget: StepBudget = { steps: MAX_STEPS }): Int32Array | null {
    const { prog, ops } = this;
    const ncap = Math.max(2, prog.numCap);
    const seen = new Int32Array(prog.inst.length).fill(-1);
    let generation = 0;
    let matched: Int32Array | null = null;

    const add = (list: Thread[], pc: number, pos: number, caps: Int32Array, context: number): void => {
      if (seen[pc] === generation) return;
      seen[pc] = generation;
      const inst = prog.inst[pc]!;
      switch (inst.op) {
        case ops.FAIL:
          return;
        case ops.ALT:
        case ops.ALT_MATCH:
          add(list, inst.out, pos, caps, context);
          add(list, inst.arg, pos, caps, context);
          return;
        case ops.NOP:
          add(list, inst.out, pos, caps, context);
          return;
        case ops.CAPTURE:
          if (inst.arg < ncap) {
            const copy = caps.slice();
            copy[inst.arg] = pos;
            add(list, inst.out, pos, copy, context);
          } else add(list, inst.out, pos, caps, context);
          return;
        case ops.EMPTY_WIDTH:
          if ((inst.arg & ~context) === 0) add(list, inst.out, pos, caps, context);
          return;
        default:
          list.push({ pc, caps });
      }
    };

    let clist: Thread[] = [];
    const { prefix } = this;
    for (let pos = from; ; ) {
      // nothing alive and nothing found yet: a match can begin only where the literal it begins with is
      if (matched === null && clist.length === 0 && prefix !== "") {
        const at = input.indexOf(prefix, pos);
        if (at < 0) break;
        pos = at;
      }
      if (matched === null) {
        const caps = new Int32Array(ncap).fill(-1);
        caps[0] = pos;
        add(clist, prog.start, pos, caps, emptyContext(input, pos));
      }
      // no thread left: done once something matched; else the search goes on at the next position
      if (clist.length === 0 && matched !== null) break;
      const r = runeAt(input, pos);
      const next = pos + (r < 0 ? 0 : width(r));
      generation++;
      const nlist: Thread[] = [];
      budget.steps -= clist.length + 1;
      if (budget.steps < 0) throw new RegexTooSlow();
      const nextContext = r < 0 ? 0 : emptyContext(input, next);
      for (const t of clist) {
        const inst = prog.inst[t.pc]!;
        if (inst.op === ops.MATCH) {
          matched = t.caps.slice();
          matched[1] = pos;
          break; // the threads after this one have lower priority: leftmost-first
        }
        if (r < 0) continue;
        const ok = inst.op === ops.RUNE_ANY ? true : inst.op === ops.RUNE_ANY_NOT_NL ? r !== 0x0a : inst.matchRune(r);
        if (ok) add(nlist, inst.out, next, t.caps, nextContext);
      }
      if (r < 0) break;
      clist = nlist;
      pos = next;
    }
    return matched;
  }

  /** The groups of the first match (the whole match first), or undefined. */
  matchGroups(input: string, budget?: StepBudget): string[] | undefined {
    const m = this.exec(input, 0, budget);
    if (!m) return undefined;
    const out: string[] = [];
    for (let g = 0; g <= this.groups; g++) out.push(m[2 * g]! >= 0 ? input.slice(m[2 * g]!, m[2 * g + 1]!) : "");
    return out;
  }

  /** Go's ReplaceAllString: each non-overlapping match replaced by `template` expanded with its groups; past `maxLength` characters of result, throws ReplaceTooLong. */
  replaceAll(input: string, template: string, budget: StepBudget = { steps: MAX_STEPS }, maxLength = Infinity): string {
    let out = "";
    let lastEnd = 0;
    let searchPos = 0;
    while (searchPos <= input.length) {
      const m = this.exec(input, searchPos, budget);
      if (!m) break;
      out += input.slice(lastEnd, m[0]!);
      // an empty match right after the previous match is not replaced again
      if (m[1]! > lastEnd || m[0] === 0) out += this.expand(template, input, m);
      if (out.length > maxLength) throw new ReplaceTooLong(maxLength);
      lastEnd = m[1]!;
      const w = searchPos < input.length ? width(runeAt(input, searchPos)) : 1;
      if (searchPos + w > m[1]!) searchPos += w;
      else if (searchPos + 1 > m[1]!) searchPos++;
      else searchPos = m[1]!;
    }
    out += input.slice(lastEnd);
    if (out.length > maxLength) throw new ReplaceTooLong(maxLength);
    return out;
  }

  /** `$1`, `${1}`, `$name`, `${name}` and `$$`, as Go's Regexp.Expand reads them (an unknown group is empty). */
  private expand(template: string, input: string, m: Int32Array): string {
    let out = "";
    for (let i = 0; i < template.length; i++) {
      const c = template[i];
      if (c !== "$") {
        out += c;
        continue;
      }
      if (template[i + 1] === "$") {
        out += "$";
        i++;
        continue;
      }
      let name: string;
      let end: number;
      if (template[i + 1] === "{") {
        const close = template.indexOf("}", i + 2);
        name = close < 0 ? "" : template.slice(i + 2, close);
        if (close < 0 || !/^[A-Za-z0-9_]+$/.test(name)) {
          out += c;
          continue;
        }
        end = close;
      } else {
        const found = /^[A-Za-z0-9_]+/.exec(template.slice(i + 1));
        if (!found) {
          out += c;
          continue;
        }
        name = found[0];
        end = i + name.length;
      }
      const g = /^\d+$/.test(name) ? Number(name) : this.names.get(name);
      if (g !== undefined && g <= this.groups && m[2 * g]! >= 0) out += input.slice(m[2 * g]!, m[2 * g + 1]!);
      i = end;
    }
    return out;
  }
}
