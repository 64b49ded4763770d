/**
 * The doors of streams relayed from another node (edge/judgement/pipeline.ts),
 * on the node whose agent has the tunnel, where its rules live: the
 * visitor's node found the name and passes the visit on; here it passes
 * every step again against this node's tunnel as it is now.
 *
 * - relayed-http: a visitor's request for an http tunnel (its head as the
 *   visitor's node judged it, the visitor's address, whether the warning
 *   is due): the tunnel's IP rules, its sign-in (basic auth, OIDC with this
 *   node's keys), then the warning; a refusal is answered on the stream as
 *   the visitor's response; its header rules are applied here.
 * - relayed-tls: a visitor's TLS connection for a tls tunnel, undecrypted:
 *   its IP rules on the address the visitor's node saw.
 * - relayed-private: a connector on the other node to a private tunnel of
 *   this one: its standing and share asked here, its kind, the IP rules.
 */
import { canonicalAddress } from "../http/addresses.ts";
import { isRefusal as isHeadRefusal, parseRequestHead, type RequestHead } from "../http/request-head.ts";
import { responseBytes } from "../http/response-bytes.ts";
import { headAllowedToSwitch } from "../http/upgrade.ts";
import type { RelayedMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { addressRefusedPage } from "../edge/access/pages.ts";
import { staysWhileOpen } from "../edge/judgement/live-visits.ts";
import { Refusal, type Door, type Visit } from "../edge/judgement/pipeline.ts";
import { kindsThrough } from "../edge/kinds/doors.ts";
import { connectorStanding, openPrivateStream, privateKindFits, type PrivateVisit } from "../edge/private-streams.ts";
import type { Registry, Tunnel } from "../edge/registry.ts";
import { warningFor } from "../edge/warning.ts";
import { connectFacts, judgeConnect, type ConnectionSubject } from "../edge/traffic-policy/connect.ts";
import { judgeRequest, requestFacts, type ConnectionEnds } from "../edge/traffic-policy/http-request.ts";
import { POLICY_RULES_FIELD, type LayeredRun } from "../edge/traffic-policy/layered-run.ts";
import { breakersEnded } from "../edge/traffic-policy/breaker-outcomes.ts";
import { bodyRefusal, type BodyReading, type ReadBody } from "../edge/traffic-policy/request-body.ts";
import { readRelayedBody } from "../edge/traffic-policy/stream-body.ts";
import { replacedBody, replaceStreamBody } from "../edge/traffic-policy/replaced-body.ts";
import { REGION_FORM } from "../validate/region.ts";
import type { TunnelPolicy } from "../edge/traffic-policy/tunnel-policy.ts";
import { joinStreams, refuseRelayed } from "./stream-pipe.ts";

/** A relayed stream on its way through the steps. */
export interface RelayedVisit extends Visit {
  readonly down: Stream;
  readonly meta: RelayedMeta;
  /** relayed-http: the head, parsed once (the name step), and what it says of the visit. */
  head?: RequestHead;
  host?: string;
  secure?: boolean;
  /** The tunnel's traffic policies let it through: their run, for the head sent on and the response. */
  policy?: LayeredRun;
  /** Its body, read for a traffic policy action that needs it: sent on to the agent first. */
  body?: ReadBody;
}

/**
 * How the relayed doors hand a visit to the agent: `judgedWith`, the
 * tunnel's layers its judgement began with (judgement/pipeline.ts: the
 * stream stays, judged again by those of now when they changed since);
 * `rewriteFor`, the request's method, and `policy`, its traffic policies'
 * run, when the policies ran here: the response passes their filter here
 * when they judge it (or the agent is to be told of the request: relay.ts).
 */
export type RelayForward = (down: Stream, t: Tunnel, meta: RelayedMeta, judgedWith: TunnelPolicy | undefined, rewriteFor?: string, policy?: RelayedRun, body?: ReadBody) => void;

/** A relayed request's policies' run: `minor`, its HTTP version's; `judged`, its head as they judged it (meta's is as they left it), which they judge again when they change. */
export interface RelayedRun {
  run: LayeredRun;
  minor: 0 | 1;
  judged: string;
}

/** A relayed visit: the address the visitor's node judged (an older node: its peer's). */
export function relayedClient(meta: RelayedMeta): string {
  return canonicalAddress(meta.client ?? meta.remote.slice(0, meta.remote.lastIndexOf(":")));
}

const NO_TUNNEL = new Refusal("name", "UNKNOWN_NAME");
const NOT_A_HEAD = new Refusal("access", "BAD_REQUEST");
const WRONG_KIND = new Refusal("admission", "WRONG_KIND");
/** The kinds whose visitors come through these doors (their edge units say so). */
const RELAYED_HTTP = kindsThrough("relayed-http");
const RELAYED_TLS = kindsThrough("relayed-tls");

export class RelayedHttpDoor implements Door<RelayedVisit> {
  readonly name = "relayed-http";
  /** A request meets its tunnel's IP flags in its flags layer (request()). */
  readonly addressInPolicy = true;

  constructor(
    private readonly registry: Registry,
    private readonly onward: RelayForward,
  ) {}

  /**
   * `tunnel` names the subdomain between nodes (a tunnel's id is its own
   * node's); a pool's member of this node in turn. The head is read as
   * this tunnel takes it: a switch it does not allow is taken off (the
   * visitor's node passes every one on, for this node to judge).
   */
  find(v: RelayedVisit): Tunnel | Refusal {
    const { meta } = v;
    const t = meta.kind !== "tcp" && meta.head ? localMember(this.registry.tunnelBySubdomain(meta.tunnel)) : undefined;
    if (!t) return NO_TUNNEL;
    meta.head = headAllowedToSwitch(meta.head!, t.allowUpgrade);
    return t;
  }

  /**
   * The head, parsed once, by the steps that read it (sign-in, the warning,
   * header rules); a tunnel without them passes it on unread. Undefined:
   * the visitor's node parsed it, so this is no head it sent.
   */
  private parsed(v: RelayedVisit): RequestHead | undefined {
    if (v.head) return v.head;
    const head = parseRequestHead(v.meta.head!.slice(0, -4));
    if (isHeadRefusal(head)) return undefined;
    v.head = head;
    v.host = headField(head, "x-forwarded-host") ?? v.meta.tunnel;
    v.secure = headField(head, "x-forwarded-proto") === "https";
    return head;
  }

  reaches(t: Tunnel): true | Refusal {
    return RELAYED_HTTP.has(t.protocol) ? true : WRONG_KIND;
  }

  /** The sign-in rules (the IP rules were asked before), then the warning the visitor's node found due. */
  request(v: RelayedVisit, t: Tunnel): undefined | Refusal | Promise<undefined | Refusal> {
    if (t.policy) return this.withPolicies(v, t, t.policy);
    return this.warning(v, t);
  }

  /**
   * The tunnel's traffic policies here, as on its own node (edge/http-door.ts):
   * on_tcp_connect (each relayed request is a connection here: the visitor's
   * node holds the connection), then the operator's layers, the tunnel's
   * flags and its own policy.
   */
  private async withPolicies(v: RelayedVisit, t: Tunnel, policy: TunnelPolicy): Promise<undefined | Refusal> {
    const head = this.parsed(v);
    if (!head) return NOT_A_HEAD;
    const clientPort = Number(v.meta.remote.slice(v.meta.remote.lastIndexOf(":") + 1)) || 0;
    const host = v.host!;
    const serverPort = Number(/:(\d+)$/.exec(host)?.[1] ?? (v.secure ? 443 : 80));
    if (policy.connect) {
      const closed = await judgeConnect(policy, connectFacts(t, { client: v.client, clientPort, serverPort, ends: relayedEnds(v.meta), region: relayedRegion(v.meta), host: host.replace(/:\d+$/, ""), protocol: v.secure ? "https" : "http" }));
      if (closed) return closed;
    }
    if (!policy.request && !policy.response) return this.warning(v, t);
    // the visitor's connection is the other node's: its counts as they were when the request was relayed, and that node's region
    const facts = requestFacts(t, { client: v.client, clientPort, serverPort, ends: relayedEnds(v.meta), region: relayedRegion(v.meta), openedAt: Date.now(), secure: v.secure!, host, head });
    // an action that reads the body (verify-webhook): read here, where the rules live, when the run comes to it
    const reading = policy.body;
    const body = reading ? { reading, read: () => this.readBody(v, head, reading) } : undefined;
    const judged = await judgeRequest(policy, facts, t, body);
    if (judged instanceof Refusal) return judged;
    v.policy = judged.run;
    return this.warning(v, t);
  }

  /** The request's body for the actions that read it: sent on to the agent first (RelayIn.forward). */
  private async readBody(v: RelayedVisit, head: RequestHead, reading: BodyReading): Promise<ReadBody | Refusal> {
    const read = await readRelayedBody(v.down, head, reading);
    if (!(typeof read === "object" && "raw" in read)) return bodyRefusal(read);
    v.body = read;
    return read;
  }

  /** Let through: the warning, if the visitor's node found it due, comes now (after the tunnel's policies, its sign-in among them, as on one node). */
  private warning(v: RelayedVisit, t: Tunnel): undefined | Refusal {
    if (!(v.meta.warn && !t.skipWarning)) return undefined;
    const head = this.parsed(v);
    if (!head) return NOT_A_HEAD;
    return new Refusal("access", "WARNING", undefined, warningFor(v.host!, t.username, head.target));
  }
  forward(v: RelayedVisit, t: Tunnel, judgedWith: TunnelPolicy | undefined): void {
    // the visitor left while its request was judged: nothing for a circuit breaker to count
    if (v.down.isClosed) return breakersEnded(v.policy, true);
    const run = v.policy;
    if (!run) return this.onward(v.down, t, v.meta, judgedWith);
    // the head as the tunnel's policies (its flags among them) left it, here where they live
    const head = v.head!;
    // request-body-find-replace rewrote the body: the new one goes in place of the one read (relay.ts sends it first)
    const replaced = replacedBody(run);
    if (replaced && v.body) replaceStreamBody(head, v.body, replaced);
    const changed = run.request;
    const fields: [string, string][] = changed ? [...changed.headers] : [...head.fields];
    // the head came from the visitor's node, which took any X-Burrow-* a visitor sent: this one is ours
    if (run.ownMatched !== undefined) fields.push([POLICY_RULES_FIELD, run.ownMatched]);
    let text = `${head.method} ${changed && head.target !== "*" ? changed.target : head.target} HTTP/1.${head.minor}\r\n`;
    for (const [name, value] of fields) text += `${name}: ${value}\r\n`;
    // the response passes the policies' filter here when they judge it, or when the agent is to be told of the request (relay.ts)
    this.onward(v.down, t, { ...v.meta, head: `${text}\r\n` }, judgedWith, head.method, { run, minor: head.minor, judged: v.meta.head! }, v.body);
  }

  refuse(v: RelayedVisit, r: Refusal): void {
    const res = r.answer ?? (r.code === "ADDRESS_REFUSED" && this.parsed(v) ? addressRefusedPage(v.host!, v.client) : undefined);
    // a policy closed the connection: the visitor's node, which holds it, closes it unanswered (forward.ts, h2/exchange.ts)
    if (!res && r.code === "POLICY") return v.down.reset(WireError.POLICY_CLOSED);
    if (!res) return refuseRelayed(v.down);
    void answerRelayed(v.down, res, v.head?.method === "HEAD").catch(() => refuseRelayed(v.down));
  }
}

export class RelayedTlsDoor implements Door<RelayedVisit> {
  readonly name = "relayed-tls";
  /** A connection meets its tunnel's IP flags in on_tcp_connect (request()). */
  readonly addressInPolicy = true;

  constructor(
    private readonly registry: Registry,
    private readonly onward: RelayForward,
  ) {}

  find(v: RelayedVisit): Tunnel | Refusal {
    return this.registry.tunnelBySubdomain(v.meta.tunnel) ?? NO_TUNNEL;
  }

  reaches(t: Tunnel): true | Refusal {
    return RELAYED_TLS.has(t.protocol) ? true : WRONG_KIND;
  }

  forward(v: RelayedVisit, t: Tunnel, judgedWith: TunnelPolicy | undefined): void {
    this.onward(v.down, t, v.meta, judgedWith);
  }

  /** The tunnel's on_tcp_connect, here where its rules live (the visitor's connection is on the other node). */
  request(v: RelayedVisit, t: Tunnel): undefined | Refusal | Promise<undefined | Refusal> {
    if (!t.policy?.connect) return undefined;
    return judgeConnect(t.policy, connectFacts(t, relayedTlsSubject(t, v.meta, v.client)));
  }

  refuse(v: RelayedVisit): void {
    refuseRelayed(v.down);
  }
}

/** A connector's stream relayed from its node; `owner` and `name` from its row (edge/private-streams.ts readPrivateRowName). */
export interface RelayedPrivateVisit extends PrivateVisit {
  readonly down: Stream;
  readonly ownerId: number;
  readonly privateName: string;
}

export class RelayedPrivateDoor implements Door<RelayedPrivateVisit> {
  readonly name = "relayed-private";

  constructor(private readonly registry: Registry) {}

  find(v: RelayedPrivateVisit): Tunnel | Refusal {
    return this.registry.privateTunnel(v.ownerId, v.privateName) ?? TUNNEL_OFFLINE;
  }

  standing(t: Tunnel, v: RelayedPrivateVisit): undefined | Refusal | Promise<undefined | Refusal> {
    return connectorStanding(this.registry.judge, t, v, v.ownerId, v.privateName);
  }

  reaches(t: Tunnel, v: RelayedPrivateVisit): true | Refusal {
    return privateKindFits(t, v);
  }

  forward(v: RelayedPrivateVisit, t: Tunnel): void {
    if (v.down.isClosed) return;
    const up = openPrivateStream(t, v);
    if (typeof up === "string") return v.down.reset(up);
    joinStreams(v.down, up);
    staysWhileOpen(t, v.client, v.down);
  }

  refuse(v: RelayedPrivateVisit, r: Refusal): void {
    v.down.reset(r.code.slice(0, 100));
  }
}

const TUNNEL_OFFLINE = new Refusal("name", "TUNNEL_OFFLINE");

/**
 * The tunnel a relayed request for a name goes to here: the name's own, or
 * one of this node's members of its pool, in turn. A request sent before
 * the other node learned that this node's members left the rotation (a
 * rolling restart) still goes to one whose agent is connected: it serves
 * what comes until it leaves (and has heard READY: a member joining is not
 * sent anything before).
 */
function localMember(t: Tunnel | undefined): Tunnel | undefined {
  if (!t?.pool) return t;
  return t.pool.pick() ?? t.pool.members.find((m) => m.agent && m.announced);
}

/** A field's values in a head, joined; undefined when absent. */
export function headField(head: RequestHead, name: string): string | undefined {
  let found: string | undefined;
  for (const [n, value] of head.fields) if (n.toLowerCase() === name) found = found === undefined ? value : `${found}, ${value}`;
  return found;
}

/**
 * Answers a relayed visitor here, with a refusal or the warning page, in
 * place of the tunnel's: the page's bytes as a local service's would come.
 */
async function answerRelayed(down: Stream, res: Response, head: boolean): Promise<void> {
  const bytes = await responseBytes(res, { head });
  if (down.isClosed) return;
  down.onData = (chunk) => down.consumed(chunk.byteLength); // the request's body is not wanted
  down.cork(() => {
    down.reply({});
    down.end(bytes);
  });
}

/** What a JA4 fingerprint looks like (tls/ja4.ts): another node's that does not is not given to the rules. */
const JA4_FORM = /^t[0-9a-z]{2}[di]\d{4}[0-9a-z]{2}_[0-9a-f]{12}_[0-9a-f]{12}$/;

/**
 * A tls connection relayed from the visitor's node as its tunnel's
 * on_tcp_connect judges it here, when it comes and again when the
 * policies change while it is open (relayed-subject.ts): the addresses
 * the visitor's node saw, the tunnel's public name, and the name the
 * visitor's hello asked for (RelayedMeta.sni; a DNS name is at most 253
 * characters), and its JA4 fingerprint (RelayedMeta.ja4, when it has the
 * form of one).
 */
export function relayedTlsSubject(t: Tunnel, meta: RelayedMeta, client: string, openedAt?: number): ConnectionSubject {
  const clientPort = Number(meta.remote.slice(meta.remote.lastIndexOf(":") + 1)) || 0;
  const serverPort = Number(meta.local?.slice(meta.local.lastIndexOf(":") + 1)) || 443;
  const sni = typeof meta.sni === "string" && meta.sni.length <= 255 ? meta.sni : undefined;
  const ja4 = typeof meta.ja4 === "string" && JA4_FORM.test(meta.ja4) ? meta.ja4 : undefined;
  return { client, clientPort, serverPort, ends: relayedEnds(meta), region: relayedRegion(meta), host: t.publicHost ?? t.hostname ?? t.subdomain ?? "", protocol: "tls", serverName: sni, hello: ja4, ...(openedAt !== undefined ? { openedAt } : {}) };
}

/**
 * The visitor's connection as its node told of it: its local end
 * (`address:port`, as the tcp door sends it: `conn.server_ip` of a relayed
 * tls connection), and the bytes it had read and written when the request
 * was relayed (RelayedMeta.bytesIn, bytesOut: a snapshot; a count that is
 * no count reads 0).
 */
export function relayedEnds(meta: RelayedMeta): ConnectionEnds {
  const colon = meta.local?.lastIndexOf(":") ?? -1;
  return { socket: { localAddress: colon > 0 ? meta.local!.slice(0, colon) : undefined }, bytesIn: count(meta.bytesIn), bytesOut: count(meta.bytesOut) };
}

const count = (n: unknown): number => (typeof n === "number" && Number.isSafeInteger(n) && n >= 0 ? n : 0);

/** The region of the node the visitor came in at (`conn.server_region`): its own, never this node's; one that is no region name reads empty. */
export function relayedRegion(meta: RelayedMeta): string {
  return typeof meta.region === "string" && REGION_FORM.test(meta.region) ? meta.region : "";
}
