/**
 * The door of HTTP visitors (edge/judgement/pipeline.ts): a request on the
 * public port for a tunnel's name, an upgrade among them. Its name is the
 * Host made normal (host-route.ts), looked up here (and, after a restart or
 * with several nodes, waited for or asked of the others); it reaches http
 * tunnels (a tls tunnel's name gets the page saying where it is); its
 * request rules are the tunnel's policies (its access flags among them)
 * and the browser warning; it
 * forwards on an "h1" stream (forward.ts). A refusal is a page.
 */
import type { TrustedProxies } from "../http/addresses.ts";
import type { RequestHead } from "../http/request-head.ts";
import { targetAsWritten } from "../http/request-target.ts";
import type { EdgeCounters } from "../metrics/edge-counters.ts";
import { addressRefusedPage } from "./access/pages.ts";
import { forward, type ForwardContext } from "./forward.ts";
import type { HttpConnection } from "./http-connection.ts";
import { Refusal, type Door, type DoorName, type Visit } from "./judgement/pipeline.ts";
import { kindsThrough } from "./kinds/doors.ts";
import { badGatewayPage, tlsTunnelPage, unknownTunnelPage } from "./pages.ts";
import type { Registry, Tunnel } from "./registry.ts";
import { connectFacts, judgeConnect } from "./traffic-policy/connect.ts";
import { wallClockAt } from "./wall-clock.ts";
import { judgeRequest, requestFacts, serverPortOf, type PolicyPass } from "./traffic-policy/http-request.ts";
import type { LayeredRun } from "./traffic-policy/layered-run.ts";
import { bodyRefusal, readConnectionBody, type BodyReading, type ReadBody } from "./traffic-policy/request-body.ts";
import { replaceConnectionBody, replacedBody } from "./traffic-policy/replaced-body.ts";
import type { TunnelPolicy } from "./traffic-policy/tunnel-policy.ts";
import { continueResponse, CONTINUE_PATH, warningDue, warningFor, type HeadView } from "./warning.ts";

/**
 * For this long after the edge starts, a visitor of a name held for an agent
 * of the server before (restart-holds.ts) waits for it, at most
 * MAX_VISITOR_WAIT_MS: after a restart, agents told DRAIN are back within a
 * fraction of a second.
 */
const STARTUP_WAIT_MS = 5_000;
const MAX_VISITOR_WAIT_MS = 2_000;

/**
 * One visitor request on its way through the steps: the object the edge
 * makes for every request (the head as the warning and the access rules
 * read it), carrying what each step needs; no allocation more per request.
 */
export class HttpVisit implements Visit, HeadView {
  readonly method: string;
  /** The client's address (a trusted proxy's X-Forwarded-For read), set first thing. */
  client = "";
  /** The Host as the visitor wrote it, and the tunnel name it says: set once the name is read. */
  hostHeader = "";
  name = "";
  /** Another node's tunnel: the warning is due, shown there after its access rules. */
  warn = false;
  /** The tunnel's traffic policies let it through: their run, for forward (the request as they left it) and the response. */
  policy: LayeredRun | undefined;
  /**
   * Its body, read for a traffic policy action that needs it (request-body.ts): put back on the connection, or
   * swapped for the one the run made (replaced-body.ts). Declared, not a field: a visit whose body is not read
   * (nearly all) costs nothing for it.
   */
  declare bodyRead: ReadBody | undefined;

  constructor(
    readonly conn: HttpConnection,
    readonly head: RequestHead,
    /** The head's text, as it came; undefined: read from its bytes (HttpConnection.headText) when first asked. */
    private headText: string | undefined,
    /** When the request came (performance.now()), for its time to response head. */
    readonly startedAt: number,
  ) {
    this.method = head.method;
  }

  /** The head's text, as it came (without its blank line): made from its bytes only when a step reads it. */
  get text(): string {
    return (this.headText ??= this.conn.headText());
  }

  /** The visit goes on after the head's bytes are gone (a step waits): its text is made now. */
  keepText(): void {
    this.headText ??= this.conn.headText();
  }

  get(name: string): string | null {
    let found: string | null = null;
    const { names, fields } = this.head;
    for (let i = 0; i < names.length; i++) {
      if (names[i] !== name) continue;
      const v = fields[i]![1];
      found = found === null ? v : `${found}, ${v}`;
    }
    return found;
  }
}

export interface HttpDoorDeps {
  secure: boolean;
  registry: Registry;
  trustedProxies: TrustedProxies;
  responseTimeoutMs: number;
  maxResponseTimeoutMs: number;
  startedAt: number;
  heldAtStart: Set<string>;
  counters: EdgeCounters;
  tlsAddress?(subdomain: string): string | undefined;
  remote?(subdomain: string): Promise<Tunnel | Response | undefined>;
  poolOthers?(name: string): readonly Tunnel[];
  /** Gives a visit its answer (counted with its time). */
  answered(v: HttpVisit, res: Response): void;
}

/**
 * Its name, admission and request rules are the same for a request on an
 * HTTP/1.1 connection and for an HTTP/2 stream; how a visit is forwarded
 * and answered is the carrier's (h2/door.ts overrides forward and refuse).
 */
