/**
 * The request and the response as a run's actions leave them: headers
 * added and removed, the URL rewritten. What the edge forwards (or writes
 * back) after a run is these.
 */
import type { HeaderPairs, RequestFacts, ResponseFacts } from "./facts.ts";

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

/** The request as the actions leave it: headers added and removed, the URL rewritten. */
export class WorkingRequest {
  method: string;
  scheme: "http" | "https";
  host: string;
  path: string;
  query: string;
  rawTarget: string;
  version: string;
  headers: [string, string][];
  body?: Uint8Array;
  /** The body was larger than the edge reads for the actions (facts.ts bodyLimit). */
  bodyLimit?: number;
  receivedAt: number;

  constructor(facts: RequestFacts, now: number) {
    this.method = facts.method;
    this.scheme = facts.scheme;
    this.host = facts.host;
    const q = facts.target.indexOf("?");
    this.path = q < 0 ? facts.target : facts.target.slice(0, q);
    this.query = q < 0 ? "" : facts.target.slice(q + 1);
    this.rawTarget = facts.rawTarget ?? facts.target;
    this.version = facts.version ?? "1.1";
    this.headers = facts.headers.map(([n, v]) => [n, v]);
    this.body = facts.body;
    if (facts.bodyLimit !== undefined) this.bodyLimit = facts.bodyLimit;
    this.receivedAt = facts.receivedAt ?? now;
  }

  get target(): string {
    return this.query === "" ? this.path : `${this.path}?${this.query}`;
  }

  /** scheme://host/path?query, as ngrok's `req.url`. */
  get url(): string {
    return `${this.scheme}://${this.host}${this.target}`;
  }

  header(name: string): string | undefined {
    const lower = name.toLowerCase();
    for (const [n, v] of this.headers) if (n.toLowerCase() === lower) return v;
    return undefined;
  }
}

export class WorkingResponse {
  status: number;
  headers: [string, string][];
  constructor(facts: ResponseFacts) {
    this.status = facts.status;
    this.headers = facts.headers.map(([n, v]) => [n, v]);
  }
  header(name: string): string | undefined {
    const lower = name.toLowerCase();
    for (const [n, v] of this.headers) if (n.toLowerCase() === lower) return v;
    return undefined;
  }
}
