/**
 * The only place that knows what is live: tunnels by subdomain and port,
 * agent sessions by id. The edge registers and removes; admin actions close
 * through closeUser/closeToken; the admin API reads list().
 *
 * A tunnel whose agent drops without saying goodbye is kept, agentless, for
 * RECLAIM_GRACE_MS: its name or port stays held for the same token, and a
 * reconnecting agent takes it back.
 */
import type { LiveView } from "../core/admission.ts";
import type { AppError } from "../core/errors.ts";
import type { ActiveTunnel, AgentAsk, AgentInfo, AskResult, LiveTunnels, RulesChange } from "../core/live.ts";
import type { AllowedUpgrades } from "../http/upgrade.ts";
import { KIND_NAMES, kindFacts, type TunnelKind } from "../protocol/kinds.ts";
import type { Stream } from "../protocol/mux.ts";
import type { OpenMeta } from "../protocol/messages.ts";
import { RECLAIM_GRACE_MS } from "../protocol/wire.ts";
import type { TrafficMeter } from "./meter.ts";
import type { AccessPolicy } from "./access/policy.ts";
import type { TunnelPool } from "./pool.ts";
import type { LiveVisits } from "./judgement/live-visits.ts";
import type { TunnelPolicy } from "./traffic-policy/tunnel-policy.ts";
import type { PolicyNote, PolicyPassed } from "../protocol/messages.ts";

/** What the registry needs of a connected agent. */
export interface AgentLink {
  readonly sessionId: string;
  readonly userId: number;
  readonly tokenId: number;
  /** It serves h1 streams opened with `keep` (its HELLO said so). */
  readonly keeps?: boolean;
  /** Tells it of a request its tunnel's traffic policies answered at the edge (POLICY), when it asked to be told. */
  notePolicy?(note: PolicyNote): void;
  /** Its HELLO asked to be told what the policies did with requests they let through (POLICY_PASSED). */
  readonly tellsPassed?: boolean;
  /** Its HELLO said it makes the notes it can itself (`derived_notes`: derived-notes.ts); the edge lists their rules in READY for it. */
  readonly makesNotes?: boolean;
  /** Tells it so, for one request. */
  notePassed?(note: PolicyPassed): void;
  /** The same from a note's fields already encoded (passed-notes.ts): `tail` is the JSON after `{"tunnel":...,"stream":N`. */
  notePassedEncoded?(tunnel: string, stream: number, tail: Uint8Array): void;
  /** A new stream to the agent, or undefined when it cannot take one now. `end`: nothing follows from the edge. */
  openStream(meta: OpenMeta, end?: boolean): Stream | undefined;
  /** Tells the agent why (ERROR) and closes its connection. */
  refuse(code: string, message: string): void;
  /** Its HELLO said it came through a proxy (what can_use_proxy judges). */
  readonly proxy?: boolean;
  /** A connector's session (`burrow connect`): the private tunnel it reaches. */
  readonly connects?: { ownerId: number; name: string };
  /**
   * Tells the agent that one of its tunnels is closed alone (REVOKE), and
   * ends that tunnel's streams; false when it cannot be told so (its HELLO
   * did not say it understands), and nothing was done.
   */
  revoke?(tunnelId: string, code: string, message: string): boolean;
  /** It runs its token's remote config: its tunnels come and go with the server's, so it may hold none. */
  readonly remote?: boolean;
  /** Sends it its token's remote config (CONFIG), when it runs it. */
  sendConfig?(): void;
  /** The agent as GET /api/agents lists it. */
  describe?(): AgentInfo;
  /** The server's ask (reconnect, update), answered by the agent. */
  ask?(action: AgentAsk): Promise<AskResult>;
}

/**
 * What judges what is live again after an admin change, and each
 * connector's streams (edge/live-rules.ts); set by the edge's wiring.
 */
export interface LiveJudge {
  changed(change: RulesChange): Promise<void>;
  /** What was judged before may be stale now: each connector's next stream is judged anew. */
  forget(): void;
  /** Whether a connector may open a stream to `ownerId/name` now: undefined, or the refusal; a promise when it must be asked. */
  connector(c: { userId: number; tokenId?: number }, ownerId: number, name: string): AppError | undefined | Promise<AppError | undefined>;
}

/** The kinds of tunnel (protocol/kinds.ts): http and tls by name, tcp and udp by port (two port spaces: tcp 20000 and udp 20000 are two tunnels). */
export type TunnelProtocol = TunnelKind;

