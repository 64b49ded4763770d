/**
 * on_http_request in the judgement's access step (judgement/pipeline.ts),
 * for the doors whose visits carry a request (the HTTP door, and a
 * request relayed from another node, where the tunnel's rules live): the
 * operator's layers first, then the tunnel's own: its flags layer (its
 * access flags as rules: IP rules, basic auth, the OIDC sign-in, header
 * rules) and its policy file. The first layer that answers ends it: its
 * answer is the refusal's (POLICY, or the flags' own codes); what the
 * tunnel's layers say never runs for a request an operator's rule
 * refused. What passes carries the run on (LayeredRun): the request as
 * the actions left it is what forward sends the agent, and the response's
 * run follows from it.
 */
import { BODY_UNREAD, RATE_LIMITED, type ConnectionFacts, type EndpointFacts, type PolicyInput, type RequestFacts, type TunnelFacts, type Verdict } from "../../policy/index.ts";
import type { HeaderPairs, TlsFacts } from "../../policy/facts.ts";
import { USER_EMAIL_HEADER } from "../../validate/access.ts";
import { everyField, type RequestHead } from "../../http/request-head.ts";
import { canonicalAddress } from "../../http/addresses.ts";
import type { ClientHello } from "../../tls/client-hello.ts";
import { ja4 } from "../../tls/ja4.ts";
import { Refusal } from "../judgement/pipeline.ts";
import type { Tunnel } from "../registry.ts";
import { LayeredRun, matchedNames, policyAnswer } from "./layered-run.ts";
import { CLOSED_STATUS, PolicyClosed } from "./policy-closed.ts";
import { tellRefusal } from "./policy-notes.ts";
import { withBody, type BodySource } from "./request-body.ts";
import { nodeRegion } from "./node-region.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";

/** What a door knows of a request and its connection, for the facts of a run. */
export interface RequestSubject {
  /** The visitor's canonical address (behind a trusted proxy, the client it names), and its source port. */
  client: string;
  clientPort: number;
  /** The port the visitor reached. */
  serverPort: number;
  /** The visitor's connection as the edge holds it, read only when a rule asks (`conn.server_ip`, `conn.tls.*`); absent where it is not known here. */
  ends?: ConnectionEnds;
  /** When its connection opened (ms since the epoch). */
  openedAt: number;
  /** The region of the node the visitor came in at, when it is not this node's (a request relayed from another node). */
  region?: string;
  secure: boolean;
  /** The Host as sent (an absolute-form target's authority). */
  host: string;
  /** The head, with every field read (http/request-head.ts everyField), or with some and its `text`. */
  head: RequestHead;
  /**
   * The head's text, when `head` may hold only some of its fields: the rest
   * are read from it when a rule first needs them. Or where it is read
   * from (the visit, whose text is decoded from the head's bytes only when
   * asked): most runs read no field beyond the head's own, and a request
   * then costs no text.
   */
  text?: string | { readonly text: string };
  /** The target as the visitor wrote it, when it differs from the head's normal one. */
  rawTarget?: string;
  /** The HTTP version, as ngrok writes it, when it is not the head's own: an HTTP/2 stream's `HTTP/2.0`. */
  version?: string;
  /** When the head came, in ms since the epoch, when the door knows it (wall-clock.ts): the run's clock, not a read of its own. */
  receivedAt?: number;
}

/** A connection's end at the server: a socket, whose local address Bun looks up only when it is read. */
export interface ServerEnd {
  readonly localAddress?: string;
  readonly localPort?: number;
}

/** What a TLS socket says of its handshake (Bun's Socket; a plain one answers null). */
export interface TlsEnd {
  getTLSVersion?(): string | null;
  getCipher?(): { standardName?: string; name?: string } | null | undefined;
  getServername?(): string | null | undefined;
  /** The protocol ALPN chose: null before the handshake, false when none was. */
  readonly alpnProtocol?: string | false | null;
  isSessionReused?(): boolean;
}

