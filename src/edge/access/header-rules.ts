/**
 * A tunnel's header rules: names removed from and set on each request
 * before it travels to the agent, and set on each response before it
 * reaches the visitor. "Set" replaces what was there under that name, so
 * a visitor cannot forge a header the service is told to trust.
 */
export class HeaderRules {
  private readonly requestRemove: Set<string>;
  private readonly requestSet: [string, string][];
  private readonly responseSet: [string, string][];

  constructor(opts: { requestAdd?: [string, string][]; requestRemove?: string[]; responseAdd?: [string, string][] }) {
    this.requestSet = (opts.requestAdd ?? []).map(([n, v]) => [n.toLowerCase(), v]);
    this.responseSet = (opts.responseAdd ?? []).map(([n, v]) => [n.toLowerCase(), v]);
    this.requestRemove = new Set([...(opts.requestRemove ?? []).map((n) => n.toLowerCase()), ...this.requestSet.map(([n]) => n)]);
  }

  get empty(): boolean {
    return this.requestRemove.size === 0 && this.responseSet.length === 0;
  }

  /** Whether responses have rules (their heads are then written anew). */
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
    const names = new Set(this.responseSet.map(([n]) => n));
    return [...headers.filter(([n]) => !names.has(n.toLowerCase())), ...this.responseSet];
  }
}