/** A connector's session (`burrow connect`) to a private tunnel, as the tunnel and the registry hold it. */
export interface PrivateConnection {
  userId: number;
  tokenId: number;
  close(code: string): void;
  /** Whether it may still reach the tunnel, asked again (the tunnel is on another node and changed). */
  recheck?(): void;
}

/** Admin changes remembered for the handshakes under way (changesSince): far more than can come during one. */
const CHANGES_KEPT = 256;

/** What an admin change concerns, as a handshake under way asks: a rules change, or a token revoked. */
export type HeardChange = RulesChange | { tokenId: number };

const privateKey = (ownerId: number, name: string) => `${ownerId}/${name}`;

export class Tunnel {
  /** What its agent asked to wait for a response head (capped by the edge); undefined: the server's --response-timeout. */
  responseTimeoutMs?: number;
  /** Its visits that stay (raw connections, pipes, joined streams), judged again when its rules narrow (judgement/live-visits.ts). */
  liveVisits?: LiveVisits;
  /** Who may reach it (IP rules, authentication, header rules); undefined: anyone, as sent. */
  access?: AccessPolicy;
  /** Its traffic policies: the operator's layers that cover it and its own (traffic-policy/); undefined: none. */
  policy?: TunnelPolicy;
  /** http: the protocols besides websocket a request may switch to (--allow-upgrade; http/upgrade.ts); "any" for another node's, which decides there. */
  allowUpgrade?: AllowedUpgrades;
  agent: AgentLink | null = null;
  connectedAt = new Date();
  bytesIn = 0;
  bytesOut = 0;
  /** Told when a traffic policy's rate limit refuses one of its requests (the policy.rate_limited event; edge-events.ts). */
  rateLimited?: () => void;
  /** Settles once other nodes no longer see it, after it went (its cluster rows deleted); unset on one node. */
  gone?: Promise<void>;
  /** Set by the owner of extra resources (a TCP listener, a UDP socket) to free them. */
  onRemoved?: () => void;
  /** A tcp tunnel's listener lets go of its port, its connections go on; a udp tunnel's socket closes (a draining server: its successor binds them). */
  stopAccepting?: () => void;
  graceTimer?: ReturnType<typeof setTimeout>;
  /** Another node's tunnel, reached through a relay link (cluster/relay.ts). */
  relayed = false;
  /** The pool it is a member of (edge/pool.ts), when it shares its name or port with others. */
  pool?: TunnelPool<Tunnel>;
  /** A pool member takes new requests (its agent has heard READY, and says nothing else: health, a rolling restart). */
  inRotation = true;
  /** Its agent has heard READY: streams may be opened to it (a pool member's, by another node too). */
  announced = false;
  /** A pool member's requests (or connections) in flight, for least-requests. */
  inFlight = 0;
  /**
   * A private tunnel (no public port or name): the user ids it is shared
   * with (its owner always reaches it), and the connectors' streams joined
   * to it now, each closed when its connector may no longer reach it.
   */
  shares?: Set<number>;
  /** The usernames of `shares`, for READY and the lists. */
  shareNames?: string[];
  readonly connectors = new Set<PrivateConnection>();
  /**
   * The host its public address names (READY's url, agent-tunnels.ts): the
   * server's domain for a tcp tunnel, its whole name for a tls one. What a
   * connection's `endpoint.host` is; undefined until READY told it.
   */
  publicHost?: string;

  constructor(
    readonly protocol: TunnelProtocol,
    /** `private`: a private tunnel's name (its owner's, e.g. "db"; reached as owner/name). */
    readonly address: { subdomain?: string; hostname?: string; port?: number; private?: string },
    readonly userId: number,
    readonly username: string,
    readonly tokenId: number,
    public skipWarning: boolean,
    private readonly meter: TrafficMeter,
    /** What the agent and the cluster know it by (a pool member's is chosen when its name is claimed). */
    readonly id: string = crypto.randomUUID(),
  ) {}

  get subdomain() {
    return this.address.subdomain;
  }
  /** A custom hostname it is reached by too (demo.acme.com), when it has one. */
  get hostname() {
    return this.address.hostname;
  }
  get port() {
    return this.address.port;
  }
  /** A private tunnel's name, without its owner. */
  get privateName() {
    return this.address.private;
  }