/**
 * A visitor's connection as a door holds it (edge/http-connection.ts): the
 * socket it reads, and, when TLS was terminated behind the public port
 * (sockets/tls-front.ts), the public socket the connection came in on,
 * whose local end is the one the visitor reached.
 */
export interface ConnectionEnds {
  readonly socket: ServerEnd & TlsEnd;
  /** The bytes that came from the visitor, and went to it, on this connection so far (`conn.bytes_in`, `conn.bytes_out`): counted where the edge reads and writes them. */
  readonly bytesIn?: number;
  readonly bytesOut?: number;
  /** The visitor, and where it reached the public port when that is not `socket`'s local end (sockets/tls-visit.ts); its ClientHello, when the front read it. */
  readonly peer?: ServerEnd & { readonly hello?: ClientHello };
}

/** Where the visitor's connection came in: the public socket's end. */
function publicEnd(ends: ConnectionEnds | undefined): ServerEnd | undefined {
  return ends?.peer?.localPort !== undefined ? ends.peer : ends?.socket;
}

/** `conn.server_ip`: the address the visitor connected to, in canonical text (an IPv4-mapped one as IPv4), or undefined when not known. */
export function serverIpOf(ends: ConnectionEnds | undefined): string | undefined {
  const address = publicEnd(ends)?.localAddress;
  return address ? canonicalAddress(address) : undefined;
}

/** `conn.server_port`: the port the visitor connected to (not the internal one TLS was terminated on). */
export function serverPortOf(ends: ConnectionEnds): number {
  return publicEnd(ends)?.localPort ?? 0;
}

/** `conn.tls.*`: the handshake the socket holds, or undefined for a plain one. */
export function tlsOf(ends: ConnectionEnds | undefined): TlsFacts | undefined {
  const socket = ends?.socket;
  const version = socket?.getTLSVersion?.();
  if (!socket || !version) return undefined;
  const cipher = socket.getCipher?.();
  // ngrok writes the version without its "TLSv" ("1.3"); OpenSSL's "TLSv1" is 1.0
  const short = version.startsWith("TLSv") ? version.slice(4) : version;
  return {
    version: short.includes(".") ? short : `${short}.0`,
    cipherSuite: cipher?.standardName ?? cipher?.name ?? "",
    sni: socket.getServername?.() ?? "",
    negotiatedAlpn: socket.alpnProtocol || "",
    sessionResumed: socket.isSessionReused?.() ?? false,
    // made from the hello's pieces the first time a rule reads it, then kept (tls/ja4.ts)
    get ja4() {
      const hello = ends.peer?.hello;
      return hello ? ja4(hello) : undefined;
    },
  };
}

/** The facts of one request's run. */
export function requestFacts(t: Tunnel, s: RequestSubject): PolicyInput {
  return new RequestRunFacts(t, s, s.receivedAt ?? Date.now());
}

/**
 * A request's facts from its head, in one object: the run's input
 * (PolicyInput), its connection's (`conn` is this object) and its
 * request's (`request` is this object too), the head's fields read whole
 * only when a rule first asks for them. One object a request rather than
 * one per part: each is read through its own interface.
 */
class RequestRunFacts implements PolicyInput, ConnectionFacts, RequestFacts {
  readonly conn: ConnectionFacts = this;
  readonly request: RequestFacts = this;
  readonly now: number;
  readonly clientIp: string;
  readonly clientPort: number;
  readonly serverPort: number;
  readonly openedAt: number;
  readonly method: string;
  readonly target: string;
  readonly rawTarget: string | undefined;
  readonly scheme: "http" | "https";
  readonly host: string;
  readonly version: string;
  readonly receivedAt: number;
  private readonly head: RequestHead;
  private readonly text: string | { readonly text: string } | undefined;
  /** The endpoint's and the tunnel's facts, looked up when a rule first reads them (most read neither). */
  private endpointRead: EndpointFacts | undefined;
  private tunnelRead: TunnelFacts | undefined;
  private readonly secure: boolean;
  private readonly of: Tunnel;
  private readonly ends: ConnectionEnds | undefined;
  private readonly region: string | undefined;

