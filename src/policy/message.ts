/**
 * The request and the response as a run's actions leave them: headers
 * added and removed, the URL rewritten. What the edge forwards (or writes
 * back) after a run is these.
 */
import type { HeaderPairs, RequestFacts, ResponseFacts } from "./facts.ts";
import type { Regex } from "./regex.ts";

/** One rule of response-body-find-replace as its run made it (actions/body-replace.ts): the pattern, the replacement with its `${...}` evaluated, and the steps it may take beyond a few a character. */
export interface Replacement {
  re: Regex;
  to: string;
  steps: number;
}

/** One rule of sse-find-replace as its run made it: a Replacement, and the field of each event it rewrites. */
export interface StreamReplacement extends Replacement {
  field: StreamField;
}

/** The fields of an event sse-find-replace may rewrite (ngrok's). */
export const STREAM_FIELDS = ["data", "retry"] as const;
export type StreamField = (typeof STREAM_FIELDS)[number];

/** A header list whose lookups ignore case, as CEL's `req.headers['User-Agent']` is read. */
export class HeaderMap extends Map<string, string[]> {
  static of(headers: HeaderPairs): HeaderMap {
    const m = new HeaderMap();
    for (const [name, value] of headers) {
      const key = name.toLowerCase();
      const list = Map.prototype.get.call(m, key) as string[] | undefined;
      if (list) list.push(value);
      else Map.prototype.set.call(m, key, [value]);
    }
    return m;
  }
  override get(key: string): string[] | undefined {
    return super.get(typeof key === "string" ? key.toLowerCase() : key);
  }
  override has(key: string): boolean {
    return super.has(typeof key === "string" ? key.toLowerCase() : key);
  }
}

/**
 * Where a message's fields are read from when a rule first needs them:
 * its facts (whose `headers` the edge may make a getter that reads the
 * rest of a head only then).
 */
export interface FieldSource {
  readonly headers: HeaderPairs;
}

/**
 * A head's fields as the actions leave them. They are read when a rule or
 * an action first needs them (`fields`, `headers`), not before; changed
 * in a copy of the list made on the first ask to change it (`headers`: the
 * same pairs in a new list); fields only added go after the others
 * without either (`append`). So a run that changes nothing reads and
 * copies nothing, and when all it did was add fields the edge can send the
 * head as it came with those after it (`appended`). A pair is never
 * changed in place: a field changed is a new pair in its place.
 */
class WorkingFields {
  private sent: HeaderPairs | undefined;
  /** The list the actions change, once one asked for it. */
  private own: [string, string][] | undefined;
  /** Fields added while the sent ones were not read. */
  private extra: [string, string][] | undefined;

  constructor(private readonly source: FieldSource) {}

  /** The fields as they came. */
  private sentFields(): HeaderPairs {
    return (this.sent ??= this.source.headers);
  }

  /** The header list, to change: the first ask makes the message's own copy. */
  get headers(): [string, string][] {
    if (this.own === undefined) {
      this.own = this.sentFields().slice() as [string, string][];
      if (this.extra) this.own.push(...this.extra);
      this.extra = undefined;
    }
    return this.own;
  }

  set headers(list: [string, string][]) {
    this.own = list;
    this.extra = undefined;
  }

  /** The header list as it is now, to read (no copy is made unless fields were added before it was read). */
  get fields(): HeaderPairs {
    return this.own ?? (this.extra ? this.headers : this.sentFields());
  }

  /** A field added after the others. */
  append(name: string, value: string): void {
    this.appendPair([name, value]);
  }

  protected appendPair(pair: [string, string]): void {
    if (this.own) this.own.push(pair);
    else (this.extra ??= []).push(pair);
  }

  /** The fields added after the ones that came, when that is all that changed (none: nothing did); undefined: more changed. */
  protected addedFields(): HeaderPairs | undefined {
    const own = this.own;
    if (own === undefined) return this.extra ?? NONE;
    const sent = this.sentFields();
    if (own.length < sent.length) return undefined;
    for (let i = 0; i < sent.length; i++) if (own[i] !== sent[i]) return undefined;
    return own.length === sent.length ? NONE : own.slice(sent.length);
  }

  /**
   * Whether some field's name is one of `lower` (lower-case names, whose
   * lengths are `lengths`): read off the fields as they came and those
   * added, without the list `fields` makes of them once fields were added.
   */
  hasAnyOf(lower: ReadonlySet<string>, lengths: ReadonlySet<number>): boolean {
    if (this.own !== undefined) return namedIn(this.own, lower, lengths);
    return namedIn(this.sentFields(), lower, lengths) || (this.extra !== undefined && namedIn(this.extra, lower, lengths));
  }

  /** The first value of a field as it came, whatever the actions did to it since (name in any case). */
  sentHeader(name: string): string | undefined {
    return firstValue(this.sentFields(), name);
  }

  /** The first value of a field (name in any case). */
  header(name: string): string | undefined {
    const lower = name.toLowerCase();
    const fields = this.fields;
    for (let i = 0; i < fields.length; i++) {
      const [n, v] = fields[i]!;
      // field names are tokens (ASCII): lower case keeps their length
      if (n.length === lower.length && n.toLowerCase() === lower) return v;
    }
    return undefined;
  }
}

const NONE: HeaderPairs = Object.freeze([]);

function firstValue(fields: HeaderPairs, name: string): string | undefined {
  const lower = name.toLowerCase();
  for (let i = 0; i < fields.length; i++) {
    const [n, v] = fields[i]!;
    if (n.length === lower.length && n.toLowerCase() === lower) return v;
  }
  return undefined;
}