  /** Bytes from the public side toward the local service. */
  countIn(n: number): void {
    this.bytesIn += n;
    this.meter.add(this.userId, n, 0);
  }

  /** Bytes from the local service back to the public side. */
  countOut(n: number): void {
    this.bytesOut += n;
    this.meter.add(this.userId, 0, n);
  }
}

interface SessionEntry {
  link: AgentLink;
  tunnels: Tunnel[];
}

/** Told of every tunnel that waits in grace or goes, and of pool members in and out of rotation (the cluster mirrors them into the database). */
export interface RegistryHooks {
  /** `sessionId`: the session it was live in. */
  detached(t: Tunnel, sessionId: string): void;
  removed(t: Tunnel): void;
  rotated(t: Tunnel): void;
  /** A session is live, or what the list of agents shows of it changed (its tunnels, its STATUS). */
  sessionChanged?(link: AgentLink): void;
  /** A session ended. */
  sessionGone?(sessionId: string): void;
}

/** Told when a tunnel goes live with an agent and when its agent leaves it (edge-events.ts makes them events). */
export interface TunnelLifeHooks {
  online(t: Tunnel): void;
  offline(t: Tunnel): void;
}

export class Registry implements LiveTunnels, LiveView {
  hooks?: RegistryHooks;
  /** tunnel.online and tunnel.offline (edge-events.ts); set by the edge's wiring. */
  life?: TunnelLifeHooks;
  /** Judges live sessions again after admin changes, and connectors' streams (edge/live-rules.ts). */
  judge?: LiveJudge;
  /**
   * Tunnels by name: their subdomains and their custom hostnames, in one map
   * (a hostname has dots, a subdomain never), so that every lookup by name
   * (visitors, admission, other nodes' relays) finds either.
   */
  private readonly bySubdomain = new Map<string, Tunnel>();
  private readonly byPort = new Map<number, Tunnel>();
  private readonly byUdpPort = new Map<number, Tunnel>();
  /** Private tunnels by "<owner id>/<name>". */
  private readonly byPrivate = new Map<string, Tunnel>();
  /** Connectors here to private tunnels on other nodes, by "<owner id>/<name>" (several nodes). */
  private readonly connectorsElsewhere = new Map<string, Set<PrivateConnection>>();
  private readonly sessions = new Map<string, SessionEntry>();

  /** Called with each http tunnel's name as it goes live (the edge asks for its certificate; never for a tls tunnel's). */
  onLive?: (name: string) => void;

  constructor(private readonly meter: TrafficMeter) {}

  newTunnel(
    protocol: TunnelProtocol,
    address: { subdomain?: string; hostname?: string; port?: number; private?: string },
    owner: { userId: number; username: string; tokenId: number },
    skipWarning: boolean,
    id?: string,
  ): Tunnel {
    return new Tunnel(protocol, address, owner.userId, owner.username, owner.tokenId, skipWarning, this.meter, id);
  }

  /** A session's agent has heard READY: its pool members come in rotation. */
  announced(tunnels: Tunnel[]): void {
    for (const t of tunnels) {
      t.announced = true;
      if (t.pool && t.agent) this.setRotation(t, true);
    }
  }

  /** A pool member goes out of rotation or back in (its agent said ROTATION, or heard READY). */
  setRotation(t: Tunnel, inRotation: boolean): void {
    t.inRotation = inRotation;
    this.hooks?.rotated(t);
  }

  /** Puts a session's tunnels live (new ones or reclaimed from grace). */
  attach(link: AgentLink, tunnels: Tunnel[]): void {
    for (const t of tunnels) this.goLive(link, t);
    this.sessions.set(link.sessionId, { link, tunnels });
    this.hooks?.sessionChanged?.(link);
  }

  /** What the list of agents shows of a live session changed (its STATUS, its tunnels). */
  sessionChanged(link: AgentLink): void {
    if (this.sessions.get(link.sessionId)?.link === link) this.hooks?.sessionChanged?.(link);
  }

  /** More tunnels live on a session already live (its agent added them: wire.ts ADD); false when the session is gone. */
  attachMore(link: AgentLink, tunnels: Tunnel[]): boolean {
    const entry = this.sessions.get(link.sessionId);
    if (!entry || entry.link !== link) return false;
    for (const t of tunnels) this.goLive(link, t);
    entry.tunnels = [...entry.tunnels, ...tunnels];
    this.hooks?.sessionChanged?.(link);
    return true;
  }

