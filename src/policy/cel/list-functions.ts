/**
 * CEL's list extension under ngrok's names: `slice`, `flatten`, `sort`,
 * `distinct`, `lists.range`, and what the `sortBy` macro becomes
 * (macros.ts): each as cel-go's ext/lists has it, its errors included.
 * Each pays one unit of the run's budget per entry it reads or makes
 * (cost.ts), so a sort, a flatten or a range is bounded by the run's cost
 * limit; a range or a flatten makes no more than the run's maxMadeEntries whatever
 * the limit.
 */
import { celEnv, celFunc, celMethod, CelScalar, isCelError, isCelList, isCelUint, listType, type CelFunc, type CelList, type CelValue } from "@bufbuild/cel";
import { payEntries } from "./cost.ts";
import { caps } from "./evaluation.ts";

const { DYN, INT } = CelScalar;
const LIST = listType(DYN);

/** The function `@sortByKeys` the sortBy macro calls: no expression can name it (`@` starts no identifier). */
export const SORT_BY_KEYS = "@sortByKeys";

/** A comparable value's kind (what sort orders by), or undefined: a list, a map, null, a type. */
function comparableKind(v: CelValue): string | undefined {
  switch (typeof v) {
    case "bigint":
      return "int";
    case "number":
      return "double";
    case "boolean":
      return "bool";
    case "string":
      return "string";
  }
  if (v instanceof Uint8Array) return "bytes";
  if (isCelUint(v)) return "uint";
  const name = (v as { desc?: { typeName?: string } } | null)?.desc?.typeName;
  if (name === "google.protobuf.Timestamp" || name === "google.protobuf.Duration") return name;
  return undefined;
}

/** Strings in code-point order, as CEL compares them (UTF-16 order differs past U+FFFF). */
function compareStrings(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const xs = x >= 0xd800 && x <= 0xdfff;
    const ys = y >= 0xd800 && y <= 0xdfff;
    if (xs !== ys) return xs ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return a.length - b.length;
}

function compareBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i]! - b[i]!;
  return a.length - b.length;
}

const sign = (a: bigint | number, b: bigint | number) => (a < b ? -1 : a > b ? 1 : 0);

/** Two values of the same comparable kind, ordered. */
function compare(a: CelValue, b: CelValue, kind: string): number {
  switch (kind) {
    case "string":
      return compareStrings(a as string, b as string);
    case "bytes":
      return compareBytes(a as Uint8Array, b as Uint8Array);
    case "uint":
      return sign((a as { value: bigint }).value, (b as { value: bigint }).value);
    case "bool":
      return Number(a) - Number(b);
    case "google.protobuf.Timestamp":
    case "google.protobuf.Duration": {
      const x = (a as unknown as { message: { seconds: bigint; nanos: number } }).message;
      const y = (b as unknown as { message: { seconds: bigint; nanos: number } }).message;
      return sign(x.seconds, y.seconds) || sign(x.nanos, y.nanos);
    }
    default:
      return sign(a as bigint | number, b as bigint | number);
  }
}

/** The kind all of `values` are, or the error sort gives (cel-go's words). */
function oneKind(values: readonly CelValue[]): string | undefined {
  if (values.length === 0) return undefined;
  const kind = comparableKind(values[0]!);
  if (kind === undefined) throw new Error("list elements must be comparable");
  for (const v of values) if (comparableKind(v) !== kind) throw new Error("list elements must have the same type");
  return kind;
}

function sortList(list: CelList): CelValue[] {
  payEntries(list.size);
  const values = [...list];
  const kind = oneKind(values);
  if (kind !== undefined) values.sort((a, b) => compare(a, b, kind));
  return values;
}

/** sortBy's second half: `pairs` is `[[element, key], ...]` (macros.ts), sorted by key, stably. */
function sortByKeys(pairs: CelList): CelValue[] {
  payEntries(pairs.size);
  const entries: [CelValue, CelValue][] = [];
  for (const p of pairs) {
    const pair = p as CelList;
    entries.push([pair.get(0)!, pair.get(1)!]);
  }
  const kind = oneKind(entries.map((e) => e[1]));
  if (kind !== undefined) entries.sort((a, b) => compare(a[1], b[1], kind));
  return entries.map((e) => e[0]);
}

