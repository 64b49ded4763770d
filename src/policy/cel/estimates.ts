/**
 * What the checker (check.ts) estimates the list, JSON and query-string
 * functions cost and make, beside their loops: each reads or makes its
 * entries at a unit apiece at run time (list-functions.ts,
 * json-functions.ts), so at load a sort of a list of the request is
 * estimated at COLLECTION_ESTIMATE units and makes as many entries,
 * `lists.range(n)` of a literal n at n, and a decode at
 * COLLECTION_ESTIMATE; a loop over what they make multiplies as any
 * other. The functions whose result is the list they got (`sort`,
 * `slice`, `distinct`) keep its element type.
 */
import { CelScalar, listType, type CelType } from "@bufbuild/cel";
import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { COLLECTION_ESTIMATE } from "../limits.ts";
import { isDyn } from "./types.ts";

/** A part as the checker knows it. */
export interface Estimated {
  type: CelType;
  entries?: number;
}

export interface CallEstimate {
  cost: number;
  entries?: number;
  /** The result's type, when it is finer than the overload's. */
  type?: CelType;
}

/** Whether values of `t` can be ordered (sort, sortBy); a `dyn` may be, and is asked at run time. */
export function orderable(t: CelType): boolean {
  if (isDyn(t)) return true;
  if (t.kind === "list" || t.kind === "map") return false;
  if (t.kind === "scalar") return t.scalar !== "null_type" && t.scalar !== "type";
  return t.name === "google.protobuf.Timestamp" || t.name === "google.protobuf.Duration";
}

const literalInt = (e: Expr | undefined): bigint | undefined => (e?.exprKind.case === "constExpr" && e.exprKind.value.constantKind.case === "int64Value" ? e.exprKind.value.constantKind.value : undefined);

/** The estimate of a call of `fn`, or a refusal's words, or undefined: the function costs nothing beyond its arguments. */
export function estimateCall(fn: string, target: Estimated | undefined, args: Estimated[], argExprs: Expr[]): CallEstimate | string | undefined {
  const n = (target ?? args[0])?.entries ?? COLLECTION_ESTIMATE;
  switch (fn) {
    case "sort":
    case "distinct":
    case "slice": {
      const t = target!.type;
      if (fn === "sort" && t.kind === "list" && !orderable(t.element)) return `sort() needs elements that can be ordered, not ${t.element.toString()}s`;
      return { cost: n, entries: n, type: t.kind === "list" ? t : undefined };
    }
    case "flatten": {
      const depth = literalInt(argExprs[0]);
      const entries = depth === 0n ? n : n * COLLECTION_ESTIMATE;
      return { cost: entries, entries };
    }
    case "lists.range": {
      const literal = literalInt(argExprs[0]);
      const entries = literal === undefined ? COLLECTION_ESTIMATE : literal < 0n ? 0 : Number(literal);
      return { cost: entries, entries, type: listType(CelScalar.INT) };
    }
    case "json.decode":
    case "decodeJson":
    case "queryString.decode":
    case "decodeQueryString":
      return { cost: COLLECTION_ESTIMATE, entries: COLLECTION_ESTIMATE };
    case "json.encode":
    case "encodeJson":
    case "queryString.encode":
    case "encodeQueryString":
      return { cost: n };
  }
  return undefined;
}
