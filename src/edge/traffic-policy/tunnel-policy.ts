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
import type { BodyReading } from "./body-reading.ts";

export class TunnelPolicy {
  /** Some layer has on_tcp_connect rules. */
  readonly connect: boolean;
  /** Some layer has on_http_request rules. */
  readonly request: boolean;
  /** Some layer has on_http_response rules. */
  readonly response: boolean;
  /** How the edge reads a request's body for an action that needs it (verify-webhook), when some layer has one; undefined: bodies are not read. */
  readonly body: BodyReading | undefined;

  private constructor(
    /** The operator's layers, outermost (server-wide) first: they run before the tunnel's own on a connection and a request, after it on a response. */
    readonly operator: readonly Policy[],
    /** The tunnel's own (its agent's --policy-file). */
    readonly own: Policy | undefined,
    body: BodyReading | undefined,
  ) {
    const all = own ? [...operator, own] : operator;
    this.connect = all.some((p) => p.has("on_tcp_connect"));
    this.request = all.some((p) => p.has("on_http_request"));
    this.response = all.some((p) => p.has("on_http_response"));
    this.body = body && all.some((p) => p.readsBody) ? body : undefined;
  }

  /** The layers, or undefined when there are none. */
  static of(operator: readonly Policy[], own: Policy | undefined, body?: BodyReading): TunnelPolicy | undefined {
    return operator.length === 0 && !own ? undefined : new TunnelPolicy(operator, own, body);
  }

  /** Every layer in request order: the operator's, then the tunnel's own. */
  get layers(): readonly Policy[] {
    return this.own ? [...this.operator, this.own] : this.operator;
  }
}
