/**
 * What a tunnel carries already, judged again when its traffic policies
 * change: an operator's policy made, changed, deleted or re-scoped, on this
 * node or heard from another (edge-policies.ts setOperator). Each visit
 * that stays once let through (judgement/live-visits.ts: a tcp or tls
 * connection, a WebSocket's pipe, a stream relayed from another node) is
 * run through the new layers as a new visit with its facts would be:
 * on_tcp_connect with its connection's (the client's address and port,
 * the port it reached, the host, when it opened) and, for a pipe or a
 * relayed request, on_http_request with the head it was let through with.
 * One the layers refuse now (a deny, an IP rule, a redirect, a failed
 * sign-in: any verdict but going on) ends as its tunnel's IP rules end it:
 * the connection closed, the pipe cut, the relayed stream reset.
 *
 * A re-judgement answers no one and costs the visitor nothing it paid
 * already: its run's input says so (PolicyInput.rejudging), and a
 * rate-limit passes without counting (the visit was counted when it came;
 * a limit bounds what comes, not what is open), basic-auth compares what
 * the request carries without counting a guess, openid-connect checks the
 * session the request carries without starting or finishing a sign-in;
 * `log` actions write nothing (they wrote when it came), and the agent's
 * inspector is told nothing. A tunnel's own policy is fixed for its life
 * (a new one comes with a new tunnel: a handshake, an agent's live ADD),
 * so only the operator's layers change under what is open.
 *
 * Bounded: the visits are judged BATCH at a time, each batch in a
 * macrotask of its own after the one before has finished (its waiting
 * actions included), so 10,000 open connections never hold the event loop
 * for long and no more than BATCH judgements wait at once. A change that
 * comes while a tunnel is being judged starts it again once that ends,
 * with its layers as they are then.
 */
import { targetAsWritten } from "../../http/request-target.ts";
import { log } from "../../log.ts";
import type { Outcome, Policy, PolicyInput } from "../../policy/index.ts";
import { WorkingRequest } from "../../policy/message.ts";
import type { RunState } from "../../policy/policy.ts";
import type { Phase } from "../../policy/variables.ts";
import type { LiveVisit } from "../judgement/live-visits.ts";
import type { Tunnel } from "../registry.ts";
import { connectFacts, type ConnectionSubject } from "./connect.ts";
import { requestFacts, type RequestSubject } from "./http-request.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";

/** What a live visit is judged by: its connection, and the request of a pipe or of a relayed stream. */
export interface PolicySubject {
  connect: ConnectionSubject;
  request?: RequestSubject;
}

/** Visits judged in one macrotask, and judgements waiting at most at once. */
export const BATCH = 256;

/** The tunnels being judged again: a change meanwhile sets `again`. */
const judging = new WeakMap<Tunnel, { again: boolean }>();

/**
 * `t`'s layers changed from `before`: what it carries is judged again by
 * them, unless its operator's layers are the same ones (their own
 * compiled policies, in the same order) as before.
 */
export function policiesChanged(t: Tunnel, before: TunnelPolicy | undefined): void {
  if (t.relayed || !t.liveVisits || t.liveVisits.size === 0) return;
  if (sameLayers(before?.operator ?? NONE, t.policy?.operator ?? NONE)) return;
  rejudgeLive(t);
}

/**
 * `v` was just kept with `t` (judgement/live-visits.ts stays), judged by
 * `judgedWith`, the tunnel's layers when its judgement began (the
 * judgement hands them to every door's forward: judgement/pipeline.ts).
 * When they changed since (an operator's policy, or its flags: while an
 * action of its judgement waited, or its upgrade waited for its 101), the
 * re-judgement of that change did not see it, so it is judged now by the
 * layers as they are, and ended when they refuse it. The one check every
 * door's staying visit passes: a tcp or tls connection (tcp.ts), a
 * WebSocket's pipe (forward.ts), a stream relayed from another node, a
 * request's or a tls connection's (cluster/relay.ts).
 */
export function judgedSince(t: Tunnel, v: LiveVisit, judgedWith: TunnelPolicy | undefined): void {
  if (t.relayed || judgedWith === t.policy) return;
  if (sameLayers(judgedWith?.operator ?? NONE, t.policy?.operator ?? NONE) && judgedWith?.flags === t.policy?.flags) return;
  const policy = t.policy;
  const subject = v.judgedBy?.() as PolicySubject | undefined;
  if (!policy || !subject || v.over) return;
  const passes = stillPasses(policy, t, subject);
  if (passes instanceof Promise) void passes.then((ok) => void (ok || end(t, v)), () => void end(t, v));
  else if (!passes) end(t, v);
}

const NONE: readonly Policy[] = [];

function sameLayers(a: readonly Policy[], b: readonly Policy[]): boolean {
  return a === b || (a.length === b.length && a.every((p, i) => p === b[i]));
}

/** Judges what `t` carries by its layers now (see the top); one run at a time a tunnel. */
export function rejudgeLive(t: Tunnel): Promise<void> {
  const running = judging.get(t);
  if (running) {
    running.again = true;
    return Promise.resolve();
  }
  const state = { again: false };
  judging.set(t, state);
  return judgeAll(t, state)
    .catch((err) => log.warn("live visits not judged again after a traffic policy change", { err: String(err) }))
    .finally(() => judging.delete(t));
}

