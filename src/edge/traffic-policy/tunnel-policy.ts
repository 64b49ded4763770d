/**
 * The traffic policies a live tunnel runs (docs/policy.md): the
 * operator's layers that cover it (server-wide, its user's, its
 * hostname's), and its own, sent by its agent. Made again whenever one of
 * them changes (an operator's edit reaches live tunnels in place); a
 * tunnel that none covers has none at all (Tunnel.policy undefined), so
 * the hot path pays one property read, and each phase is asked only when
 * some layer has rules for it.
 */
import type { Policy } from "../../policy/index.ts";

export class TunnelPolicy {
  /** Some layer has on_tcp_connect rules. */
  readonly connect: boolean;
  /** Some layer has on_http_request rules. */
  readonly request: boolean;
  /** Some layer has on_http_response rules. */
  readonly response: boolean;
  /** Every layer in request order: the operator's, then the tunnel's own. */
  readonly layers: readonly Policy[];
  /** Every layer in response order: the tunnel's own, then the operator's from the innermost out. */
  readonly responseLayers: readonly Policy[];

  private constructor(
    /** The operator's layers, outermost (server-wide) first: they run before the tunnel's own on a connection and a request, after it on a response. */
    readonly operator: readonly Policy[],
    /** The tunnel's own (its agent's --policy-file). */
    readonly own: Policy | undefined,
  ) {
    const all = own ? [...operator, own] : operator;
    this.layers = all;
    this.responseLayers = [...all].reverse();
    this.connect = all.some((p) => p.has("on_tcp_connect"));
    this.request = all.some((p) => p.has("on_http_request"));
    this.response = all.some((p) => p.has("on_http_response"));
  }

  /** The layers, or undefined when there are none. */
  static of(operator: readonly Policy[], own: Policy | undefined): TunnelPolicy | undefined {
    return operator.length === 0 && !own ? undefined : new TunnelPolicy(operator, own);
  }
}