  constructor(t: Tunnel, s: RequestSubject, now: number) {
    const head = s.head;
    this.of = t;
    this.secure = s.secure;
    this.now = now;
    this.clientIp = s.client;
    this.clientPort = s.clientPort;
    this.serverPort = s.serverPort;
    this.openedAt = s.openedAt;
    this.method = head.method;
    this.target = head.target === "*" ? "/" : head.target;
    this.rawTarget = s.rawTarget;
    this.scheme = s.secure ? "https" : "http";
    this.host = s.host;
    this.version = s.version ?? (head.minor === 1 ? "HTTP/1.1" : "HTTP/1.0");
    this.receivedAt = now;
    this.head = head;
    this.text = s.text;
    this.ends = s.ends;
    this.region = s.region;
  }

  get serverIp(): string | undefined {
    return serverIpOf(this.ends);
  }

  // read when a rule asks: the connection's counts as they are then
  get bytesIn(): number {
    return this.ends?.bytesIn ?? 0;
  }

  get bytesOut(): number {
    return this.ends?.bytesOut ?? 0;
  }

  get serverRegion(): string {
    return this.region ?? nodeRegion();
  }

  get tls(): TlsFacts | undefined {
    return this.secure ? tlsOf(this.ends) : undefined;
  }

  get endpoint(): EndpointFacts {
    return (this.endpointRead ??= endpointFacts(this.host, this.secure));
  }

  get tunnel(): TunnelFacts {
    return (this.tunnelRead ??= tunnelFacts(this.of));
  }

  get headers(): HeaderPairs {
    const text = this.text;
    const head = text === undefined ? this.head : everyField(this.head, typeof text === "string" ? text : text.text);
    // the identity field is the edge's to say (an openid-connect action's): one a visitor sent is not read, nor sent on
    return head.names.includes(USER_EMAIL_HEADER) ? head.fields.filter(([n]) => n.toLowerCase() !== USER_EMAIL_HEADER) : head.fields;
  }
}

/** Endpoints by the Host they are reached at (http, https): the same few for request after request. Bounded: past the cap it starts again. */
const endpoints = [new Map<string, EndpointFacts>(), new Map<string, EndpointFacts>()] as const;
const ENDPOINTS_KEPT = 1024;

function endpointFacts(host: string, secure: boolean): EndpointFacts {
  const known = endpoints[secure ? 1 : 0];
  let e = known.get(host);
  if (e) return e;
  const scheme = secure ? "https" : "http";
  const colon = host.lastIndexOf(":");
  const bracket = host.lastIndexOf("]");
  const hasPort = colon > bracket && /^\d{1,5}$/.test(host.slice(colon + 1));
  e = { host: hasPort ? host.slice(0, colon) : host, port: hasPort ? Number(host.slice(colon + 1)) : secure ? 443 : 80, protocol: scheme, url: `${scheme}://${host}` };
  if (known.size >= ENDPOINTS_KEPT) known.clear();
  known.set(host, e);
  return e;
}

/** Each live tunnel's facts, made once (what they are made of does not change in its life). */
const tunnels = new WeakMap<Tunnel, TunnelFacts>();

/** The tunnel as `tunnel.*` and `user.*` read it. */
export function tunnelFacts(t: Tunnel): TunnelFacts {
  let f = tunnels.get(t);
  if (!f) {
    f = { id: t.id, name: t.subdomain ?? t.hostname ?? (t.port !== undefined ? String(t.port) : ""), kind: t.protocol, user: t.username };
    tunnels.set(t, f);
  }
  return f;
}

/** A request let through the policies: its run, for forward (the request as they left it) and the response (LayeredRun is its own). */
export interface PolicyPass {
  run: LayeredRun;
}

