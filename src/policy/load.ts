/**
 * loadPolicy: a document's text to a Policy, or every mistake in it. In
 * order: the size cap; YAML or JSON read with positions; the count of
 * rules against its cap (before anything costly is done for each); the
 * document's shape (valibot); then each rule: its caps, its expressions
 * compiled and type-checked for its phase, each action known, allowed in
 * the phase, its config checked against the action's schema and compiled.
 * A policy is all or nothing: one error and none of it is used.
 */
import * as v from "valibot";
import { ACTIONS, NOT_IN_BURROW } from "./actions/index.ts";
import type { CompiledAction, CompileTools } from "./actions/types.ts";
import { compileExpression, type CompiledExpression, type CompileProblem } from "./cel/compile.ts";
import { Template } from "./cel/template.ts";
import { pathText, PolicyText, type PathKey } from "./document.ts";
import type { PolicyError, PolicyErrorCode } from "./errors.ts";
import { GEO_PREFIX } from "./geo.ts";
import { DEFAULT_POLICY_LIMITS, type PolicyLimits } from "./limits.ts";
import { Policy, type CompiledRule } from "./policy.ts";
import { defaultServices, type PolicyServices } from "./services.ts";
import { PHASES, type Phase } from "./variables.ts";

export interface LoadOptions {
  /** The document's name in messages (a file name); default "policy". */
  source?: string;
  /** A stable name for the policy's state kept outside it (its rate limits' buckets), so that a reload keeps counting; default `source`. */
  key?: string;
  limits?: Partial<PolicyLimits>;
  /** What the edge lends it; default: counts in memory, JWKS fetched with jose, no OIDC. */
  services?: PolicyServices;
  /**
   * Whether conn.geo.* have a GeoIP database behind them: false refuses a
   * policy that reads them (a server without --geoip-db), rather than let
   * a "deny by country" rule quietly never match. Default: whether the
   * services given have one; none given (the offline commands), true (their
   * runs answer them empty).
   */
  geoip?: boolean;
}

/** The errors a document can produce before the rest is not worth reading. */
const MAX_ERRORS = 100;

/** Fields whose values are secrets: a shape error there never quotes what was written. */
const SECRET_FIELDS = new Set(["credentials", "secret", "client_secret"]);

const Action = v.strictObject({ type: v.string(), config: v.optional(v.nullable(v.unknown())) });
const Rule = v.strictObject({
  name: v.optional(v.nullable(v.string())),
  expressions: v.optional(v.nullable(v.array(v.string()))),
  actions: v.array(Action),
});
const Rules = v.optional(v.nullable(v.array(Rule)));
const Document = v.nullable(v.strictObject({ on_tcp_connect: Rules, on_http_request: Rules, on_http_response: Rules, on_event_stream_message: Rules }));

type RuleShape = v.InferOutput<typeof Rule>;

let sharedServices: PolicyServices | undefined;

export function loadPolicy(text: string, options: LoadOptions = {}): Policy | PolicyError[] {
  const source = options.source ?? "policy";
  const limits: PolicyLimits = { ...DEFAULT_POLICY_LIMITS, ...options.limits };
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes > limits.maxDocumentBytes) return [{ code: "POLICY_TOO_LARGE", message: `the document is ${bytes} bytes; a policy may have ${limits.maxDocumentBytes} at most` }];
  const doc = PolicyText.read(text);
  if (Array.isArray(doc)) return doc;
  const errors: PolicyError[] = [];
  const add = (e: PolicyError) => {
    if (errors.length < MAX_ERRORS) errors.push(e);
  };
  const at = (path: readonly PathKey[], key = false) => ({ ...doc.spot(path, key), path: pathText(path) });

  // counted before the shape is checked: a document of ten thousand rules is refused by its count alone
  const raw = doc.value as Record<string, unknown> | null;
  if (raw && typeof raw === "object") {
    const count = PHASES.reduce((n, p) => n + (Array.isArray(raw[p]) ? (raw[p] as unknown[]).length : 0), 0);
    if (count > limits.maxRules) return [{ code: "POLICY_LIMIT", message: `the document has ${count} rules; a policy may have ${limits.maxRules} at most` }];
  }

  const shape = v.safeParse(Document, doc.value);
  if (!shape.success) {
    for (const issue of shape.issues) {
      const path = (issue.path ?? []).map((p) => p.key as PathKey);
      add({ code: "POLICY_SHAPE", message: shapeMessage(issue, path), ...at(path, issue.expected === "never") });
    }
    return errors;
  }

  const rules = {} as Record<Phase, CompiledRule[]>;
  const reads = new Set<string>();
  const geoip = options.geoip ?? (options.services ? options.services.geo !== undefined : true);
  for (const phase of PHASES) {
    rules[phase] = [];
    (shape.output?.[phase] ?? []).forEach((rule, i) => {
      const compiled = compileRule(rule, phase, i, { doc, limits, add, key: options.key ?? source, reads, geoip });
      if (compiled) rules[phase].push(compiled);
    });
  }
  if (errors.length >= MAX_ERRORS) errors.push({ code: errors[0]!.code, message: `(more errors not shown: the first ${MAX_ERRORS} are)` });
  if (errors.length > 0) return errors;
  sharedServices ??= defaultServices();
  return new Policy(source, rules, limits, options.services ?? sharedServices, { readsActionVariables: reads.has("actions") });
}