async function judgeAll(t: Tunnel, state: { again: boolean }): Promise<void> {
  do {
    state.again = false;
    const visits = t.liveVisits?.list() ?? [];
    let ended = 0;
    for (let i = 0; i < visits.length; i += BATCH) {
      if (i > 0) await nextMacrotask();
      // its layers as they are for this batch: nothing refuses once none judges connections or requests
      const policy = t.policy;
      if (!policy || (!policy.connect && !policy.request)) break;
      const waits: Promise<void>[] = [];
      for (let j = i; j < visits.length && j < i + BATCH; j++) {
        const v = visits[j]!;
        if (v.over) continue;
        // made by this file's makers (pipeSubject, and the doors' with its type): the judgement holds it unread
        const subject = v.judgedBy?.() as PolicySubject | undefined;
        if (!subject) continue;
        const passes = stillPasses(policy, t, subject);
        if (passes instanceof Promise) {
          // one that cannot be judged is not let stay (the policies fail closed)
          waits.push(passes.then((ok) => void (ok || (ended += end(t, v))), () => void (ended += end(t, v))));
        } else if (!passes) ended += end(t, v);
      }
      if (waits.length > 0) await Promise.all(waits);
    }
    if (ended > 0) log.info("live visits ended by a traffic policy change", { tunnel: t.subdomain ?? t.hostname ?? t.port, ended });
  } while (state.again);
}

function end(t: Tunnel, v: LiveVisit): number {
  t.liveVisits?.delete(v);
  if (v.over) return 0;
  v.end();
  return 1;
}

const nextMacrotask = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** Whether the layers let the visit through now: its connection, then its request. */
export function stillPasses(policy: TunnelPolicy, t: Tunnel, s: PolicySubject): boolean | Promise<boolean> {
  if (policy.connect) {
    const connected = quietRun("on_tcp_connect", policy.layers, { ...connectFacts(t, s.connect), rejudging: true });
    if (connected instanceof Promise) return connected.then((ok) => ok && requestPasses(policy, t, s));
    if (!connected) return false;
  }
  return requestPasses(policy, t, s);
}

function requestPasses(policy: TunnelPolicy, t: Tunnel, s: PolicySubject): boolean | Promise<boolean> {
  if (!s.request || !policy.request) return true;
  const f = requestFacts(t, s.request);
  // the request's facts as a new request's, but marked: its actions count nothing and answer no one
  return quietRun("on_http_request", policy.layers, { conn: f.conn, endpoint: f.endpoint, tunnel: f.tunnel, request: f.request, now: f.now, rejudging: true });
}

/**
 * `phase` through `layers` in order (as LayeredRun runs them, the request
 * and who the visitor is carried from one layer to the next), but quiet:
 * nothing is logged or told. Whether every layer let it go on.
 */
function quietRun(phase: Phase, layers: readonly Policy[], input: PolicyInput): boolean | Promise<boolean> {
  const now = input.now ?? Date.now();
  const run: PolicyInput = input.now === undefined ? { ...input, now } : input;
  const state: RunState = { request: run.request ? new WorkingRequest(run.request, now) : undefined, identity: undefined };
  const took = (out: Outcome): boolean => {
    state.identity ??= out.identity;
    return out.verdict.kind === "continue";
  };
  const from = (first: number): boolean | Promise<boolean> => {
    for (let i = first; i < layers.length; i++) {
      const layer = layers[i]!;
      if (!layer.has(phase)) continue;
      const out = layer.runFrom(phase, run, state);
      if (out instanceof Promise) return out.then((o) => took(o) && from(i + 1));
      if (!took(out)) return false;
    }
    return true;
  };
  return from(0);
}

/** A WebSocket's pipe on an HTTP/1.1 connection: what it was let through with (forward.ts), its request's subject but for the text. */
export interface PipeFacts extends Pick<RequestSubject, "client" | "clientPort" | "serverPort" | "ends" | "openedAt" | "secure" | "host" | "head"> {
  /** The head's text as it came (its fields read from it when a rule needs them): always given, undefined when there is none. */
  text: string | undefined;
}

/** A pipe's subject: its connection as the HTTP door judged it (http-door.ts), and its request. */
export function pipeSubject(p: PipeFacts): PolicySubject {
  const connect: ConnectionSubject = { client: p.client, clientPort: p.clientPort, serverPort: p.serverPort, ends: p.ends, host: p.host.replace(/:\d+$/, ""), protocol: p.secure ? "https" : "http", openedAt: p.openedAt };
  if (p.text === undefined) return { connect };
  const rawTarget = p.head.targetAsSent ? undefined : targetAsWritten(p.text, p.head.method);
  return { connect, request: { client: p.client, clientPort: p.clientPort, serverPort: p.serverPort, ends: p.ends, openedAt: p.openedAt, secure: p.secure, host: p.host, head: p.head, text: p.text, rawTarget } };
}