  /**
   * One tunnel its agent gave up (wire.ts REMOVE): it goes now, with no
   * grace, as a GOAWAY frees a session's; the session and its other
   * tunnels go on.
   */
  release(t: Tunnel): void {
    const link = t.agent;
    const entry = link && this.sessions.get(link.sessionId);
    if (entry) entry.tunnels = entry.tunnels.filter((x) => x !== t);
    this.remove(t);
    if (entry) this.hooks?.sessionChanged?.(entry.link);
  }

  private goLive(link: AgentLink, t: Tunnel): void {
    clearTimeout(t.graceTimer);
    t.graceTimer = undefined;
    t.agent = link;
    t.connectedAt = new Date();
    // a pool member comes (back) in rotation once its agent has heard READY (announced); then it says ROTATION if it should not be
    t.inRotation = !t.pool;
    t.announced = false;
    if (t.subdomain !== undefined) this.bySubdomain.set(t.subdomain, t);
    if (t.hostname !== undefined) this.bySubdomain.set(t.hostname, t);
    if (t.port !== undefined) this.portsOf(t.protocol).set(t.port, t);
    if (t.privateName !== undefined) this.byPrivate.set(privateKey(t.userId, t.privateName), t);
    if (t.subdomain !== undefined) this.arrived(t.subdomain, t);
    // a tls tunnel's certificate is its local service's own: the edge never asks for one
    if (t.subdomain !== undefined && t.protocol === "http") this.onLive?.(t.subdomain);
    // a custom hostname's certificate too: the name is verified, or the tunnel would not have it
    if (t.hostname !== undefined && t.protocol === "http") this.onLive?.(t.hostname);
    // tunnel.online, for a HELLO's tunnels and an ADD's alike
    this.life?.online(t);
  }

  /** A dropped tunnel of this token, held in grace, to hand back. */
  reclaimable(tokenId: number, want: { protocol: Tunnel["protocol"]; subdomain?: string; hostname?: string; port?: number; private?: { userId: number; name: string } }, resume?: string): Tunnel | undefined {
    const name = want.subdomain ?? want.hostname;
    const held =
      want.private !== undefined
        ? this.byPrivate.get(privateKey(want.private.userId, want.private.name))
        : name !== undefined
          ? this.bySubdomain.get(name)
          : want.port !== undefined
            ? this.portsOf(want.protocol).get(want.port)
            : undefined;
    // in a pool, the token's own member (dropped, or of the session resumed) is the one to take back
    const t = held?.pool ? held.pool.members.find((m) => m.tokenId === tokenId && (m.agent === null || m.agent.sessionId === resume)) : held;
    // a name held in grace by the token's tunnel of another kind is not this one's to take over; nor one with another hostname
    if (!t || t.tokenId !== tokenId || t.protocol !== want.protocol || t.hostname !== want.hostname || t.subdomain !== want.subdomain) return undefined;
    if (t.agent === null || t.agent.sessionId === resume) return t;
    return undefined;
  }

  /**
   * The session is gone. With grace, its tunnels stay held for the token;
   * without, they are removed now.
   */
  detach(sessionId: string, grace: boolean): void {
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    this.sessions.delete(sessionId);
    this.hooks?.sessionGone?.(sessionId);
    for (const t of entry.tunnels) {
      if (t.agent !== entry.link) continue; // already handed to a newer session
      t.agent = null;
      this.life?.offline(t);
      if (grace) {
        t.graceTimer = setTimeout(() => t.agent === null && this.remove(t), RECLAIM_GRACE_MS);
        this.hooks?.detached(t, sessionId);
      } else this.remove(t);
    }
  }

  /**
   * Holds a tunnel's names for its token as if its agent had just dropped
   * (the grace period starts now); false when another tunnel has them (a
   * member of the same pool is held beside it).
   */
  hold(t: Tunnel): boolean {
    const names = [t.subdomain, t.hostname].filter((n): n is string => n !== undefined);
    const there = names[0] === undefined ? t : this.bySubdomain.get(names[0]);
    if (there && !(t.pool && there.pool === t.pool)) {
      t.pool?.remove(t);
      return false;
    }
    if (!there) for (const name of names) this.bySubdomain.set(name, t);
    t.graceTimer = setTimeout(() => t.agent === null && this.remove(t), RECLAIM_GRACE_MS);
    return true;
  }

