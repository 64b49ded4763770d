/**
 * The edge's one judgement. Every visit — an HTTP request on any
 * connection (an upgrade among them), a tcp or tls connection, a udp
 * datagram, a connector's stream to a private tunnel, a stream relayed
 * from another node — passes the same four steps, in this order, here:
 *
 *   1. name       the tunnel the visit names, as its door reads names (a
 *                 Host made normal, a TLS server name, a public port, a
 *                 private tunnel's owner/name, a relayed row), a pool's
 *                 member in turn: the door's find();
 *   2. admission  against the current state: a connector's standing
 *                 (token, user, share) as the rules say now
 *                 (edge/live-rules.ts), and the tunnel is of a kind this
 *                 door reaches;
 *   3. access     the tunnel's rules: IP rules on the address the door
 *                 judged, for every door (for a request or a connection,
 *                 as the first rule of its flags layer, run with its
 *                 traffic policies); then, where the visit carries a
 *                 request, its sign-in rules and the browser warning;
 *   4. forward    the door hands the visit to a stream to the agent.
 *
 * A door (an entry path: DoorName lists them) says how it names
 * a tunnel, which kinds it reaches, how it forwards, and how a refusal is
 * answered in its medium (a page, a reset stream, a closed socket, a
 * dropped datagram). It never re-implements a step: a new entry path
 * (an HTTP/2 stream, h2/door.ts; an SSH channel, ssh/reaches.ts) is one more door.
 *
 * A tunnel of another node (`relayed`) has its rules applied where they
 * live, by the relayed doors of that node (cluster/relay.ts): here, its
 * access step is skipped, and its door asks only what this node knows (the
 * kind; a connector's own standing).
 *
 * What is live is judged again by the same rules when an admin narrows
 * them (edge/live-rules.ts), and every visit after the change meets the
 * registry as it is then. A visit whose access step waits (an action that
 * fetches, a body to read) was judged by the tunnel's layers as they were
 * when the step began: forward is handed those layers (the tunnel's
 * `policy` then, a version of its rules), so that where the visit comes to
 * stay it is judged again when they changed meanwhile (a change's
 * re-judgement did not see it: traffic-policy/live-rejudge.ts judgedSince).
 *
 * The usual visit passes without a promise or an allocation of its own:
 * each step returns at once unless it must wait (another node, a sign-in,
 * a connector's standing not known yet).
 */
import type { Tunnel } from "../registry.ts";

/** The steps, in their order. */
export const STEPS = ["name", "admission", "access", "forward"] as const;
export type Step = (typeof STEPS)[number];

/** The entry paths; each is one door (docs/architecture.md names each one's file). */
export type DoorName = "http" | "h2" | "tcp" | "tls" | "udp" | "private" | "ssh" | "relayed-http" | "relayed-tls" | "relayed-private";

/**
 * Why a visit goes no further: the step that refused it, a stable code,
 * and, where the step has one, the answer the visitor gets as it is (a
 * sign-in page, a redirect, the warning).
 */
export class Refusal {
  constructor(
    readonly step: Step,
    readonly code: RefusalCode | string,
    readonly message?: string,
    readonly answer?: Response,
  ) {}
}

/**
 * The pipeline's own codes. A connector's standing refuses with the
 * admission rules' codes (core/errors.ts: TOKEN_REVOKED, NOT_SHARED...).
 */
export type RefusalCode =
  /** name: no tunnel has it (here, or on another node). */
  | "UNKNOWN_NAME"
  /** name: a pool with none of its members taking visitors now. */
  | "NONE_TAKING"
  /** name: the node that has it cannot be reached (its answer is a page). */
  | "NODE_UNREACHABLE"
  /** admission: the tunnel is of a kind this door does not reach (a tls tunnel's name over plain HTTP, a tcp stream to a udp tunnel). */
  | "WRONG_KIND"
  /** admission: a connector the private tunnel is not shared with. */
  | "NOT_SHARED"
  /** access: the tunnel's IP rules refuse the address. */
  | "ADDRESS_REFUSED"
  /** access: a request the sign-in rules cannot read (its fields do not make a request). */
  | "BAD_REQUEST"
  /** access: the tunnel's sign-in rules answered instead (401, a sign-in redirect, too many guesses). */
  | "SIGN_IN"
  /** access: the browser warning is due first. */
  | "WARNING"
  /** access: a traffic policy answered instead (deny, a custom response, a redirect, a rate limit, a failed sign-in), or closed the connection. */
  | "POLICY";

/** What every visit carries into the steps. */
export interface Visit {
  /** The address the IP rules judge: canonical; behind a trusted proxy, the client it names. */
  readonly client: string;
  /** A connector's stream to a private tunnel: who connects (admission asks their standing). */
  readonly connector?: Connector;
}

export interface Connector {
  userId: number;
  tokenId?: number;
  username: string;
}

/** What a step returns: go on (the value), stop (a Refusal), or wait. */
type Outcome<T> = T | Refusal | Promise<T | Refusal>;