interface RuleContext {
  doc: PolicyText;
  limits: PolicyLimits;
  add(e: PolicyError): void;
  key: string;
  /** The variables its expressions read, all of them. */
  reads: Set<string>;
  /** conn.geo.* can be answered (LoadOptions.geoip). */
  geoip: boolean;
}

/** The first conn.geo.* variable an expression reads where the server has no GeoIP database, or undefined. */
function geoUnanswered(e: CompiledExpression, c: RuleContext): string | undefined {
  if (c.geoip) return undefined;
  for (const name of e.reads) if (name.startsWith(GEO_PREFIX)) return name;
  return undefined;
}

/** That refusal, at the name in the text it was read from. */
const geoProblem = (name: string, text: string): CompileProblem => ({
  kind: "type",
  message: `${name} needs the server's GeoIP database, and this server was started without one (--geoip-db)`,
  offset: Math.max(0, text.indexOf(name)),
});

const readBy = (reads: Set<string>, e: CompiledExpression) => {
  for (const name of e.reads) reads.add(name);
};

function compileRule(rule: RuleShape, phase: Phase, index: number, c: RuleContext): CompiledRule | undefined {
  const label = rule.name ?? `#${index + 1}`;
  const base: PathKey[] = [phase, index];
  let failed = false;
  const fail = (code: PolicyErrorCode, message: string, path: readonly PathKey[], key = false) => {
    failed = true;
    c.add({ code, message, ...c.doc.spot(path, key), path: pathText(path), rule: label });
  };
  const expressions = rule.expressions ?? [];
  if (expressions.length > c.limits.maxExpressionsPerRule) fail("POLICY_LIMIT", `the rule has ${expressions.length} expressions; a rule may have ${c.limits.maxExpressionsPerRule}`, [...base, "expressions"]);
  if (rule.actions.length > c.limits.maxActionsPerRule) fail("POLICY_LIMIT", `the rule has ${rule.actions.length} actions; a rule may have ${c.limits.maxActionsPerRule}`, [...base, "actions"]);
  if (failed) return undefined;

  /** A CEL problem at `path`: its line and column in the file, the expression and the column in it. */
  const celError = (p: CompileProblem, path: readonly PathKey[], whole: string, expression: string, offsetInWhole: number) => {
    const code: PolicyErrorCode = p.kind === "syntax" ? "CEL_SYNTAX" : p.kind === "type" ? "CEL_TYPE" : "CEL_TOO_COMPLEX";
    const where = c.doc.spotInString(path, whole, offsetInWhole);
    failed = true;
    c.add({ code, message: p.message, ...where.spot, path: pathText(path), rule: label, expression: expression.length > 200 ? `${expression.slice(0, 200)}...` : expression, expressionColumn: p.offset + 1 });
  };

  const compiledExpressions: CompiledExpression[] = [];
  expressions.forEach((text, i) => {
    const path = [...base, "expressions", i];
    const out = compileExpression(text, phase, "condition", c.limits);
    const geo = "kind" in out ? undefined : geoUnanswered(out, c);
    if ("kind" in out) celError(out, path, text, text, out.offset);
    else if (geo) {
      const problem = geoProblem(geo, text);
      celError(problem, path, text, text, problem.offset);
    }
    else {
      readBy(c.reads, out);
      compiledExpressions.push(out);
    }
  });

  const actions: CompiledAction[] = [];
  rule.actions.forEach((action, i) => {
    const path = [...base, "actions", i];
    const def = ACTIONS.get(action.type);
    if (!def) {
      const why = NOT_IN_BURROW[action.type];
      fail("ACTION_UNKNOWN", `burrow has no action '${action.type}'${why ? `: ${why}` : ""} (it has ${[...ACTIONS.keys()].join(", ")})`, [...path, "type"]);
      return;
    }
    if (!def.phases.includes(phase)) {
      fail("ACTION_PHASE", `'${action.type}' does not run in ${phase} (only in ${def.phases.join(", ")})`, [...path, "type"]);
      return;
    }
    const configPath = [...path, "config"];
    const parsed = v.safeParse(def.schema, action.config ?? {});
    if (!parsed.success) {
      for (const issue of parsed.issues) {
        const sub = (issue.path ?? []).map((p) => p.key as PathKey);
        fail("ACTION_CONFIG", `${action.type}: ${shapeMessage(issue, sub)}`, [...configPath, ...sub], issue.expected === "never");
      }
      return;
    }
    let actionFailed = false;
    const tools: CompileTools = {
      phase,
      limits: c.limits,
      key: `${c.key}/${phase}/${index}/${i}`,
      expression(text, sub, purpose, own) {
        const out = compileExpression(text, own ?? phase, purpose, c.limits);
        const geo = "kind" in out || own ? undefined : geoUnanswered(out, c);
        if (!("kind" in out) && !geo) {
          // what the policy reads of a run: an action's own variables are none of it
          if (!own) readBy(c.reads, out);
          return out;
        }
        actionFailed = true;
        const problem = "kind" in out ? out : geoProblem(geo!, text);
        celError(problem, [...configPath, ...sub], text, text, problem.offset);
        return undefined;
      },
      template(text, sub) {
        const out = Template.compile(text, phase, c.limits);
        if (out instanceof Template) {
          const geo = out.expressions.map((e) => geoUnanswered(e, c)).find((n) => n !== undefined);
          if (geo) {
            actionFailed = true;
            const problem = geoProblem(geo, text);
            // the expression said is the variable's name, at its place in the config string
            celError({ ...problem, offset: 0 }, [...configPath, ...sub], text, geo, problem.offset);
            return undefined;
          }
          for (const e of out.expressions) readBy(c.reads, e);
          return out;
        }
        actionFailed = true;
        const where = [...configPath, ...sub];
        if (out.expression === undefined) {
          failed = true;
          actionFailed = true;
          c.add({ code: out.kind === "syntax" ? "TEMPLATE_SYNTAX" : "CEL_TOO_COMPLEX", message: out.message, ...c.doc.spotInString(where, text, out.offset).spot, path: pathText(where), rule: label });
        }
        else celError(out, where, text, out.expression, out.expressionOffset! + out.offset);
        return undefined;
      },
      error(sub, message) {
        actionFailed = true;
        fail("ACTION_CONFIG", `${action.type}: ${message}`, [...configPath, ...sub]);
      },
    };
    const compiled = def.compile(parsed.output, tools);
    if (compiled && !actionFailed) actions.push(compiled);
    else failed = true;
  });
  return failed ? undefined : { label, expressions: compiledExpressions, actions };
}

/** A valibot issue in words: the field first, an unknown field said so, a secret never quoted. */
function shapeMessage(issue: v.BaseIssue<unknown>, path: readonly PathKey[]): string {
  const field = pathText(path);
  const last = path[path.length - 1];
  if (issue.expected === "never" && typeof last === "string") {
    const old = last === "inbound" ? " (ngrok's old name for on_http_request)" : last === "outbound" ? " (ngrok's old name for on_http_response)" : "";
    return `unknown field '${last}'${old}`;
  }
  if (issue.received === "undefined" && typeof last === "string" && issue.expected === `"${last}"`) {
    const parent = pathText(path.slice(0, -1));
    return `${parent ? `${parent}: ` : ""}the field '${last}' is missing`;
  }
  const secret = path.some((k) => typeof k === "string" && SECRET_FIELDS.has(k));
  const message = secret ? issue.message.replace(/ but received .*$/, "") : issue.message;
  return field ? `${field}: ${message}` : message;
}
