/**
 * What the type checker knows of types and names: which names are types
 * (`int`, `string`...), which functions a phase has, when a value of one
 * type may stand for another (`dyn` for anything), a literal's type.
 */
import { CelScalar, type CelType } from "@bufbuild/cel";
import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { TIMESTAMP_TYPE } from "../variables.ts";

const { BOOL, BYTES, DOUBLE, DYN, INT, NULL, STRING, UINT } = CelScalar;

/** Names that are types (`type(x) == int`): values of type `type`. */
export const TYPE_NAMES = new Set(["int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type", "type", "google.protobuf.Timestamp", "google.protobuf.Duration"]);

/** Functions that read the message of some phases only (ngrok's rule): refused at load elsewhere. */
export const HTTP_PHASES = ["on_http_request", "on_http_response", "on_event_stream_message"];
const RESPONSE_PHASES = ["on_http_response", "on_event_stream_message"];
export const PHASE_FUNCTIONS: Readonly<Record<string, readonly string[]>> = {
  getReqHeader: HTTP_PHASES,
  hasReqHeader: HTTP_PHASES,
  getQueryParam: HTTP_PHASES,
  hasQueryParam: HTTP_PHASES,
  getReqCookie: HTTP_PHASES,
  hasReqCookie: HTTP_PHASES,
  getResHeader: RESPONSE_PHASES,
  hasResHeader: RESPONSE_PHASES,
  getResCookie: RESPONSE_PHASES,
  hasResCookie: RESPONSE_PHASES,
};

export const isDyn = (t: CelType) => t.kind === "scalar" && t.scalar === "dyn";

/** Whether a value of type `arg` may be passed where `param` is taken (dyn takes and is anything). */
export function assignable(param: CelType, arg: CelType): boolean {
  if (isDyn(param) || isDyn(arg)) return true;
  if (param.kind !== arg.kind) return false;
  if (param.kind === "list" && arg.kind === "list") return assignable(param.element, arg.element);
  if (param.kind === "map" && arg.kind === "map") return assignable(param.key, arg.key) && assignable(param.value, arg.value);
  return param.name === arg.name;
}

export function sameType(a: CelType, b: CelType): boolean {
  return assignable(a, b) && assignable(b, a) && !isDyn(a) && !isDyn(b) ? a.toString() === b.toString() : false;
}

/** The one type both are, else dyn. */
export function join(a: CelType | undefined, b: CelType): CelType {
  if (a === undefined) return b;
  return sameType(a, b) ? a : DYN;
}

/** `a.b.c` for a chain of names and selections, else undefined. */
export function qualifiedName(e: Expr): string | undefined {
  const k = e.exprKind;
  if (k.case === "identExpr") return k.value.name;
  if (k.case === "selectExpr" && !k.value.testOnly && k.value.operand) {
    const left = qualifiedName(k.value.operand);
    return left === undefined ? undefined : `${left}.${k.value.field}`;
  }
  return undefined;
}

export const describeArgs = (types: CelType[]) => `(${types.map((t) => t.toString()).join(", ")})`;

export const isNumber = (t: CelType) => t.kind === "scalar" && (t.scalar === "int" || t.scalar === "uint" || t.scalar === "double");

/** A map literal's key type: one of those CEL allows, else dyn. */
export function mapKey(t: CelType): typeof INT | typeof UINT | typeof BOOL | typeof STRING | typeof DYN {
  if (t.kind === "scalar" && (t === INT || t === UINT || t === BOOL || t === STRING)) return t;
  return DYN;
}

/** Operator functions by their symbol, as a person wrote them. */
export function printable(fn: string): string {
  const m = /^_(.+)_$/.exec(fn) ?? /^(.+)_$/.exec(fn);
  return m ? m[1]! : fn;
}

export function constantType(kind: string | undefined): CelType {
  switch (kind) {
    case "boolValue":
      return BOOL;
    case "int64Value":
      return INT;
    case "uint64Value":
      return UINT;
    case "doubleValue":
      return DOUBLE;
    case "stringValue":
      return STRING;
    case "bytesValue":
      return BYTES;
    case "nullValue":
      return NULL;
    case "timestampValue":
      return TIMESTAMP_TYPE;
    case "durationValue":
      return DYN; // the parser makes none; a duration is duration('1s')
    default:
      return DYN;
  }
}