export class HttpDoor implements Door<HttpVisit> {
  /** A request meets its tunnel's IP flags in its flags layer (request()). */
  readonly addressInPolicy = true;
  /** The kinds whose visitors come through this door (their edge units say so). */
  private readonly reached: ReadonlySet<string>;

  constructor(
    protected readonly deps: HttpDoorDeps,
    readonly name: Extract<DoorName, "http" | "h2"> = "http",
  ) {
    this.reached = kindsThrough(name);
  }

  find(v: HttpVisit): Tunnel | Refusal | Promise<Tunnel | Refusal> {
    const { deps } = this;
    const tunnel = deps.registry.tunnelBySubdomain(v.name);
    // just after a restart, agents told DRAIN are on their way back: for a name held for one
    // of them, wait a moment for it rather than answer that its agent is away (the clock read only then)
    const startupLeft = tunnel !== undefined && !tunnel.agent ? deps.startedAt + STARTUP_WAIT_MS - Date.now() : 0;
    const waitForAgent = startupLeft > 0 && deps.heldAtStart.has(v.name);
    if (waitForAgent || (!tunnel && deps.remote)) return this.found(v, waitForAgent ? startupLeft : 0);
    return tunnel ? this.member(tunnel) : UNKNOWN_NAME;
  }

  /** The tunnel, once the wait for it is over: a held name's agent coming back, or another node's answer. */
  private async found(v: HttpVisit, startupLeft: number): Promise<Tunnel | Refusal> {
    const { deps } = this;
    let tunnel = startupLeft > 0 ? await deps.registry.whenSubdomain(v.name, Math.min(startupLeft, MAX_VISITOR_WAIT_MS)) : undefined;
    if (!tunnel && deps.remote) {
      // not here: perhaps on another node, which serves it through a relay link
      const elsewhere = await deps.remote(v.name);
      if (elsewhere instanceof Response) return new Refusal("name", "NODE_UNREACHABLE", undefined, elsewhere);
      tunnel = elsewhere;
    }
    return tunnel ? this.member(tunnel) : UNKNOWN_NAME;
  }

  /**
   * A pool's name: a member in rotation (edge/pool.ts), with that member's
   * rules; with several nodes, one of this node's or of the others' (relayed), in turn.
   */
  private member(named: Tunnel): Tunnel | Refusal {
    if (!named.pool) return named;
    return named.pool.pick(named.relayed ? undefined : this.deps.poolOthers?.((named.subdomain ?? named.hostname)!)) ?? NONE_TAKING;
  }

  reaches(t: Tunnel, v: HttpVisit): true | Refusal {
    if (this.reached.has(t.protocol)) return true;
    // a tls tunnel's name reached over plain HTTP (or decrypted here: no passthrough on this port)
    return new Refusal("admission", "WRONG_KIND", undefined, tlsTunnelPage(v.hostHeader, this.deps.tlsAddress?.(t.hostname ?? t.subdomain!)));
  }

  /** The tunnel's policies (its access flags among them: its flags layer), then the warning's continue link and the warning. */
  request(v: HttpVisit, t: Tunnel): undefined | Refusal | Promise<undefined | Refusal> {
    // another node's tunnel: its rules (access flags, policies) are applied there (cluster/relayed-doors.ts)
    if (t.policy && !t.relayed) return this.withPolicies(v, t, t.policy);
    return this.warning(v, t);
  }

  /**
   * The tunnel's traffic policies (traffic-policy/http-request.ts): the
   * operator's layers, then the tunnel's flags and its own policy; then
   * the warning. The head's fields are read when a rule first needs them.
   * At once unless something waits (a connection's first judgement, an
   * action that waits: a sign-in, a body to read).
   */
  private withPolicies(v: HttpVisit, t: Tunnel, policy: TunnelPolicy): undefined | Refusal | Promise<undefined | Refusal> {
    // on_tcp_connect: once a connection, with its first request to the tunnel (again when the tunnel's layers change)
    if (policy.connect && v.conn.policyConnected !== policy) return this.connectFirst(v, t, policy);
    return this.requestPolicies(v, t, policy);
  }

  private async connectFirst(v: HttpVisit, t: Tunnel, policy: TunnelPolicy): Promise<undefined | Refusal> {
    const { conn } = v;
    const secure = this.deps.secure;
    const host = v.hostHeader.replace(/:\d+$/, "");
    const closed = await judgeConnect(policy, connectFacts(t, { client: v.client, clientPort: conn.peer.port, serverPort: serverPortOf(conn), ends: conn, host, protocol: secure ? "https" : "http", openedAt: conn.openedAt }));
    if (closed) return closed;
    conn.policyConnected = policy;
    return this.requestPolicies(v, t, policy);
  }

