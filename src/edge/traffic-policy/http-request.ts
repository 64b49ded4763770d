/**
 * on_http_request in the judgement's access step (judgement/pipeline.ts),
 * for the doors whose visits carry a request (the HTTP door, and a
 * request relayed from another node, where the tunnel's rules live): the
 * operator's layers first, then the tunnel's sign-in flags (basic auth,
 * OIDC), then the tunnel's own policy. The first layer that answers ends
 * it: its answer is the refusal's (POLICY); what the tunnel's own policy
 * says never runs for a request an operator's rule refused. What passes
 * carries the run on (LayeredRun): the request as the actions left it is
 * what forward sends the agent, and the response's run follows from it.
 */
import type { PolicyInput } from "../../policy/index.ts";
import { USER_EMAIL_HEADER } from "../../validate/access.ts";
import type { RequestHead } from "../../http/request-head.ts";
import type { Passed } from "../access/policy.ts";
import { Refusal } from "../judgement/pipeline.ts";
import type { Tunnel } from "../registry.ts";
import { LayeredRun, matchedNames, policyAnswer } from "./layered-run.ts";
import { tellRefusal } from "./policy-notes.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";

/** What a door knows of a request and its connection, for the facts of a run. */
export interface RequestSubject {
  /** The visitor's canonical address (behind a trusted proxy, the client it names), and its source port. */
  client: string;
  clientPort: number;
  /** The port the visitor reached. */
  serverPort: number;
  /** When its connection opened (ms since the epoch). */
  openedAt: number;
  secure: boolean;
  /** The Host as sent (an absolute-form target's authority). */
  host: string;
  /** Every field read (http/request-head.ts everyField). */
  head: RequestHead;
  /** The target as the visitor wrote it, when it differs from the head's normal one. */
  rawTarget?: string;
}

/** The facts of one request's run. */
export function requestFacts(t: Tunnel, s: RequestSubject): PolicyInput {
  const scheme = s.secure ? "https" : "http";
  const now = Date.now();
  const colon = s.host.lastIndexOf(":");
  const bracket = s.host.lastIndexOf("]");
  const hasPort = colon > bracket && /^\d{1,5}$/.test(s.host.slice(colon + 1));
  return {
    conn: { clientIp: s.client, clientPort: s.clientPort, serverPort: s.serverPort, openedAt: s.openedAt },
    endpoint: {
      host: hasPort ? s.host.slice(0, colon) : s.host,
      port: hasPort ? Number(s.host.slice(colon + 1)) : s.secure ? 443 : 80,
      protocol: scheme,
      url: `${scheme}://${s.host}`,
    },
    tunnel: tunnelFacts(t),
    request: {
      method: s.head.method,
      target: s.head.target === "*" ? "/" : s.head.target,
      ...(s.rawTarget !== undefined ? { rawTarget: s.rawTarget } : {}),
      scheme,
      host: s.host,
      version: `1.${s.head.minor}`,
      // the identity field is the edge's to say (an openid-connect action's): one a visitor sent is not read, nor sent on
      headers: s.head.names.includes(USER_EMAIL_HEADER) ? s.head.fields.filter(([n]) => n.toLowerCase() !== USER_EMAIL_HEADER) : s.head.fields,
      receivedAt: now,
    },
    now,
  };
}

/** The tunnel as `tunnel.*` and `user.*` read it. */
export function tunnelFacts(t: Tunnel): PolicyInput["tunnel"] {
  return { name: t.subdomain ?? t.hostname ?? (t.port !== undefined ? String(t.port) : ""), kind: t.protocol, user: t.username };
}

/** A request let through the policies: its run (for forward and the response), and who the sign-in flags let in. */
export interface PolicyPass {
  run: LayeredRun;
  passed: Passed | undefined;
}

/** The sign-in flags' part between the layers: who passed, or their answer (401, a sign-in redirect). */
export type SignIn = () => Passed | Response | Promise<Passed | Response>;

/**
 * The operator's layers, the sign-in flags (`signIn`, when the tunnel has
 * them), the tunnel's own policy: the request's pass, or the refusal that
 * answers it (POLICY, SIGN_IN).
 */
export async function judgeRequest(policy: TunnelPolicy, facts: PolicyInput, signIn: SignIn | undefined, tunnel?: Tunnel): Promise<PolicyPass | Refusal> {
  const run = new LayeredRun(facts);
  const operator = await run.through("on_http_request", policy.operator);
  if (operator.kind !== "continue") return refusalOf(operator, run, "server", tunnel);
  let passed: Passed | undefined;
  if (signIn) {
    const signedIn = await signIn();
    if (signedIn instanceof Response) return new Refusal("access", "SIGN_IN", undefined, signedIn);
    passed = signedIn;
    // who the tunnel's own sign-in let in is its policy's visitor.identity
    if (passed.email !== undefined) run.state.identity ??= passed.email;
  }
  if (policy.own && policy.own.has("on_http_request")) {
    const own = await run.through("on_http_request", [policy.own]);
    if (own.kind !== "continue") return refusalOf(own, run, "tunnel", tunnel);
    run.ownMatched = matchedNames(run.runs[run.runs.length - 1]!);
  }
  return { run, passed };
}

/** The refusal a layer's verdict is; the tunnel's agent told of it for its inspector (policy-notes.ts). */
function refusalOf(verdict: Exclude<Awaited<ReturnType<LayeredRun["through"]>>, { kind: "continue" }>, run: LayeredRun, by: "tunnel" | "server", tunnel: Tunnel | undefined): Refusal {
  // on_http_request has no connection to close: a run that would (past its cost) answered 500 already
  const answer = verdict.kind === "close" ? { status: 500, headers: [], body: "" } : verdict.response;
  if (tunnel?.agent?.notePolicy) tellRefusal(tunnel, run, verdict, answer.status, by, by === "tunnel" ? run.runs[run.runs.length - 1] : undefined);
  return new Refusal("access", "POLICY", `rule ${verdict.rule}, ${verdict.action}`, policyAnswer(answer));
}