  /** The tunnels a live session holds. */
  sessionTunnels(sessionId: string): Tunnel[] {
    return this.sessions.get(sessionId)?.tunnels ?? [];
  }

  sessionTokenId(sessionId: string): number | undefined {
    return this.sessions.get(sessionId)?.link.tokenId;
  }

  /** Closes one session, telling its agent why; its tunnels go at once. */
  closeSession(sessionId: string, code: string, message: string, grace = false): void {
    const entry = this.sessions.get(sessionId);
    if (!entry) return;
    this.detach(sessionId, grace);
    entry.link.refuse(code, message);
  }

  /**
   * One tunnel closed, its agent told why: alone when its session holds
   * others and its agent understands REVOKE; else with its whole session,
   * the agent told by ERROR. A tunnel in grace just goes.
   */
  closeTunnel(t: Tunnel, code: string, message: string): void {
    const link = t.agent;
    const entry = link && this.sessions.get(link.sessionId);
    if (!link || !entry) return this.remove(t);
    const others = entry.tunnels.filter((x) => x !== t && x.agent === link);
    // a session of the remote config stays with none: the server's next config may bring others
    if ((others.length === 0 && !link.remote) || !link.revoke?.(t.id, code, message)) return this.closeSession(link.sessionId, code, message);
    entry.tunnels = entry.tunnels.filter((x) => x !== t);
    this.remove(t);
    this.hooks?.sessionChanged?.(link);
  }

  /** The agents connected here, as GET /api/agents lists them. */
  agents(): AgentInfo[] {
    return [...this.sessions.values()].flatMap(({ link }) => (link.describe ? [link.describe()] : []));
  }

  /** Asks the agent of session `id` here to reconnect or to update. */
  askAgent(id: string, action: AgentAsk): Promise<AskResult> {
    const link = this.sessions.get(id)?.link;
    return link?.ask ? link.ask(action) : Promise.resolve({ found: false });
  }

  /** The live sessions (connectors' too), each with the tunnels it holds live now. */
  liveSessions(): { link: AgentLink; tunnels: Tunnel[] }[] {
    return [...this.sessions.values()].map(({ link, tunnels }) => ({ link, tunnels: tunnels.filter((t) => t.agent === link) }));
  }

  /** Tunnels held in grace for their token (no agent now), private ones included. */
  graceTunnels(): Tunnel[] {
    return [...this.allTunnels(), ...this.byPrivate.values()].filter((t) => t.agent === null);
  }

  remove(t: Tunnel): void {
    clearTimeout(t.graceTimer);
    // a pool's name (or port) stays while another member is there: it is mapped to that member now
    const last = t.pool ? t.pool.remove(t) : true;
    const heir = last ? undefined : t.pool!.members[0];
    const ports = this.portsOf(t.protocol);
    if (t.privateName !== undefined && this.byPrivate.get(privateKey(t.userId, t.privateName)) === t) this.byPrivate.delete(privateKey(t.userId, t.privateName));
    for (const c of t.connectors) c.close("TUNNEL_OFFLINE");
    for (const [map, key] of [[this.bySubdomain, t.subdomain], [this.bySubdomain, t.hostname], [ports, t.port]] as const) {
      if (key === undefined || (map as Map<string | number, Tunnel>).get(key) !== t) continue;
      if (heir) (map as Map<string | number, Tunnel>).set(key, heir);
      else (map as Map<string | number, Tunnel>).delete(key);
    }
    if (t.agent !== null) this.life?.offline(t);
    t.agent = null;
    t.onRemoved?.();
    this.hooks?.removed(t);
  }

  /** The user's live private tunnel `name` (or in grace: its agent is null then). */
  privateTunnel(ownerId: number, name: string): Tunnel | undefined {
    return this.byPrivate.get(privateKey(ownerId, name));
  }

  /** A connector here reaches `owner/name` on another node: told when that tunnel changes (privateChanged); returns its leaving. */
  connectedElsewhere(ownerId: number, name: string, c: PrivateConnection): () => void {
    const key = privateKey(ownerId, name);
    let set = this.connectorsElsewhere.get(key);
    if (!set) this.connectorsElsewhere.set(key, (set = new Set()));
    set.add(c);
    return () => {
      set.delete(c);
      if (set.size === 0 && this.connectorsElsewhere.get(key) === set) this.connectorsElsewhere.delete(key);
    };
  }