/** One entry path's part in the steps. */
export interface Door<V extends Visit> {
  readonly name: DoorName;
  /** Step 1: the tunnel the visit names, or why none. */
  find(v: V): Outcome<Tunnel>;
  /** Step 2: whether a tunnel of this kind is reached through this door (a Refusal "WRONG_KIND" when not). */
  reaches(t: Tunnel, v: V): true | Refusal;
  /**
   * Its visits meet the tunnel's IP rules in the tunnel's flags layer
   * (access/flag-layer.ts), run with its policies in step 3 (a request's
   * or a connection's): the access step does not ask them first.
   */
  readonly addressInPolicy?: boolean;
  /** Step 2, first: a connector's standing as the rules say now, and a share (private doors): undefined, or the refusal. */
  standing?(t: Tunnel, v: V): Outcome<undefined>;
  /** Step 3, after the IP rules, for a door whose visits carry a request: the tunnel's policies (sign-in among them) and the warning. */
  request?(v: V, t: Tunnel): Outcome<undefined>;
  /**
   * Step 4. `judgedWith`: the tunnel's layers (Tunnel.policy) when its
   * access step began, which a visit that comes to stay is registered with
   * (live-rejudge.ts judgedSince: judged again when they are not the
   * tunnel's any more).
   */
  forward(v: V, t: Tunnel, judgedWith: Tunnel["policy"]): void;
  /** A refusal at any step, answered in the door's medium. */
  refuse(v: V, r: Refusal): void;
}

/** Sees each step a visit passes (tests of the order; a debugging aid). */
export type Tracer = (door: DoorName, step: Step, outcome: "passed" | Refusal) => void;
let tracer: Tracer | undefined;

/** Follows every visit's steps from now on (undefined: stops). */
export function traceJudgement(t: Tracer | undefined): void {
  tracer = t;
}

/** Judges `v` at `door`, step by step; the door forwards it or answers the refusal. */
export function judge<V extends Visit>(door: Door<V>, v: V): void | Promise<void> {
  const found = door.find(v);
  if (found instanceof Promise) return found.then((f) => afterName(door, v, f));
  return afterName(door, v, found);
}

function afterName<V extends Visit>(door: Door<V>, v: V, found: Tunnel | Refusal): void | Promise<void> {
  if (isRefusal(found)) return refused(door, v, found);
  tracer?.(door.name, "name", "passed");
  return admission(door, v, found);
}

/**
 * Step 2: a connector's standing first (who they are now: nothing of the
 * tunnel is told to one who may not reach it), then the kind.
 */
function admission<V extends Visit>(door: Door<V>, v: V, t: Tunnel): void | Promise<void> {
  if (door.standing) {
    const standing = door.standing(t, v);
    if (standing instanceof Promise) return standing.then((s) => (s === undefined ? ofKind(door, v, t) : refused(door, v, s)));
    if (standing !== undefined) return refused(door, v, standing);
  }
  return ofKind(door, v, t);
}

function ofKind<V extends Visit>(door: Door<V>, v: V, t: Tunnel): void | Promise<void> {
  const kind = door.reaches(t, v);
  if (kind !== true) return refused(door, v, kind);
  tracer?.(door.name, "admission", "passed");
  return access(door, v, t);
}

/**
 * Step 3. A relayed tunnel's rules are applied on its own node. The IP
 * rules are asked here unless the door's visits meet them in the tunnel's
 * flags layer (and the tunnel has it).
 */
function access<V extends Visit>(door: Door<V>, v: V, t: Tunnel): void | Promise<void> {
  // the layers this judgement reads, for forward: they may change while a step waits
  const layers = t.policy;
  const rules = t.relayed ? undefined : t.access;
  if (rules && !(door.addressInPolicy && rules.flags !== undefined && layers?.flags === rules.flags) && rules.refusesAddress(v.client)) return refused(door, v, ADDRESS_REFUSED);
  if (!door.request) return forward(door, v, t, layers);
  const judged = door.request(v, t);
  if (judged instanceof Promise) return judged.then((p) => (isRefusal(p) ? refused(door, v, p) : forward(door, v, t, layers)));
  if (isRefusal(judged)) return refused(door, v, judged);
  return forward(door, v, t, layers);
}

/** Step 4. */
function forward<V extends Visit>(door: Door<V>, v: V, t: Tunnel, judgedWith: Tunnel["policy"]): void {
  if (tracer) {
    tracer(door.name, "access", "passed");
    tracer(door.name, "forward", "passed");
  }
  door.forward(v, t, judgedWith);
}

function refused<V extends Visit>(door: Door<V>, v: V, r: Refusal): void {
  tracer?.(door.name, r.step, r);
  door.refuse(v, r);
}

function isRefusal(x: unknown): x is Refusal {
  return x instanceof Refusal;
}

/** The one refusal of the IP rules (its answer is the door's: a page, a closed socket). */
const ADDRESS_REFUSED = new Refusal("access", "ADDRESS_REFUSED");