function slice(list: CelList, start: bigint, end: bigint): CelValue[] {
  if (start < 0n || end < 0n) throw new Error(`cannot slice(${start}, ${end}), negative indexes not supported`);
  if (start > end) throw new Error(`cannot slice(${start}, ${end}), start index must be less than or equal to end index`);
  if (end > BigInt(list.size)) throw new Error(`cannot slice(${start}, ${end}), list is length ${list.size}`);
  payEntries(Number(end - start));
  const out: CelValue[] = [];
  for (let i = Number(start); i < Number(end); i++) out.push(list.get(i)!);
  return out;
}

function flatten(list: CelList, depth: bigint): CelValue[] {
  if (depth < 0n) throw new Error("level must be non-negative");
  const out: CelValue[] = [];
  const max = caps().maxMadeEntries;
  const into = (l: CelList, level: bigint): void => {
    payEntries(l.size);
    for (const v of l) {
      if (isCelList(v) && level > 0n) into(v, level - 1n);
      else {
        if (out.length >= max) throw new Error(`flatten would make more than ${max} entries`);
        out.push(v);
      }
    }
  };
  into(list, depth);
  return out;
}

/** CEL's equality (1 == 1.0 == 1u), which distinct keeps the first of. */
const celEquals: CelFunc = [...(celEnv().funcs.find("_==_") ?? [])][0]!;
const equal = (a: CelValue, b: CelValue) => {
  const out = celEquals.call(0, undefined as never, [a, b]);
  return !isCelError(out) && out === true;
};

/** A scalar's identity under CEL's equality (numbers by their value, whatever their kind), or undefined: compared one by one. */
function scalarKey(v: CelValue): string | undefined {
  switch (typeof v) {
    case "bigint":
      return `n${v}`;
    case "number":
      return Number.isInteger(v) ? `n${BigInt(v)}` : Number.isNaN(v) ? undefined : `d${v}`;
    case "boolean":
      return `b${v}`;
    case "string":
      return `s${v}`;
  }
  if (v === null) return "null";
  if (isCelUint(v)) return `n${v.value}`;
  return undefined;
}

function distinct(list: CelList): CelValue[] {
  payEntries(list.size);
  const seen = new Set<string>();
  const others: CelValue[] = [];
  const out: CelValue[] = [];
  for (const v of list) {
    const key = scalarKey(v);
    if (key !== undefined) {
      if (seen.has(key)) continue;
      seen.add(key);
    } else {
      // a list, a map, bytes, a timestamp: compared with those kept, each comparison paid for
      payEntries(others.length);
      if (others.some((o) => equal(o, v))) continue;
      others.push(v);
    }
    out.push(v);
  }
  return out;
}

function range(n: bigint): bigint[] {
  const max = caps().maxMadeEntries;
  if (n > BigInt(max)) throw new Error(`lists.range(${n}) would make more than ${max} entries`);
  const count = n > 0n ? Number(n) : 0;
  payEntries(count);
  const out: bigint[] = new Array(count);
  for (let i = 0; i < count; i++) out[i] = BigInt(i);
  return out;
}

export const LIST_FUNCTIONS: CelFunc[] = [
  celMethod("slice", LIST, [INT, INT], LIST, function (start, end) {
    return slice(this, start, end);
  }),
  celMethod("flatten", LIST, [], LIST, function () {
    return flatten(this, 1n);
  }),
  celMethod("flatten", LIST, [INT], LIST, function (depth) {
    return flatten(this, depth);
  }),
  celMethod("sort", LIST, [], LIST, function () {
    return sortList(this);
  }),
  celMethod("distinct", LIST, [], LIST, function () {
    return distinct(this);
  }),
  celFunc("lists.range", [INT], listType(INT), range),
  celFunc(SORT_BY_KEYS, [LIST], LIST, sortByKeys),
];
