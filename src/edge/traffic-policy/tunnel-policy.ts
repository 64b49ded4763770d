/**
 * The traffic policies a live tunnel runs (docs/policy.md): the
 * operator's layers that cover it (server-wide, its user's, its
 * hostname's), its flags layer (its access flags as the rules they mean:
 * access/flag-layer.ts), and its own policy, sent by its agent. For a
 * request or a connection they run in that order; for a response the
 * other way round but for the flags, which come first there too: the
 * flags, then its own, then the operator's from the innermost out. Made
 * again whenever one of them changes (an operator's edit, its user's
 * allow_cidrs: live tunnels get theirs in place); a tunnel that none
 * covers has none at all (Tunnel.policy undefined), so the hot path pays
 * one property read, and each phase is asked only when some layer has
 * rules for it.
 */
import type { Policy } from "../../policy/index.ts";
import type { BodyReading } from "./body-reading.ts";
import { notesMadeOf, type NotesMade } from "./derived-notes.ts";

export class TunnelPolicy {
  /** Some layer has on_tcp_connect rules. */
  readonly connect: boolean;
  /** Some layer has on_http_request rules. */
  readonly request: boolean;
  /** Some layer has on_http_response or on_event_stream_message rules (both are judged on the response's head). */
  readonly response: boolean;
  /** Some layer has on_http_response rules, and all of them only add and remove fields: a response's run is made in its head, which goes on in place (response-head-rules.ts). */
  readonly responseInHead: boolean;
  /**
   * When every on_http_response rule has no expression and only adds
   * constant fields (a security header, --response-header-add): those
   * fields as text, in the order a run adds them. A response's run is then
   * known at load, and its head takes them without one.
   */
  readonly responseFields: string | undefined;
  /** responseFields as the bytes spliced into a response's head (made once, not written out per response). */
  readonly responseFieldBytes: Uint8Array | undefined;
  /** Some layer but the flags has on_http_response rules (an HTTP/2 stream's response then goes through the filter: h2/judged-response.ts). */
  readonly responseBeyondFlags: boolean;
  /** Every layer in request order: the operator's, the flags, then the tunnel's own. */
  readonly layers: readonly Policy[];
  /** The tunnel's own layers, in request order: its flags, then its policy file. */
  readonly tunnel: readonly Policy[];
  /** Every layer in response order: the flags, the tunnel's own, then the operator's from the innermost out. */
  readonly responseLayers: readonly Policy[];
  /** Its own rules as an agent that makes its notes lists them (derived-notes.ts), when such notes say all there is: its response's rules and event stream rules, if any, known at load. */
  readonly notesMade: NotesMade | undefined;
  /** How the edge reads a request's body for an action that needs it (verify-webhook), when some layer has one; undefined: bodies are not read. */
  readonly body: BodyReading | undefined;

  private constructor(
    /** The operator's layers, outermost (server-wide) first: they run before the tunnel's own on a connection and a request, after it on a response. */
    readonly operator: readonly Policy[],
    /** The tunnel's own (its agent's --policy-file). */
    readonly own: Policy | undefined,
    /** Its access flags' rules (AccessPolicy.flags): the first of the tunnel's own, before its policy file. */
    readonly flags: Policy | undefined,
    /** How the edge reads bodies, kept for the layers made again from these (withFlags). */
    readonly reading: BodyReading | undefined,
  ) {
    const tunnel = [flags, own].filter((p): p is Policy => p !== undefined);
    this.tunnel = tunnel;
    this.layers = [...operator, ...tunnel];
    this.responseLayers = [...tunnel, ...[...operator].reverse()];
    this.connect = this.layers.some((p) => p.has("on_tcp_connect"));
    this.request = this.layers.some((p) => p.has("on_http_request"));
    const events = this.layers.some((p) => p.has("on_event_stream_message"));
    this.response = events || this.layers.some((p) => p.has("on_http_response"));
    this.responseInHead = this.response && !events && onlyHeadActions(this.responseLayers);
    this.responseFields = this.responseInHead ? constantFields(this.responseLayers) : undefined;
    this.responseFieldBytes = this.responseFields ? Buffer.from(this.responseFields, "latin1") : undefined;
    this.responseBeyondFlags = this.layers.some((p) => p !== flags && (p.has("on_http_response") || p.has("on_event_stream_message")));
    this.body = reading && this.layers.some((p) => p.readsBody) ? reading : undefined;
    this.notesMade = own && (!this.response || responseKnownAtLoad(this.responseLayers)) ? notesMadeOf(own) : undefined;
  }

  /** The layers, or undefined when there are none. */
  static of(operator: readonly Policy[], own: Policy | undefined, flags?: Policy, reading?: BodyReading): TunnelPolicy | undefined {
    return operator.length === 0 && !own && !flags ? undefined : new TunnelPolicy(operator, own, flags, reading);
  }
}

/** The actions a response rule may have for its run to be made in the head (response-head-rules.ts): each runs at once and changes only fields. */
const HEAD_ACTIONS: ReadonlySet<string> = new Set(["add-headers", "remove-headers"]);

/** Whether every response rule of `layers` has only HEAD_ACTIONS. */
function onlyHeadActions(layers: readonly Policy[]): boolean {
  return layers.every((p) => p.rulesOf("on_http_response").every((r) => r.actions.every((a) => HEAD_ACTIONS.has(a.type) && !a.readsBody)));
}

/** The fields every response rule of `layers` adds, as text, when none has an expression and each adds only constant fields; else undefined. */
function constantFields(layers: readonly Policy[]): string | undefined {
  let text = "";
  for (const p of layers) {
    for (const r of p.rulesOf("on_http_response")) {
      if (r.expressions.length > 0) return undefined;
      for (const a of r.actions) {
        if (a.constantFields === undefined) return undefined;
        for (const [name, value] of a.constantFields) text += `${name}: ${value}\r\n`;
      }
    }
  }
  return text;
}

/**
 * Whether what the response's phases do is known at load, for every
 * layer: each response rule adds constant fields with no condition (so
 * none ends the run), and no event stream rule has a condition (its
 * sse-find-replace goes on; it only rewrites the events).
 */
function responseKnownAtLoad(layers: readonly Policy[]): boolean {
  return constantFields(layers) !== undefined && layers.every((p) => p.rulesOf("on_event_stream_message").every((r) => r.expressions.length === 0));
}

/** What a tunnel's layers are made of, as far as this file reads it (registry.ts Tunnel). */
interface Covered {
  policy?: TunnelPolicy;
  access?: { readonly flags: Policy | undefined };
}

/** A tunnel's layers made again with its access flags as they are now (its user's allow_cidrs changed), the others kept. */
export function withFlags(t: Covered): void {
  t.policy = TunnelPolicy.of(t.policy?.operator ?? [], t.policy?.own, t.access?.flags, t.policy?.reading);
}
