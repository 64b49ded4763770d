/**
 * A refused policy document's errors, read back out of the admin API's
 * message (admin/policies.ts: "policy: does not load:" and then each error
 * as `burrow policy check` prints it, policy/errors.ts formatPolicyError):
 * where it is (line and column), what, in which rule, its code, and for CEL
 * the expression with a caret under the column. The panel lists them and
 * puts the cursor on each.
 */

export interface ShownError {
  /** 1-based, in the document; undefined when the error has no place (the document too large, not YAML). */
  line?: number;
  column?: number;
  message: string;
  rule?: string;
  code?: string;
  /** The expression's line and the caret under its column. */
  snippet?: string;
}

const HEAD = "policy: does not load:";
const LINE = /^policy(?::(\d+):(\d+))?: (.*?)(?: \(rule (.+)\))? \[([A-Z_]+)\]$/;

/** The errors of a refusal, or undefined when the message is not a document's refusal (a name taken, a bad field). */
export function policyErrors(message: string): ShownError[] | undefined {
  if (!message.startsWith(HEAD)) return undefined;
  const out: ShownError[] = [];
  for (const text of message.slice(HEAD.length).split("\n")) {
    if (text === "") continue;
    const m = LINE.exec(text);
    if (m) {
      out.push({
        ...(m[1] !== undefined ? { line: Number(m[1]), column: Number(m[2]) } : {}),
        message: m[3]!,
        ...(m[4] !== undefined ? { rule: m[4] } : {}),
        code: m[5]!,
      });
      continue;
    }
    const last = out.at(-1);
    // the expression and its caret, indented under their error
    if (text.startsWith("    ") && last) last.snippet = last.snippet === undefined ? text.slice(4) : `${last.snippet}\n${text.slice(4)}`;
    else out.push({ message: text });
  }
  return out;
}

/** Where line `line`, column `column` (1-based) is in `text`, as an offset for setSelectionRange. */
export function offsetOf(text: string, line: number, column: number): number {
  let at = 0;
  for (let l = 1; l < line; l++) {
    const next = text.indexOf("\n", at);
    if (next < 0) return text.length;
    at = next + 1;
  }
  const end = text.indexOf("\n", at);
  return Math.min(at + Math.max(0, column - 1), end < 0 ? text.length : end);
}