  /** Connectors here to `owner/name` on another node. */
  connectedElsewhereCount(ownerId: number, name: string): number {
    return this.connectorsElsewhere.get(privateKey(ownerId, name))?.size ?? 0;
  }

  /** Another node said `owner/name` came, went or was shared anew: its connectors here ask again. */
  privateChanged(ownerId: number, name: string): void {
    this.judge?.forget();
    for (const c of [...(this.connectorsElsewhere.get(privateKey(ownerId, name)) ?? [])]) c.recheck?.();
  }

  privateHolder(ownerId: number, name: string): { tokenId: number; sessionId: string | null } | undefined {
    const t = this.byPrivate.get(privateKey(ownerId, name));
    return t && { tokenId: t.tokenId, sessionId: t.agent?.sessionId ?? null };
  }

  tunnelBySubdomain(subdomain: string): Tunnel | undefined {
    return this.bySubdomain.get(subdomain);
  }

  /** Visitors waiting for a tunnel to come (see whenSubdomain), by name. */
  private readonly awaited = new Map<string, ((t: Tunnel | undefined) => void)[]>();

  /**
   * The tunnel named `subdomain` as soon as one is attached, or undefined
   * after `timeoutMs`. For the first seconds after a restart, when agents
   * are still on their way back: a visitor then waits a moment instead of
   * being told there is no such tunnel.
   */
  whenSubdomain(subdomain: string, timeoutMs: number): Promise<Tunnel | undefined> {
    const now = this.bySubdomain.get(subdomain);
    if (now?.agent || timeoutMs <= 0) return Promise.resolve(now);
    return new Promise((resolve) => {
      const waiters = this.awaited.get(subdomain) ?? [];
      const done = (t: Tunnel | undefined) => {
        clearTimeout(timer);
        resolve(t);
      };
      const timer = setTimeout(() => {
        const list = this.awaited.get(subdomain);
        const i = list?.indexOf(done) ?? -1;
        if (list && i >= 0) list.splice(i, 1);
        if (list?.length === 0) this.awaited.delete(subdomain);
        resolve(this.bySubdomain.get(subdomain));
      }, timeoutMs);
      waiters.push(done);
      this.awaited.set(subdomain, waiters);
    });
  }

  private arrived(subdomain: string, t: Tunnel): void {
    const waiters = this.awaited.get(subdomain);
    if (!waiters) return;
    this.awaited.delete(subdomain);
    for (const w of waiters) w(t);
  }

  /** The tunnel on a TCP port. */
  portHolder(port: number): Tunnel | undefined {
    return this.byPort.get(port);
  }

  /** The tunnel on a UDP port. */
  udpPortHolder(port: number): Tunnel | undefined {
    return this.byUdpPort.get(port);
  }

  private portsOf(protocol: TunnelProtocol): Map<number, Tunnel> {
    return kindFacts(protocol).portSpace === "udp" ? this.byUdpPort : this.byPort;
  }

  /** The tunnel named `hostname` (a custom hostname), if any. */
  tunnelByHostname(hostname: string): Tunnel | undefined {
    const t = this.bySubdomain.get(hostname);
    return t?.hostname === hostname ? t : undefined;
  }

  /** Every tunnel, live or in grace (for shutdown), every member of a pool included. */
  allTunnels(): Tunnel[] {
    const all = new Set<Tunnel>();
    for (const map of [this.bySubdomain, this.byPort, this.byUdpPort] as Map<unknown, Tunnel>[]) {
      for (const t of map.values()) for (const m of t.pool ? t.pool.members : [t]) all.add(m);
    }
    return [...all];
  }

  /** Tunnels with a connected agent, by protocol (the metrics' tunnels_active). */
  liveCounts(): Record<TunnelProtocol, number> {
    const counts = Object.fromEntries(KIND_NAMES.map((k) => [k, 0])) as Record<TunnelProtocol, number>;
    for (const { link, tunnels } of this.sessions.values()) {
      for (const t of tunnels) if (t.agent === link) counts[t.protocol]++;
    }
    return counts;
  }

  liveUsers(): Set<number> {
    return new Set([...this.sessions.values()].map((s) => s.link.userId));
  }

  // -- LiveTunnels (admin side) ----------------------------------------------------------------

