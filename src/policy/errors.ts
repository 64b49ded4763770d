/**
 * Why a policy document was refused at load: one value per mistake, each
 * with a stable code a script (or the admin API, once policies are stored)
 * may match, where it is in the file, and words for a person. A policy is
 * never half loaded: any error refuses all of it. No message quotes a
 * secret: a basic-auth password, a webhook secret or a client secret is
 * named by its field, never repeated.
 */

export const POLICY_ERRORS = {
  POLICY_TOO_LARGE: "The document is larger than the cap on a policy's size.",
  POLICY_SYNTAX: "The document is neither YAML nor JSON (the message says where the reader stopped).",
  POLICY_SHAPE: "A field is missing, of the wrong type, or not one the document takes (the message names it).",
  POLICY_LIMIT: "The document has more rules, expressions or actions than the caps allow.",
  ACTION_UNKNOWN: "An action type burrow does not have (the message names it).",
  ACTION_PHASE: "An action in a phase it cannot run in (for example `redirect` in `on_tcp_connect`).",
  ACTION_CONFIG: "An action's config is wrong: a missing or unknown field, a value out of range.",
  CEL_SYNTAX: "An expression does not parse as CEL.",
  CEL_TYPE: "An expression does not type-check: an undeclared variable or function, no overload for its arguments, a variable the phase does not have, or a condition that is not a bool.",
  CEL_TOO_COMPLEX: "An expression is too long, too deeply nested, has too many parts, or its estimated cost is over the cap.",
  TEMPLATE_SYNTAX: "A string's `${...}` interpolation is not closed.",
} as const;

export type PolicyErrorCode = keyof typeof POLICY_ERRORS;

/** Where a mistake is: 1-based, in the document's own lines and columns. */
export interface SourceSpot {
  line: number;
  column: number;
}

export interface PolicyError {
  code: PolicyErrorCode;
  message: string;
  /** Where in the document (for a CEL error: where in the document the error is, when it can be told exactly, else where the expression starts). */
  line?: number;
  column?: number;
  /** The field's path, e.g. `on_http_request[0].actions[1].config.status_code`. */
  path?: string;
  /** The rule's `name`, or `#N` (1-based, in its phase) when it has none. */
  rule?: string;
  /** For CEL errors: the expression as written, and the 1-based column in it. */
  expression?: string;
  expressionColumn?: number;
}

/** One error as a line for a terminal: `file:line:col: message [CODE]`, then the expression with a caret under its column. */
export function formatPolicyError(e: PolicyError, source = "policy"): string {
  const where = e.line !== undefined ? `${source}:${e.line}:${e.column ?? 1}` : source;
  const rule = e.rule !== undefined ? ` (rule ${e.rule})` : "";
  const head = `${where}: ${e.message}${rule} [${e.code}]`;
  if (e.expression === undefined || e.expressionColumn === undefined) return head;
  // the expression's own line holding the column, with a caret under it
  const lines = e.expression.split("\n");
  let column = e.expressionColumn;
  let i = 0;
  while (i < lines.length - 1 && column > lines[i]!.length + 1) column -= lines[i++]!.length + 1;
  return `${head}\n    ${lines[i]}\n    ${" ".repeat(Math.max(0, column - 1))}^`;
}