/** Whether two header lists hold the same names and values in the same order (a text made of one serves for the other). */
export function sameFields(a: HeaderPairs, b: HeaderPairs): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x !== y && (x[0] !== y[0] || x[1] !== y[1])) return false;
  }
  return true;
}

function namedIn(fields: HeaderPairs, lower: ReadonlySet<string>, lengths: ReadonlySet<number>): boolean {
  for (let i = 0; i < fields.length; i++) {
    const name = fields[i]![0];
    // field names are tokens (ASCII): lower case keeps their length, and most names are not of the lengths looked for
    if (lengths.has(name.length) && lower.has(name.toLowerCase())) return true;
  }
  return false;
}

/** Told once of what came of a request: its response's status, or that none came (`failed`: the edge's own 502/504), or nothing to count (the visitor left first). */
export interface OutcomeWatcher {
  settle(outcome: "ok" | "failed" | "uncounted"): void;
}

/** The request as the actions leave it: fields added and removed (WorkingFields), the URL rewritten. */
export class WorkingRequest extends WorkingFields {
  method: string;
  scheme: "http" | "https";
  host: string;
  path: string;
  query: string;
  rawTarget: string;
  version: string;
  body?: Uint8Array;
  /** The body was larger than the edge reads for the actions (facts.ts bodyLimit). */
  bodyLimit?: number;
  /** request-body-find-replace changed `body`: the edge sends it in place of the one read, with its length (edge/traffic-policy/replaced-body.ts). */
  bodyReplaced?: boolean;
  /**
   * The edge's reader of the body, when it reads it for the actions that
   * need it (verify-webhook) rather than giving it with the facts: read
   * once, when the first such action is to run (readBody).
   */
  bodyReader?: () => Promise<boolean>;
  receivedAt: number;
  /** The circuit breakers this request passed, told of its outcome by the edge once its response's status is known (actions/circuit-breaker.ts); undefined: none asked. */
  breakers?: OutcomeWatcher[];
  /** The target as the edge read it, to tell a rewrite. */
  private readonly sentTarget: string;
  /** The fields the edge's own rules set (appendEdgeField). */
  private edgeSet: Set<readonly [string, string]> | undefined;

  /** The facts' headers are read when first needed. */
  constructor(facts: RequestFacts, now: number) {
    super(facts);
    this.method = facts.method;
    this.scheme = facts.scheme;
    this.host = facts.host;
    const q = facts.target.indexOf("?");
    this.path = q < 0 ? facts.target : facts.target.slice(0, q);
    this.query = q < 0 ? "" : facts.target.slice(q + 1);
    this.sentTarget = facts.target;
    this.rawTarget = facts.rawTarget ?? facts.target;
    this.version = facts.version ?? "HTTP/1.1";
    this.body = facts.body;
    if (facts.bodyLimit !== undefined) this.bodyLimit = facts.bodyLimit;
    this.receivedAt = facts.receivedAt ?? now;
  }

  /**
   * The body read by the edge's reader, the first time an action needs it:
   * it sets `body` (or `bodyLimit`, past the edge's limit), and says false
   * when the body could not be read (the edge answers why, and the run
   * ends). Undefined: nothing to read (read already, or given).
   */
  readBody(): Promise<boolean> | undefined {
    const reader = this.bodyReader;
    if (reader === undefined) return undefined;
    this.bodyReader = undefined;
    return reader();
  }

  /**
   * What the actions did to the head, if it was no more than adding
   * fields after the ones sent, with the target as it came: the fields
   * added (none: nothing changed). Undefined: more changed (a field
   * removed or replaced, the URL rewritten), and the head is to be
   * written anew.
   */
  appended(): HeaderPairs | undefined {
    return this.target === this.sentTarget ? this.addedFields() : undefined;
  }

  /**
   * A field the edge's own rules set (the tunnel's header flags, a
   * sign-in's X-Burrow-User-Email), added after the others: what the edge
   * takes off a visitor's request (its X-Burrow-* fields, a switch it did
   * not ask for) it leaves on this one.
   */
  appendEdgeField(name: string, value: string): void {
    const pair: [string, string] = [name, value];
    this.appendPair(pair);
    (this.edgeSet ??= new Set()).add(pair);
  }

  /** Whether the edge's own rules set some field (appendEdgeField). */
  hasEdgeFields(): boolean {
    return this.edgeSet !== undefined;
  }

  /** Whether `field` is one the edge's own rules set (appendEdgeField). */
  isEdgeField(field: readonly [string, string]): boolean {
    return this.edgeSet !== undefined && this.edgeSet.has(field);
  }

  get target(): string {
    return this.query === "" ? this.path : `${this.path}?${this.query}`;
  }

  /** scheme://host/path?query, as ngrok's `req.url`. */
  get url(): string {
    return `${this.scheme}://${this.host}${this.target}`;
  }
}

/** The response's head as the actions leave it (WorkingFields). */
export class WorkingResponse extends WorkingFields {
  status: number;
  /** response-body-find-replace's rules, in the order they ran: the edge applies them to the body it buffers (edge/traffic-policy/response-rewrite.ts). */
  bodyRewrites?: Replacement[];
  /** on_event_stream_message's sse-find-replace rules, in the order they ran: the edge applies them to each event of a text/event-stream body as it streams (edge/traffic-policy/event-stream.ts). */
  streamRewrites?: StreamReplacement[];

  /** The facts' headers are read when first needed. */
  constructor(facts: ResponseFacts) {
    super(facts);
    this.status = facts.status;
  }


  /** As WorkingRequest's: the fields added after the ones that came when that is all that changed, else undefined. */
  appended(): HeaderPairs | undefined {
    return this.addedFields();
  }
}