  list(): ActiveTunnel[] {
    const out: ActiveTunnel[] = [];
    for (const { link, tunnels } of this.sessions.values()) {
      for (const t of tunnels) {
        if (t.agent !== link) continue;
        out.push({
          protocol: t.protocol,
          subdomain: t.subdomain,
          ...(t.hostname !== undefined ? { hostname: t.hostname } : {}),
          ...(t.pool ? { pool: { inRotation: t.inRotation } } : {}),
          ...(t.privateName !== undefined ? { private: { target: `${t.username}/${t.privateName}`, shares: t.shareNames ?? [], connected: t.connectors.size } } : {}),
          port: t.port,
          userId: t.userId,
          username: t.username,
          tokenId: t.tokenId,
          connectedAt: t.connectedAt,
          bytesIn: t.bytesIn,
          bytesOut: t.bytesOut,
        });
      }
    }
    return out;
  }

  /** `code`: one of core's (an admin action here), or whatever another node sent, which may be newer than this version's table. */
  closeUser(userId: number, code: string, message: string): void {
    this.heard({ userId });
    this.judge?.forget();
    for (const [id, s] of [...this.sessions]) if (s.link.userId === userId) this.closeSession(id, code, message);
    for (const t of this.graceTunnels()) if (t.userId === userId) this.remove(t);
  }

  /**
   * The admin changes heard here, numbered, the last CHANGES_KEPT of them:
   * a handshake that read the state before one of them and puts its tunnels
   * live after it is judged again first (agent-handshake.ts), so nothing goes live
   * with rights or rules older than the admin's.
   */
  private readonly recentChanges: { seq: number; change: HeardChange }[] = [];
  private changeSeq = 0;

  private heard(change: HeardChange): void {
    this.recentChanges.push({ seq: ++this.changeSeq, change });
    if (this.recentChanges.length > CHANGES_KEPT) this.recentChanges.shift();
  }

  /** Taken before a handshake reads the state: what changesSince() compares with. */
  changeMark(): number {
    return this.changeSeq;
  }

  /** The changes heard after `mark`; "many" when more came than are kept. */
  changesSince(mark: number): readonly HeardChange[] | "many" {
    if (mark === this.changeSeq) return [];
    const first = this.recentChanges[0];
    if (!first || first.seq > mark + 1) return "many";
    return this.recentChanges.filter((c) => c.seq > mark).map((c) => c.change);
  }

  /** An admin change that may narrow what someone may do: what it concerns here is judged again (edge/live-rules.ts). */
  rulesChanged(change: RulesChange): Promise<void> {
    this.heard(change);
    return this.judge?.changed(change) ?? Promise.resolve();
  }

  /** The token's remote config changed: its live agents that run it are sent it. */
  configChanged(tokenId: number): void {
    for (const { link } of this.sessions.values()) if (link.tokenId === tokenId) link.sendConfig?.();
  }

  closeToken(tokenId: number, code: string, message: string): void {
    this.heard({ tokenId });
    this.judge?.forget();
    for (const [id, s] of [...this.sessions]) if (s.link.tokenId === tokenId) this.closeSession(id, code, message);
    for (const t of this.graceTunnels()) if (t.tokenId === tokenId) this.remove(t);
  }

  // -- LiveView (admission) ---------------------------------------------------------------------

  liveTokenIds(userId: number): Set<number> {
    const ids = new Set<number>();
    for (const s of this.sessions.values()) if (s.link.userId === userId) ids.add(s.link.tokenId);
    return ids;
  }

  liveTunnelCount(userId: number, except?: string): number {
    let n = 0;
    for (const [id, s] of this.sessions) if (s.link.userId === userId && id !== except) n += s.tunnels.filter((t) => t.agent === s.link).length;
    return n;
  }

  unflushedBytes(userId: number): number {
    return this.meter.unflushed(userId);
  }

  userTunnels(userId: number): { key: string; here: string; tokenId: number; since: number }[] {
    const out: { key: string; here: string; tokenId: number; since: number }[] = [];
    for (const { link, tunnels } of this.sessions.values()) {
      if (link.userId !== userId) continue;
      for (const t of tunnels) if (t.agent === link) out.push({ key: t.id, here: t.id, tokenId: t.tokenId, since: t.connectedAt.getTime() });
    }
    return out;
  }

  subdomainHolder(subdomain: string): { tokenId: number; sessionId: string | null; pool?: { userId: number } } | undefined {
    const t = this.bySubdomain.get(subdomain);
    return t && { tokenId: t.tokenId, sessionId: t.agent?.sessionId ?? null, ...(t.pool ? { pool: { userId: t.pool.userId } } : {}) };
  }
}
