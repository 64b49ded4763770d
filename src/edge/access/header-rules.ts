/**
 * A tunnel's header rules: names removed from and set on each request
 * before it travels to the agent, and set on each response before it
 * reaches the visitor. "Set" replaces what was there under that name, so
 * a visitor cannot forge a header the service is told to trust. They run
 * as rules of the tunnel's flags layer (flag-layer.ts), on the request and
 * the response as the traffic policy engine holds them.
 */
import type { WorkingRequest, WorkingResponse } from "../../policy/message.ts";

export class HeaderRules {
  private readonly requestRemove: Set<string>;
  private readonly requestSet: [string, string][];
  private readonly responseSet: [string, string][];
  private readonly responseNames: Set<string>;

  constructor(opts: { requestAdd?: [string, string][]; requestRemove?: string[]; responseAdd?: [string, string][] }) {
    this.requestSet = (opts.requestAdd ?? []).map(([n, v]) => [n.toLowerCase(), v]);
    this.responseSet = (opts.responseAdd ?? []).map(([n, v]) => [n.toLowerCase(), v]);
    this.requestRemove = new Set([...(opts.requestRemove ?? []).map((n) => n.toLowerCase()), ...this.requestSet.map(([n]) => n)]);
    this.responseNames = new Set(this.responseSet.map(([n]) => n));
  }

  get empty(): boolean {
    return this.requestRemove.size === 0 && this.responseSet.length === 0;
  }

  /** Whether requests have rules. */
  get rewritesRequest(): boolean {
    return this.requestRemove.size > 0;
  }

  /** Whether responses have rules. */
  get rewritesResponse(): boolean {
    return this.responseSet.length > 0;
  }

  /** Applies the request rules to a head's header list (names in any case), in place. */
  rewriteRequest(headers: [string, string][]): void {
    if (this.requestRemove.size === 0) return;
    for (let i = headers.length - 1; i >= 0; i--) if (this.requestRemove.has(headers[i]![0].toLowerCase())) headers.splice(i, 1);
    for (const pair of this.requestSet) headers.push([pair[0], pair[1]]);
  }

  /** The response's header list with the response rules applied (a new list when there are rules). */
  rewriteResponse(headers: [string, string][]): [string, string][] {
    if (this.responseSet.length === 0) return headers;
    return [...headers.filter(([n]) => !this.responseNames.has(n.toLowerCase())), ...this.responseSet];
  }

  /**
   * The same, on a request as a policy holds it (what the flags layer
   * runs): the names removed
   * (its fields copied only when one of them is there), the set ones added
   * after the others as the edge's own (kept whatever their name: a rule
   * may name a field the edge would take off a visitor's request).
   */
  applyToRequest(req: WorkingRequest): void {
    if (has(req.fields, this.requestRemove)) {
      const headers = req.headers;
      for (let i = headers.length - 1; i >= 0; i--) if (this.requestRemove.has(headers[i]![0].toLowerCase())) headers.splice(i, 1);
    }
    for (const [name, value] of this.requestSet) req.appendEdgeField(name, value);
  }

  /** The same, on a response as a policy holds it: what they set replaces what it had under those names (its fields read only when there are rules). */
  applyToResponse(res: WorkingResponse): void {
    if (this.responseSet.length === 0) return;
    if (has(res.fields, this.responseNames)) res.headers = res.fields.filter(([n]) => !this.responseNames.has(n.toLowerCase())) as [string, string][];
    for (const [name, value] of this.responseSet) res.append(name, value);
  }
}

/** Whether a field of one of `names` (lower case) is among `fields`. */
function has(fields: readonly (readonly [string, string])[], names: ReadonlySet<string>): boolean {
  for (let i = 0; i < fields.length; i++) if (names.has(fields[i]![0].toLowerCase())) return true;
  return false;
}
