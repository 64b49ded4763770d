/**
 * CEL interpolation: `${expression}` inside an action's config strings,
 * as ngrok writes it (`X-Client-IP: "${conn.client_ip}"`). Each embedded
 * expression is compiled at load with the rest; a string with none is a
 * constant and costs nothing per request. The closing brace is found by
 * reading the expression (its strings, maps and nested braces), so
 * `${ {'a': 1}['a'] }` and `${'}'}` interpolate what they say.
 */
import { isCelError, isCelList, isCelMap, type CelValue } from "@bufbuild/cel";
import type { PolicyLimits } from "../limits.ts";
import type { Phase } from "../variables.ts";
import { compileExpression, type CompiledExpression, type CompileProblem, type EvaluationTarget } from "./compile.ts";

export interface TemplateProblem extends CompileProblem {
  /** The embedded expression's text, when the problem is in one. */
  expression?: string;
  /** Its offset in the whole string. */
  expressionOffset?: number;
}

/** A config string: literal pieces and compiled expressions, in order. */
export class Template {
  /** The string when it holds no expression (its value is known at load). */
  readonly constant: string | undefined;

  private constructor(
    readonly source: string,
    private readonly parts: readonly (string | CompiledExpression)[],
  ) {
    this.constant = parts.every((p) => typeof p === "string") ? parts.join("") : undefined;
    this.single = parts.length === 1 && typeof parts[0] !== "string" ? parts[0] : undefined;
  }

  /**
   * The expression when the string is one `${...}` alone (`${conn.client_ip}`):
   * its value's text is the string, read as it is rather than joined to an
   * empty one (a new string a request, which the next one's equal text is
   * then compared with character by character).
   */
  private readonly single: CompiledExpression | undefined;

  /** The expression when the string is exactly one `${...}` and nothing else (set-vars keeps its value's type), else undefined. */
  get only(): CompiledExpression | undefined {
    return this.single;
  }

  /** The expressions it embeds. */
  get expressions(): CompiledExpression[] {
    return this.parts.filter((p): p is CompiledExpression => typeof p !== "string");
  }

  /** The string with each expression's value in its place, or the first evaluation error's message. */
  render(scope: EvaluationTarget): string | { error: string } {
    if (this.constant !== undefined) return this.constant;
    const single = this.single;
    if (single !== undefined) {
      const v = single.evaluate(scope);
      return isCelError(v) ? { error: `\${${single.text}}: ${v.message}` } : valueText(v);
    }
    let out = "";
    for (const p of this.parts) {
      if (typeof p === "string") {
        out += p;
        continue;
      }
      const v = p.evaluate(scope);
      if (isCelError(v)) return { error: `\${${p.text}}: ${v.message}` };
      out += valueText(v);
    }
    return out;
  }

  static compile(source: string, phase: Phase, limits: PolicyLimits): Template | TemplateProblem {
    const parts: (string | CompiledExpression)[] = [];
    let literal = "";
    let count = 0;
    let i = 0;
    while (i < source.length) {
      const start = source.indexOf("${", i);
      if (start < 0) {
        literal += source.slice(i);
        break;
      }
      literal += source.slice(i, start);
      const end = closingBrace(source, start + 2);
      if (end < 0) return { kind: "syntax", message: "an interpolation `${` is not closed by `}`", offset: start };
      if (++count > limits.maxInterpolations) return { kind: "complexity", message: `more than ${limits.maxInterpolations} interpolations in one string`, offset: start };
      const text = source.slice(start + 2, end);
      const compiled = compileExpression(text, phase, "value", limits);
      if ("kind" in compiled) return { ...compiled, expression: text, expressionOffset: start + 2 };
      if (literal !== "") parts.push(literal);
      literal = "";
      parts.push(compiled);
      i = end + 1;
    }
    if (literal !== "" || parts.length === 0) parts.push(literal);
    return new Template(source, parts);
  }
}

/** The index of the `}` that closes an interpolation whose expression starts at `from`, or -1. */
function closingBrace(s: string, from: number): number {
  let depth = 0;
  for (let i = from; i < s.length; i++) {
    const c = s[i]!;
    if (c === "'" || c === '"') {
      const q = s.startsWith(c.repeat(3), i) ? c.repeat(3) : c;
      i += q.length;
      while (i < s.length && !s.startsWith(q, i)) i += s[i] === "\\" ? 2 : 1;
      i += q.length - 1;
    } else if (c === "{") depth++;
    else if (c === "}") {
      if (depth === 0) return i;
      depth--;
    }
  }
  return -1;
}

/** A value as interpolated text: strings as they are, numbers and bools as CEL prints them, lists and maps as JSON. */
export function valueText(v: CelValue): string {
  if (typeof v === "string") return v;
  if (typeof v === "bigint" || typeof v === "number" || typeof v === "boolean") return String(v);
  if (v === null) return "null";
  const p = plain(v);
  return typeof p === "string" ? p : JSON.stringify(p);
}

function plain(v: CelValue): unknown {
  if (typeof v === "bigint") return Number(v);
  if (isCelList(v)) return [...v].map(plain);
  if (isCelMap(v)) return Object.fromEntries([...v.entries()].map(([k, x]) => [String(k), plain(x)]));
  if (v instanceof Uint8Array) return Buffer.from(v).toString("utf8");
  if (typeof v === "object" && v !== null && "message" in v) {
    const m = (v as { message: { seconds?: bigint; nanos?: number } }).message;
    if ((v as { desc?: { typeName?: string } }).desc?.typeName === "google.protobuf.Duration" && typeof m.seconds === "bigint") return `${Number(m.seconds) + (m.nanos ?? 0) / 1e9}s`;
    if (typeof m.seconds === "bigint") return new Date(Number(m.seconds) * 1000 + Math.floor((m.nanos ?? 0) / 1e6)).toISOString();
  }
  return typeof v === "object" && v !== null && "value" in v ? String((v as { value: unknown }).value) : v;
}