  private requestPolicies(v: HttpVisit, t: Tunnel, policy: TunnelPolicy): undefined | Refusal | Promise<undefined | Refusal> {
    if (!policy.request && !policy.response) return this.warning(v, t);
    const { conn, head } = v;
    const secure = this.deps.secure;
    // the rest of the head's fields are read when a rule first needs them
    const facts = requestFacts(t, {
      client: v.client,
      clientPort: conn.peer.port,
      serverPort: serverPortOf(conn),
      ends: conn,
      openedAt: conn.openedAt,
      secure,
      host: v.hostHeader,
      head,
      // a head whose every field was read needs no text; another's is made only when a rule reads a field beyond those read
      text: head.whole ? undefined : v,
      rawTarget: head.targetAsSent ? undefined : targetAsWritten(v.text, head.method),
      version: this.name === "h2" ? "HTTP/2.0" : undefined,
      receivedAt: wallClockAt(v.startedAt),
    });
    // an action that reads the body (verify-webhook): the body is read when the run comes to it
    const reading = policy.body;
    const body = reading ? { reading, read: () => this.readBody(v, t, head, reading) } : undefined;
    const judged = judgeRequest(policy, facts, t, body);
    if (judged instanceof Promise) return judged.then((j) => this.policiesJudged(v, t, j));
    return this.policiesJudged(v, t, judged);
  }

  private policiesJudged(v: HttpVisit, t: Tunnel, judged: PolicyPass | Refusal): undefined | Refusal {
    if (judged instanceof Refusal) return judged;
    v.policy = judged.run;
    // a response's run (not one known at load) may read the request's fields after this turn, when the head's bytes are gone
    if (t.policy?.response && t.policy.responseFields === undefined) v.keepText();
    return this.warning(v, t);
  }

  /** The request's body for the actions that read it (request-body.ts); on an HTTP/1.1 connection, its bytes go back to it for forward(). */
  protected async readBody(v: HttpVisit, _t: Tunnel, head: RequestHead, reading: BodyReading): Promise<ReadBody | Refusal> {
    const read = await readConnectionBody(v.conn, head, reading);
    if (!(typeof read === "object" && "raw" in read)) return bodyRefusal(read);
    v.bodyRead = read;
    return read;
  }

  /** Let through the policies (the tunnel's flags among them): the warning's continue link, the warning, or on. */
  private warning(v: HttpVisit, t: Tunnel): undefined | Refusal {
    const { head, hostHeader } = v;
    const target = head.target;
    if (head.method === "GET" && target.startsWith(CONTINUE_PATH) && (target.length === CONTINUE_PATH.length || target[CONTINUE_PATH.length] === "?")) {
      return new Refusal("access", "WARNING", undefined, continueResponse(this.requestUrl(hostHeader, target), this.deps.secure));
    }
    v.warn = warningDue(v, t);
    // another node's tunnel: its access rules are applied there, so the warning is shown there too, after them
    if (v.warn && !t.relayed) return new Refusal("access", "WARNING", undefined, warningFor(hostHeader, t.username, target));
    return undefined;
  }

  private requestUrl(hostHeader: string, target: string): URL {
    return new URL(`${this.deps.secure ? "https" : "http"}://${hostHeader}${target === "*" ? "/" : target}`);
  }

  /** `judgedWith`: the layers its judgement began with, which a switch's pipe is registered with (forward.ts). */
  forward(v: HttpVisit, t: Tunnel, judgedWith: TunnelPolicy | undefined): void {
    if (v.conn.closedAlready) return;
    // request-body-find-replace rewrote the body: the new one goes in place of the one read
    const replaced = replacedBody(v.policy);
    if (replaced && v.bodyRead) replaceConnectionBody(v.conn, v.head, v.bodyRead, replaced);
    const ctx = this.context(v);
    if (v.head.upgrade !== undefined) ctx.switchJudgedWith = judgedWith;
    forward(v.conn, v.head, v, t, ctx);
  }

  /** What forwarding `v` needs to know of it and of the edge. */
  protected context(v: HttpVisit): ForwardContext {
    const { conn } = v;
    const { deps } = this;
    return {
      remoteIp: conn.peer.address,
      remotePort: conn.peer.port,
      client: v.client,
      secure: deps.secure,
      host: v.hostHeader,
      trustedProxies: deps.trustedProxies,
      responseTimeoutMs: deps.responseTimeoutMs,
      maxResponseTimeoutMs: deps.maxResponseTimeoutMs,
      warn: v.warn,
      counters: deps.counters,
      startedAt: v.startedAt,
      policy: v.policy,
    };
  }

  refuse(v: HttpVisit, r: Refusal): void {
    if (v.conn.closedAlready) return;
    // a traffic policy closed the connection (on_tcp_connect): no answer
    if (r.code === "POLICY" && !r.answer) return v.conn.terminate();
    this.deps.answered(v, r.answer ?? this.page(v, r));
  }

  /** The page of a refusal that brings none of its own. */
  protected page(v: HttpVisit, r: Refusal): Response {
    switch (r.code) {
      case "ADDRESS_REFUSED":
        return addressRefusedPage(v.hostHeader, v.client);
      case "NONE_TAKING":
        return badGatewayPage(v.hostHeader, "none of its agents is taking requests now");
      default:
        return unknownTunnelPage(v.hostHeader);
    }
  }
}

const UNKNOWN_NAME = new Refusal("name", "UNKNOWN_NAME");
const NONE_TAKING = new Refusal("name", "NONE_TAKING");
