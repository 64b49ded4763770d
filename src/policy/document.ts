/**
 * A policy document's text read into values that remember where they were
 * written: YAML, or JSON (which YAML reads as it is), through `yaml`'s
 * parseDocument with a line counter, so every later mistake, down to a
 * column in an expression, is told at its line in the file.
 */
import { isMap, isScalar, isSeq, LineCounter, parseDocument, type Document, type Node } from "yaml";
import type { PolicyError, SourceSpot } from "./errors.ts";

/** A key of a field's path: a map key or a list index. */
export type PathKey = string | number;

/** The path as the errors show it: `on_http_request[0].actions[1].config`. */
export function pathText(path: readonly PathKey[]): string {
  let out = "";
  for (const k of path) out += typeof k === "number" ? `[${k}]` : out === "" ? k : `.${k}`;
  return out;
}

export class PolicyText {
  private constructor(
    private readonly text: string,
    private readonly doc: Document.Parsed,
    private readonly lines: LineCounter,
    /** The document's value: maps as plain objects, lists as arrays. */
    readonly value: unknown,
  ) {}

  /** Reads the text; a document that is not YAML or JSON is one error at the reader's stop. */
  static read(text: string): PolicyText | PolicyError[] {
    const lines = new LineCounter();
    // aliases are refused outright: a policy has no use for them, and they are how a small YAML text grows huge
    const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true, prettyErrors: false, strict: true });
    // the first error only: what follows it is mostly the reader lost after it
    const first = doc.errors[0];
    if (first) {
      const at = lines.linePos(first.pos[0]);
      return [{ code: "POLICY_SYNTAX", message: `not valid YAML or JSON: ${first.message.split("\n")[0]}`, line: at.line, column: at.col }];
    }
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: 0 });
    } catch (err) {
      return [{ code: "POLICY_SYNTAX", message: `not valid YAML or JSON: ${(err as Error).message}` }];
    }
    return new PolicyText(text, doc, lines, value);
  }

  /** The node at `path`, or the deepest one that exists on the way to it. */
  private node(path: readonly PathKey[]): Node | undefined {
    let node: unknown = this.doc.contents;
    for (const key of path) {
      let next: unknown;
      if (isMap(node)) next = node.get(key, true);
      else if (isSeq(node) && typeof key === "number") next = node.get(key, true);
      if (next === undefined || next === null) break;
      node = next;
    }
    return (node ?? undefined) as Node | undefined;
  }

  /** Where the value at `path` starts (or the closest enclosing value that exists); `key`: where its key is written instead. */
  spot(path: readonly PathKey[], key = false): SourceSpot | undefined {
    const last = path[path.length - 1];
    const parent = key && typeof last === "string" ? this.node(path.slice(0, -1)) : undefined;
    const pair = isMap(parent) ? parent.items.find((p) => isScalar(p.key) && p.key.value === last) : undefined;
    const start = ((pair?.key as Node | undefined) ?? this.node(path))?.range?.[0];
    if (start === undefined) return undefined;
    const at = this.lines.linePos(start);
    return { line: at.line, column: at.col };
  }

  /**
   * Where the character at `offset` of the string at `path` is in the file,
   * when the string is written there as it reads (plain, or quoted without
   * escapes); else where the string starts.
   */
  spotInString(path: readonly PathKey[], value: string, offset: number): { spot?: SourceSpot; exact: boolean } {
    const node = this.node(path);
    if (!node || !isScalar(node) || !node.range) return { spot: this.spot(path), exact: false };
    const [start, end] = node.range;
    const written = this.text.slice(start, end);
    const quoted = node.type === "QUOTE_DOUBLE" || node.type === "QUOTE_SINGLE";
    const inner = quoted ? written.slice(1, -1) : written;
    if (inner === value && !value.includes("\n")) {
      const at = this.lines.linePos(start + (quoted ? 1 : 0) + offset);
      return { spot: { line: at.line, column: at.col }, exact: true };
    }
    return { spot: this.spot(path), exact: false };
  }
}