/**
 * The operator's layers, then the tunnel's own (its flags layer: IP rules,
 * basic auth, the OIDC sign-in, header rules; then its policy file): the
 * request's pass, or the refusal that answers it (POLICY; the flags'
 * ADDRESS_REFUSED, SIGN_IN). At once while nothing waits (no action of
 * the runs, no body to read): the usual request costs no promise.
 */
export function judgeRequest(policy: TunnelPolicy, facts: PolicyInput, tunnel?: Tunnel, body?: BodySource): PolicyPass | Refusal | Promise<PolicyPass | Refusal> {
  const run = new LayeredRun(facts);
  if (body) readWhenAsked(run, body);
  const operator = run.through("on_http_request", policy.operator);
  if (operator instanceof Promise) return operator.then((v) => afterOperator(run, policy, v, tunnel));
  return afterOperator(run, policy, operator, tunnel);
}

function afterOperator(run: LayeredRun, policy: TunnelPolicy, operator: Verdict, tunnel: Tunnel | undefined): PolicyPass | Refusal | Promise<PolicyPass | Refusal> {
  if (operator.kind !== "continue") return refusalOf(operator, run, "server", tunnel);
  const own = run.through("on_http_request", policy.tunnel);
  if (own instanceof Promise) return own.then((v) => ownJudged(run, policy, v, tunnel));
  return ownJudged(run, policy, own, tunnel);
}

function ownJudged(run: LayeredRun, policy: TunnelPolicy, verdict: Verdict, tunnel: Tunnel | undefined): PolicyPass | Refusal {
  if (verdict.kind !== "continue") return refusalOf(verdict, run, "tunnel", tunnel);
  // the policy file ran last: its rules that matched, for the service and its inspector
  if (policy.own?.has("on_http_request")) run.ownMatched = matchedNames(run.runs[run.runs.length - 1]!);
  return run;
}

/**
 * The request's body read through the door's `body` when the run first
 * comes to an action that needs it (policy.ts: the run waits for it); one
 * that cannot be read ends the run, answered with the door's refusal.
 */
function readWhenAsked(run: LayeredRun, body: BodySource): void {
  const request = run.request!;
  request.bodyReader = () =>
    body.read().then((read) => {
      if (read instanceof Refusal) {
        run.unreadBody = read;
        return false;
      }
      withBody(request, read, body.reading);
      return true;
    });
}

/**
 * The refusal a layer's verdict is. A rate limit's is told to the tunnel
 * (the policy.rate_limited event), and the tunnel's agent is told of a
 * policy's refusal for its inspector (policy-notes.ts).
 */
function refusalOf(verdict: Exclude<Verdict, { kind: "continue" }>, run: LayeredRun, by: "tunnel" | "server", tunnel: Tunnel | undefined): Refusal {
  // the tunnel's flags refuse as they always have: the door answers an address it refuses with its own page
  if (verdict.code === "ADDRESS_REFUSED") return ADDRESS_REFUSED;
  if (verdict.code === "SIGN_IN" && verdict.kind === "respond") return new Refusal("access", "SIGN_IN", undefined, policyAnswer(verdict.response));
  if (verdict.code === BODY_UNREAD && run.unreadBody) return run.unreadBody;
  if (verdict.code === RATE_LIMITED) tunnel?.rateLimited?.();
  // close-connection: no answer at all (policy-closed.ts: each door closes in its medium)
  const status = verdict.kind === "close" ? CLOSED_STATUS : verdict.response.status;
  if (tunnel?.agent?.notePolicy) tellRefusal(tunnel, run, verdict, status, by, by === "tunnel" ? run.runs[run.runs.length - 1] : undefined);
  if (verdict.kind === "close") return new PolicyClosed(`rule ${verdict.rule}, ${verdict.action}`);
  return new Refusal("access", "POLICY", `rule ${verdict.rule}, ${verdict.action}`, policyAnswer(verdict.response));
}

const ADDRESS_REFUSED = new Refusal("access", "ADDRESS_REFUSED");
