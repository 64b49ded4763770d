/** Evaluating one expression of the macro tests: its value as plain data, its CEL error's words, or its refusal at load. */
import { isCelError, isCelList, isCelMap, isCelUint, type CelValue } from "@bufbuild/cel";
import { compileExpression } from "../../src/policy/cel/compile.ts";
import { Bindings } from "../../src/policy/context.ts";
import { DEFAULT_POLICY_LIMITS } from "../../src/policy/limits.ts";
import { WorkingRequest, WorkingResponse } from "../../src/policy/message.ts";
import type { Phase } from "../../src/policy/variables.ts";
import { requestInput, type RequestSketch } from "./policy-harness.ts";

/** A CEL value as plain data: ints as bigints, lists as arrays, maps as objects, timestamps and durations as { seconds, nanos }. */
export function plain(v: CelValue): unknown {
  if (isCelList(v)) return [...v].map(plain);
  if (isCelMap(v)) return Object.fromEntries([...v.entries()].map(([k, x]) => [String(isCelUint(k) ? k.value : k), plain(x)]));
  if (isCelUint(v)) return { uint: v.value };
  const m = (v as { desc?: { typeName?: string }; message?: { seconds: bigint; nanos: number } } | null)?.message;
  if (m && typeof m.seconds === "bigint") return { seconds: m.seconds, nanos: m.nanos };
  return v;
}

export type Evaluated = { value: unknown } | { error: string } | { refused: string; kind: string; offset: number };

/** `text` compiled for `phase` and evaluated against one request (and, in on_http_response, its response), with the default cost limit or `costLimit`. */
export function evaluate(text: string, options: { phase?: Phase; request?: RequestSketch; costLimit?: number } = {}): Evaluated {
  const phase = options.phase ?? "on_http_request";
  const limits = { ...DEFAULT_POLICY_LIMITS, ...(options.costLimit ? { costLimit: options.costLimit } : {}) };
  const e = compileExpression(text, phase, "value", limits);
  if ("kind" in e) return { refused: e.message, kind: e.kind, offset: e.offset };
  const input = requestInput(options.request);
  const response = phase === "on_http_response" ? new WorkingResponse({ status: options.request?.response?.status ?? 200, headers: options.request?.response?.headers ?? [] }) : undefined;
  const b = new Bindings(input, limits, new WorkingRequest(input.request!, input.now!), response);
  const out = e.evaluate(b);
  return isCelError(out) ? { error: out.message } : { value: plain(out) };
}

/** The value, or a thrown error saying what came instead. */
export function valueOf(text: string, options?: Parameters<typeof evaluate>[1]): unknown {
  const out = evaluate(text, options);
  if (!("value" in out)) throw new Error(`${text}: ${JSON.stringify(out)}`);
  return out.value;
}

/** The CEL error's words, or a thrown error. */
export function errorOf(text: string, options?: Parameters<typeof evaluate>[1]): string {
  const out = evaluate(text, options);
  if (!("error" in out)) throw new Error(`${text}: expected an error, got ${JSON.stringify(out, (_, x) => (typeof x === "bigint" ? `${x}n` : x))}`);
  return out.error;
}

/** The refusal at load, or a thrown error. */
export function refusalOf(text: string, options?: Parameters<typeof evaluate>[1]): { refused: string; kind: string; offset: number } {
  const out = evaluate(text, options);
  if (!("refused" in out)) throw new Error(`${text}: expected a refusal at load`);
  return out;
}
