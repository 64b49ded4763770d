/**
 * The agents' side of the edge: one AgentConnection per agent connection,
 * a WebSocket at /_burrow/connect or a direct socket on --agent-port. It
 * waits for HELLO, asks core who may open what, binds what it was granted,
 * answers READY, and from then on opens a stream per visitor. Any refusal
 * is an ERROR frame with a stable code, then close.
 *
 * An agent that arrives by WebSocket and says it can go direct is sent a
 * MOVE naming the direct port instead of READY: it says HELLO again there
 * (or, if that port is out of its reach, here once more without asking).
 */
import * as v from "valibot";
import { admit, admitConnector, type Admitted, type LiveView, type PlannedTunnel } from "../core/admission.ts";
import { rejudgeAdmitted } from "../core/live-admission.ts";
import { AppError } from "../core/errors.ts";
import type { PrivateName } from "../core/private-shares.ts";
import { cidrs } from "../validate/fields.ts";
import type { Core } from "../core/index.ts";
import { databaseUnavailable, logFailedWrite, reportUnavailable, UNAVAILABLE_MESSAGE, UNAVAILABLE_RETRY_S } from "../db/unavailable.ts";
import { limitedLog, log } from "../log.ts";
import type { EdgeCounters } from "../metrics/edge-counters.ts";
import { parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { Hello, readOpenMeta, Rotation, type GrantedTunnel, type OpenMeta, type RelayedMeta } from "../protocol/messages.ts";
import { joinStreams } from "../protocol/stream-join.ts";
import { openToPrivate } from "./private-streams.ts";
import { Mux, type SendResult, type Stream } from "../protocol/mux.ts";
import { DIRECT_DATA_PAYLOAD, FrameType, HANDSHAKE_TIMEOUT_MS, PROTOCOL_VERSION, WireError, type FrameTypeValue } from "../protocol/wire.ts";
import { discoverProviders, helloIssue, needsDiscovery, tunnelAccess, type Providers } from "./access/handshake.ts";
import type { HandshakeGuard } from "./handshake-guard.ts";
import { concerns } from "./live-rules.ts";
import type { HandshakeTicket } from "../core/handshake-throttle.ts";
import { openStream } from "./open-stream.ts";
import type { OtherNodes } from "./other-nodes.ts";
import type { PortAllocator } from "./ports.ts";
import type { AgentLink, PrivateConnection, Registry, Tunnel } from "./registry.ts";
import type { UdpTunnelPort } from "./udp-flows.ts";
import { TunnelPool } from "./pool.ts";
import type { UdpPortAllocator } from "./udp-ports.ts";

/** What an unauthenticated peer of the agents' endpoints can make the edge say: a few lines a minute. */
export const strangerFault = limitedLog(30);

/**
 * A private tunnel takes its owner's declaration (core/private-shares.ts):
 * who it is shared with now. A connector no longer shared with is closed at
 * once (NOT_SHARED), not at its next connection.
 */
function sharePrivate(t: Tunnel, declared: PrivateName): Tunnel {
  t.shares = new Set(declared.shares);
  t.shareNames = declared.shareNames ?? [];
  for (const c of [...t.connectors]) {
    if (c.userId !== t.userId && !t.shares.has(c.userId)) {
      t.connectors.delete(c);
      c.close("NOT_SHARED");
    }
  }
  return t;
}

/** A connector told TUNNEL_OFFLINE asks again after this (its retry_after). */
const CONNECTOR_RETRY_S = 2;
/** Rounds of asking a handshake's admission again while admin changes concerning it keep coming. */
const REJUDGE_ROUNDS = 3;
/** What a handshake claimed over the cluster: names, and pool members' ids by the HELLO's index. */
interface Claimed {
  names: string[];
  members: Map<number, string>;
}

/** Pool members going out of and back into rotation: an agent that flaps cannot flood the log. */
const rotationLog = limitedLog(60);

export interface EdgeContext {
  core: Core;
  registry: Registry;
  /** What admission counts: this node's registry, or with several nodes the cluster's. */
  live: LiveView;
  /** Several nodes: names are claimed over all of them before they go live here. */
  nodes?: OtherNodes;
  ports: PortAllocator;
  /** The UDP port range; undefined: --udp-ports off. */
  udpPorts?: UdpPortAllocator;
  /** The public address of an http tunnel by its subdomain (http://name.example.com) or custom hostname (a name with dots: http://demo.acme.com). */
  httpUrl(name: string): string;
  tcpAddress(port: number): string;
  /** Where visitors reach a udp tunnel: udp://example.com:PORT */
  udpAddress(port: number): string;
  /** Where visitors reach a tls tunnel (by subdomain or custom hostname): tls://name.example.com:PORT, the port that passes its name through; undefined when none does. */
  tlsAddress(name: string): string | undefined;
  /** The port a WebSocket agent that can go direct is sent to (MOVE); undefined: stay. */
  directPort?(): number | undefined;
  /** Failed handshakes per client address; undefined: none are counted. */
  handshakes?: HandshakeGuard;
  /** The longest response timeout an agent may ask for a tunnel; undefined: none may be asked. */
  maxResponseTimeoutMs?: number;
  /** Tunnels may name a plain-http OIDC issuer on loopback (--oidc-http-issuers loopback); else https only. */
  oidcHttpIssuers?: boolean;
  /** Wrong basic-auth passwords one address may try on a tunnel before it is locked (--basic-auth-limit). */
  basicAuthLimit?: number;
  /** Handshake results and stream resets, for the metrics. */
  counters?: EdgeCounters;
}

export interface AgentSocketData {
  kind: "agent";
  remote: string;
  /** The client's address, as the handshake throttle counts it (behind a trusted proxy, the client it names). */
  address: string;
  /** The address holding a place in the agents' connection budget until the WebSocket closes. */
  counted?: string;
  conn?: AgentConnection;
}

/** What carries an agent's frames: its WebSocket or its direct socket. */
export interface AgentTransport {
  readonly kind: "websocket" | "direct";
  /** The agent's address, "ip:port". */
  readonly remote: string;
  /** The client's canonical IP, what per-address throttles count by (the real client behind a trusted proxy). */
  readonly address: string;
  send(frames: Uint8Array): SendResult;
  /** Ends the connection after what was sent; `reason` is a short code. */
  close(reason: string): void;
}

export class AgentConnection implements AgentLink {
  readonly sessionId = crypto.randomUUID();
  userId = 0;
  tokenId = 0;
  readonly mux: Mux;
  private ready = false;
  /** Admin changes concerning the handshake kept coming while it was judged again: its tunnels are judged once live. */
  private judgeOnceLive = false;
  /** Its HELLO said it understands DRAIN. */
  private drains = false;
  /** Its HELLO said it serves kept h1 streams (OpenMeta `keep`). */
  keeps = false;
  /** Its HELLO said it came through a proxy. */
  proxy = false;
  /** Its HELLO said it understands REVOKE (one tunnel closed alone). */
  private revokes = false;
  private handshakeTimer: ReturnType<typeof setTimeout>;
  /** A HELLO came, so the connection's end before READY is a handshake's result. */
  private helloSeen = false;
  /** A connector's session (`burrow connect owner/name`): the private tunnel its streams go to. */
  /**
   * A connector's session: the private tunnel it reaches, and, when that is
   * on another node, the stand-in found there, kept for the session's next
   * connections (looked up again when it no longer opens streams, or when
   * that node says the tunnel changed).
   */
  private connector?: { ownerId: number; name: string; target: string; username: string; elsewhere?: Tunnel };
  /** Takes a connector's session off its private tunnel's list, when it ends. */
  private connectorLeft?: () => void;
  /** Its handshake's result is counted (READY, MOVE or the refusal). */
  private handshakeCounted = false;
  /** Its HELLO's place in the handshake throttle, until the handshake's result is known. */
  private handshakeTicket?: HandshakeTicket;
  /** Checks of its HELLO under way (the token looked up): a connection that ends meanwhile leaves the verdict to them. */
  private judging = 0;

  constructor(
    private readonly transport: AgentTransport,
    private readonly edge: EdgeContext,
  ) {
    this.mux = new Mux({
      role: "edge",
      batchWrites: true,
      ...(transport.kind === "direct" ? { maxDataPayload: DIRECT_DATA_PAYLOAD } : {}),
      send: (frames) => transport.send(frames),
      onControl: (type, payload) => this.control(type, payload),
      // only a connector opens streams toward the edge; any other agent that does breaks the protocol
      onStream: (stream) => this.peerStream(stream),
      onStreamReset: (code, by) => edge.counters?.reset(by === "local" ? "edge" : by === "peer" ? "agent" : "session", code),
      onClose: (code, message) => {
        // a handshake whose HELLO is not being checked gives its place back; one being checked is counted by its verdict
        if (this.judging === 0) this.handshakeEnded();
        if (code === WireError.KEEPALIVE_TIMEOUT) log.info("agent silent too long, closing", { session: this.sessionId });
        // every refusal of a handshake, whoever made it (admission, the throttle, a bad HELLO, the timeout), ends here
        if (!this.ready && (this.helloSeen || code === WireError.HANDSHAKE_TIMEOUT)) this.countHandshake(code);
        // a throttled address's refusals are summed up by the guard, not logged one by one
        if (code === WireError.GOING_AWAY || code === "RATE_LIMITED") return transport.close(code.slice(0, 100));
        // before a handshake anyone can cause this line: a few a minute then; after it, every one
        (this.ready ? log.info : strangerFault)("agent connection closed", { session: this.sessionId, code, reason: message, address: this.transport.address });
        transport.close(code.slice(0, 100));
      },
    });
    // the transport is open: an agent that goes silent (frozen, its network gone) is found by the mux
    this.mux.keepAlive();
    this.handshakeTimer = setTimeout(() => {
      if (this.ready) return;
      this.audit(WireError.HANDSHAKE_TIMEOUT);
      this.refuse(WireError.HANDSHAKE_TIMEOUT, `no HELLO within ${HANDSHAKE_TIMEOUT_MS / 1000} s`);
    }, HANDSHAKE_TIMEOUT_MS);
  }

  get isReady(): boolean {
    return this.ready;
  }

  /** A connector's session: the private tunnel it reaches. */
  get connects(): { ownerId: number; name: string } | undefined {
    return this.connector && { ownerId: this.connector.ownerId, name: this.connector.name };
  }

  /**
   * One of its tunnels is closed alone (an admin's change): the agent is told
   * why (REVOKE) and the tunnel's streams end; false, and nothing done,
   * for an agent that would not understand.
   */
  revoke(tunnelId: string, code: string, message: string): boolean {
    if (!this.ready || !this.revokes || this.mux.closed) return false;
    this.mux.sendControl(FrameType.REVOKE, { tunnel: tunnelId, code, message });
    for (const s of [...this.mux.streams.values()]) if ((s.meta as OpenMeta | undefined)?.tunnel === tunnelId) s.reset(code.slice(0, 100));
    log.info("tunnel closed alone", { session: this.sessionId, tunnel: tunnelId, code });
    return true;
  }

  /** How the agent reached the edge: its WebSocket, or the direct port. */
  get transportKind(): AgentTransport["kind"] {
    return this.transport.kind;
  }

  private countHandshake(result: string): void {
    if (this.handshakeCounted) return;
    this.handshakeCounted = true;
    this.edge.counters?.handshake(result);
  }

  openStream(meta: OpenMeta, end = false): Stream | undefined {
    if (!this.ready || this.mux.closed) return undefined;
    return openStream(this.mux, meta, end, { session: this.sessionId });
  }

  /** `retryAfterS`: when the agent may say HELLO again (RATE_LIMITED), sent as the ERROR's retry_after. */
  /**
   * The server is going away: an agent that understands DRAIN connects again
   * now (to whoever listens next) and lets this connection finish its
   * streams; true if it was told.
   */
  drain(): boolean {
    if (!this.ready || !this.drains || this.mux.closed) return false;
    this.mux.sendControl(FrameType.DRAIN, {});
    return true;
  }

  refuse(code: string, message: string, retryAfterS?: number): void {
    clearTimeout(this.handshakeTimer);
    this.mux.fail(code, message, retryAfterS === undefined ? undefined : { retry_after: retryAfterS });
  }

  /**
   * A refused handshake into the audit log: counted per address, code and
   * minute (a flood is a few rows); whose token it was is looked up only
   * for the first of its minute.
   */
  private audit(code: string, token?: string): void {
    const { core } = this.edge;
    core.audit.repeated({
      action: "agent.refused",
      address: this.transport.address,
      outcome: "refused",
      code,
      identify: async () => {
        const found = token === undefined ? undefined : await core.tokens.identify(token);
        return found && { userId: found.user.id, username: found.user.username, tokenId: found.token.id };
      },
    });
  }

  /** The WebSocket closed (either side): the session ends, its tunnels wait in grace. */
  closed(): void {
    if (this.judging === 0) this.handshakeEnded();
    this.connectorLeft?.();
    clearTimeout(this.handshakeTimer);
    this.mux.close();
    if (this.ready) this.edge.registry.detach(this.sessionId, true);
  }

  /** What the agent asked to wait for its service, in ms, held to the server's maximum. */
  private responseTimeout(askedS: number | undefined): number | undefined {
    const max = this.edge.maxResponseTimeoutMs;
    if (askedS === undefined || max === undefined) return undefined;
    return Math.min(Math.round(askedS * 1000), max);
  }

  private control(type: FrameTypeValue, payload: Uint8Array): void {
    switch (type) {
      case FrameType.HELLO: {
        if (this.ready) throw new ProtocolError("HELLO after READY");
        this.helloSeen = true;
        // what the agent sends after its HELLO waits until READY (or the refusal) has gone out
        this.mux.hold();
        const guard = this.edge.handshakes;
        if (guard) return void this.helloInTurn(guard, payload);
        return this.helloNow(payload);
      }
      case FrameType.GOAWAY:
        // the agent leaves on purpose: free its names and ports now
        this.edge.registry.detach(this.sessionId, false);
        this.ready = false;
        this.mux.close();
        return;
      case FrameType.ERROR:
        this.mux.close(WireError.GOING_AWAY, "agent reported an error");
        return;
      case FrameType.ROTATION: {
        if (!this.ready) throw new ProtocolError("ROTATION before READY");
        const parsed = v.safeParse(Rotation, parseJsonPayload(payload, "ROTATION"));
        if (!parsed.success) throw new ProtocolError("bad ROTATION");
        // only a pool member of this session's: anything else changes nothing
        const t = this.edge.registry.sessionTunnels(this.sessionId).find((x) => x.id === parsed.output.tunnel);
        if (!t?.pool || t.inRotation === parsed.output.in) return;
        this.edge.registry.setRotation(t, parsed.output.in);
        rotationLog(parsed.output.in ? "pool member back in rotation" : "pool member out of rotation", { session: this.sessionId, tunnel: t.subdomain ?? t.hostname ?? t.port });
        return;
      }
      default:
        throw new ProtocolError(`unexpected ${type} from an agent`);
    }
  }

  /**
   * A HELLO once the handshake throttle gives it a place: a throttled
   * address is turned away before its HELLO is parsed or its token looked
   * up; the others wait while the address's handshakes in flight take its
   * allowance (each counts as a failure until it is judged).
   */
  private async helloInTurn(guard: HandshakeGuard, payload: Uint8Array): Promise<void> {
    const turn = await guard.reserve(this.transport.address);
    if (turn.refusal) {
      this.audit(turn.refusal.code);
      return this.refuse(turn.refusal.code, turn.refusal.message, Number(turn.refusal.headers["Retry-After"]));
    }
    if (this.mux.closed) return turn.ticket[Symbol.dispose]();
    this.handshakeTicket = turn.ticket;
    try {
      this.helloNow(payload);
    } catch (err) {
      if (err instanceof ProtocolError) return this.refuse(WireError.PROTOCOL_ERROR, err.message);
      this.failedHandshake(err);
    }
  }

  private helloNow(payload: Uint8Array): void {
    try {
      return this.hello(parseJsonPayload(payload, "HELLO"));
    } catch (err) {
      // a HELLO that is not JSON or not a Hello counts as a failed handshake (PROTOCOL_ERROR is sent)
      if (err instanceof ProtocolError) {
        this.handshakeEnded(WireError.PROTOCOL_ERROR);
        this.audit(WireError.PROTOCOL_ERROR);
      }
      throw err;
    }
  }

  /**
   * The handshake's result for the throttle: a failure's code counts
   * against the address; any other result, or none (the connection ended
   * with no verdict), gives the place back.
   */
  private handshakeEnded(result?: string): void {
    const ticket = this.handshakeTicket;
    this.handshakeTicket = undefined;
    if (result === undefined) ticket?.[Symbol.dispose]();
    else ticket?.ended(result);
  }

  /**
   * A check of the HELLO starts: the verdict it reaches is what the throttle
   * counts, even if the agent hangs up first (a burst of HELLOs each closed
   * at once still meets the lock). The returned function ends it; one that
   * ends with no verdict on a closed connection gives the place back.
   */
  private judge(): () => void {
    this.judging++;
    return () => {
      if (--this.judging === 0 && this.mux.closed) this.handshakeEnded();
    };
  }

  /**
   * A HELLO with OIDC tunnels: its issuers answer discovery first, and only
   * once its token is known good, so a stranger cannot make the edge fetch
   * anything. Then the HELLO goes on as any other, with what they answered.
   */
  private async discoverThenHello(raw: unknown, tunnels: Hello["tunnels"]): Promise<void> {
    const judged = this.judge();
    try {
      let providers: Providers = new Map();
      try {
        // who is asking, before anything is fetched for them (tunnel by tunnel comes after discovery)
        await admit(this.edge.core, { token: (raw as Hello).token, proxy: false, tunnels: [], partial: true }, this.edge.live);
        providers = await discoverProviders(tunnels, this.edge.oidcHttpIssuers ?? false);
      } catch (err) {
        if (!(err instanceof AppError)) throw err; // a refusal: hello() below meets it again and refuses as always
        this.handshakeEnded(err.code); // the token's verdict, for the throttle, even if the agent has gone
      }
      if (!this.mux.closed) this.hello(raw, providers);
    } catch (err) {
      if (err instanceof ProtocolError) return this.refuse(WireError.PROTOCOL_ERROR, err.message);
      this.failedHandshake(err);
    } finally {
      judged();
    }
  }

  /** A handshake that threw: the database's outage is a refusal to try again later; anything else is a bug. */
  private failedHandshake(err: unknown): void {
    if (databaseUnavailable(err)) {
      reportUnavailable("agent handshake", err);
      return this.refuse("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE, UNAVAILABLE_RETRY_S);
    }
    log.error("agent handshake failed", { session: this.sessionId, err: String(err) });
    this.refuse("INTERNAL", "the server failed to handle the handshake");
  }

  private hello(raw: unknown, providers?: Providers): void {
    const parsed = v.safeParse(Hello, raw);
    if (!parsed.success) throw new ProtocolError(`bad HELLO: ${helloIssue(parsed.issues)}`);
    const hello = parsed.output;
    clearTimeout(this.handshakeTimer);
    if (hello.version !== PROTOCOL_VERSION) {
      this.audit(WireError.VERSION_MISMATCH, hello.token);
      return this.refuse(
        WireError.VERSION_MISMATCH,
        `this server speaks protocol version ${PROTOCOL_VERSION}, the agent ${hello.version}: please update burrow on the ${hello.version < PROTOCOL_VERSION ? "client" : "server"} (burrow update)`,
      );
    }
    const directPort = this.edge.directPort?.();
    if (hello.direct && this.transport.kind === "websocket" && directPort !== undefined) {
      // nothing is admitted here: the agent says the same HELLO on the direct port
      this.countHandshake("MOVE");
      this.handshakeEnded("MOVE");
      this.mux.sendControl(FrameType.MOVE, { port: directPort });
      this.mux.close(WireError.GOING_AWAY, "moved to the direct port");
      return;
    }
    if (hello.connect) return void this.connectThenReady(hello, hello.connect.target);
    if (providers === undefined && needsDiscovery(hello.tunnels)) return void this.discoverThenHello(raw, hello.tunnels);
    void this.admitThenOpen(hello, providers);
  }

  /**
   * A connector's handshake: the rules (core/admission.ts admitConnector),
   * then the owner's agent there now, on this node or another
   * (TUNNEL_OFFLINE, which the connector waits out), then READY with what
   * it reaches. Its session holds no tunnel; the private tunnel knows it
   * (or, on another node, the registry does), to close it when the owner
   * unshares, leaves or is revoked.
   */
  private async connectThenReady(hello: Hello, target: string): Promise<void> {
    const judged = this.judge();
    try {
      let admitted: Awaited<ReturnType<typeof admitConnector>>;
      try {
        admitted = await admitConnector(this.edge.core, { token: hello.token, proxy: hello.proxy, target });
      } catch (err) {
        if (err instanceof AppError) return this.refused(err, hello.token);
        throw err;
      }
      const { user, token, owner, declared } = admitted;
      const label = `${owner.username}/${declared.name}`;
      const here = this.edge.registry.privateTunnel(owner.id, declared.name);
      const elsewhere = here?.agent ? undefined : await this.edge.nodes?.privateElsewhere(owner.id, declared.name).catch(() => undefined);
      if (!here?.agent && !elsewhere) return this.refused(new AppError("TUNNEL_OFFLINE", `${label} is shared with you, but its owner's agent is not connected now`), hello.token, CONNECTOR_RETRY_S);
      if (this.mux.closed) return;
      this.userId = user.id;
      this.tokenId = token.id;
      this.proxy = hello.proxy;
      this.connector = { ownerId: owner.id, name: declared.name, target: label, username: user.username, ...(elsewhere ? { elsewhere } : {}) };
      this.ready = true;
      this.countHandshake("READY");
      this.handshakeEnded("READY");
      this.drains = hello.drain;
      this.edge.registry.attach(this, []);
      const entry: PrivateConnection = {
        userId: user.id,
        tokenId: token.id,
        close: (code: string) => this.refuse(code, code === "NOT_SHARED" ? `${label} is no longer shared with you` : `${label} is not there now`),
        recheck: () => void this.recheckConnector(user, label),
      };
      if (here?.agent) {
        here.connectors.add(entry);
        this.connectorLeft = () => here.connectors.delete(entry);
      } else this.connectorLeft = this.edge.registry.connectedElsewhere(owner.id, declared.name, entry);
      this.edge.core.tokens.touch(token.id).catch((err) => logFailedWrite("token last use not written", { token: token.id }, err));
      void this.edge.core.audit.record({ action: "private.connect", address: this.transport.address, outcome: "ok", userId: user.id, username: user.username, tokenId: token.id, target: `private:${label}` });
      this.mux.sendControl(FrameType.READY, {
        session: this.sessionId,
        username: user.username,
        tunnels: [],
        connect: { target: label, protocol: declared.protocol, ...(declared.localPort !== null ? { localPort: declared.localPort } : {}) },
      });
      log.info("connector connected", { session: this.sessionId, user: user.username, to: label, remote: this.transport.remote, ...(elsewhere ? { via: "another node" } : {}) });
    } catch (err) {
      this.failedHandshake(err);
    } finally {
      judged();
      this.mux.release();
    }
  }

  /**
   * The private tunnel this connector reaches is on another node and
   * changed there (it came, went, or was shared anew): still shared with
   * it (else NOT_SHARED), and live somewhere (else TUNNEL_OFFLINE, which
   * the connector waits out as on one node).
   */
  private async recheckConnector(user: { id: number; username: string }, label: string): Promise<void> {
    const c = this.connector;
    if (!c || this.mux.closed) return;
    try {
      const connector = await this.edge.core.users.get(user.id);
      await this.edge.core.privateShares.reach(connector, label);
    } catch (err) {
      if (err instanceof AppError) return this.refuse(err.code === "NOT_FOUND" ? "NOT_SHARED" : err.code, `${label} is no longer shared with you`);
      return log.warn("private tunnel not checked again", { to: label, err: String(err) });
    }
    if (this.edge.registry.privateTunnel(c.ownerId, c.name)?.agent) return;
    const elsewhere = await this.edge.nodes?.privateElsewhere(c.ownerId, c.name).catch(() => undefined);
    c.elsewhere = elsewhere;
    if (!elsewhere) this.refuse("TUNNEL_OFFLINE", `${label} is not there now`);
  }

  /**
   * A stream the agent opened: a connector's local connection, joined to a
   * stream to the private tunnel's agent, on this node or through a relay
   * link to the node it is on. Whether it may is asked again for each
   * (edge/private-streams.ts), there.
   */
  private peerStream(stream: Stream): void {
    const c = this.connector;
    const meta = readOpenMeta(stream.meta);
    if (!c || !meta) return stream.reset(WireError.PROTOCOL_ERROR);
    // each connection asks the rules as they are now, not as they were at the handshake
    const standing = this.edge.registry.judge?.connector({ userId: this.userId, tokenId: this.tokenId }, c.ownerId, c.name);
    if (!(standing instanceof Promise)) return this.connectorStream(stream, meta, c, standing);
    standing.then(
      (refusal) => {
        if (!stream.isClosed) this.connectorStream(stream, meta, c, refusal);
      },
      (err) => {
        log.warn("connector's stream not judged", { session: this.sessionId, to: c.target, err: String(err) });
        stream.reset(databaseUnavailable(err) ? "DATABASE_UNAVAILABLE" : WireError.UPSTREAM_FAILED);
      },
    );
  }

  /** A connector's stream its rules allow (or refuse: the session goes too, with the same code). */
  private connectorStream(stream: Stream, meta: OpenMeta, c: NonNullable<AgentConnection["connector"]>, refusal: AppError | undefined): void {
    if (refusal) {
      stream.reset(refusal.code);
      return this.refuse(refusal.code, refusal.message);
    }
    const here = this.edge.registry.privateTunnel(c.ownerId, c.name);
    const who = { userId: this.userId, username: c.username };
    if (here?.agent || !this.edge.nodes) return this.joinPrivate(stream, here, openToPrivate(here, who, meta.kind, this.transport.remote, meta.remote));
    // the owner's node asks the rules again; OPEN says who connects
    const relayed: RelayedMeta = { tunnel: "", kind: meta.kind, remote: this.transport.remote, local: meta.remote, connector: { id: this.userId, username: c.username, token: this.tokenId } };
    const known = c.elsewhere;
    const up = known?.agent?.openStream(relayed);
    if (known && up) return this.joinPrivate(stream, known, up);
    // not known, or its relay link is gone: the database says where the tunnel is now
    c.elsewhere = undefined;
    void this.edge.nodes.privateElsewhere(c.ownerId, c.name).then(
      (there) => {
        if (there) c.elsewhere = there;
        if (stream.isClosed) return;
        this.joinPrivate(stream, there, there?.agent?.openStream(relayed) ?? "TUNNEL_OFFLINE");
      },
      () => stream.reset(WireError.UPSTREAM_FAILED),
    );
  }

  /** A connector's stream joined to `up`, its traffic counted to the owner's tunnel `t`; or reset with why not. */
  private joinPrivate(stream: Stream, t: Tunnel | undefined, up: Stream | string): void {
    if (typeof up === "string" || !t) return stream.reset(typeof up === "string" ? up : "TUNNEL_OFFLINE");
    joinStreams(stream, up, { countUp: (n) => t.countIn(n), countDown: (n) => t.countOut(n) });
  }

  /** The rules (core/admission.ts) answer, then the tunnels open and READY goes out, or the refusal. */
  private async admitThenOpen(hello: Hello, providers: Providers | undefined): Promise<void> {
    // before admission reads the state: an admin change heard after it is judged before the tunnels open
    const mark = this.edge.registry.changeMark();
    const judged = this.judge();
    try {
      let admitted: Admitted | undefined;
      let claimed: Claimed = { names: [], members: new Map() };
      try {
        const cluster = this.edge.nodes;
        const rules = async () => {
          admitted = await admit(this.edge.core, hello, this.edge.live);
          if (cluster) claimed = await this.claim(cluster, hello, admitted);
        };
        // several nodes: the user's handshakes are judged one at a time over the cluster
        const user = cluster && (await this.edge.core.tokens.identify(hello.token))?.user;
        if (cluster && user) await cluster.oneUserAtATime(user.id, rules);
        else await rules();
      } catch (err) {
        if (err instanceof AppError) return this.refused(err, hello.token);
        throw err;
      }
      // a udp port is bound before the tunnels open (binding one is asynchronous), and closed if none adopts it
      const udp = admitted && !this.mux.closed ? await this.bindUdpPorts(admitted) : new Map<number, UdpTunnelPort | AppError>();
      // the agent may have gone while the rules were asked
      let announce: (() => void) | undefined;
      let refusal: AppError | undefined;
      try {
        if (admitted && !this.mux.closed) admitted = await this.judgedAgain(hello, admitted, mark);
        // no wait between the last look at the changes heard and the tunnels going live
        announce = !this.mux.closed && admitted ? this.open(hello, admitted, providers, udp, claimed.members) : undefined;
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        refusal = err;
      } finally {
        for (const bound of udp.values()) if (!(bound instanceof AppError)) bound.closeUnadopted();
      }
      const cluster = this.edge.nodes;
      if (cluster) {
        // a claim no tunnel took (a refusal after it, the agent gone) is given back
        for (const name of claimed.names) void cluster.release(name);
        for (const id of claimed.members.values()) void cluster.dropMember(id).catch((err) => log.warn("cluster pool member not given back", { err: String(err) }));
        // tcp, udp and private tunnels and pool members (new, or taken back from grace) are in the shared list before the agent hears READY, as http ones are (claimed)
        const rows = this.ready ? this.edge.registry.sessionTunnels(this.sessionId).filter((t) => t.port !== undefined || t.pool || t.privateName !== undefined) : [];
        await Promise.all(rows.map((t) => cluster.registerRow(t, this.sessionId).catch((err) => log.warn("cluster tunnel row not written", { err: String(err) }))));
      }
      if (refusal) return this.refused(refusal, hello.token);
      if (this.judgeOnceLive && admitted && this.ready) void this.edge.registry.rulesChanged({ userId: admitted.user.id });
      announce?.();
    } catch (err) {
      this.failedHandshake(err);
    } finally {
      judged();
      this.mux.release();
    }
  }

  /**
   * Claims the HELLO's names cluster-wide, in its order: a name another node
   * holds is SUBDOMAIN_TAKEN, for that tunnel (partial) or the whole HELLO.
   * A pooled http tunnel joins its pool over every node, as a member whose
   * id is chosen here. Returns the names claimed and the members joined.
   */
  private async claim(cluster: OtherNodes, hello: Hello, admitted: Admitted): Promise<Claimed> {
    const claimed: string[] = [];
    const members = new Map<number, string>();
    const giveBack = async () => {
      for (const name of claimed) await cluster.release(name);
      for (const id of members.values()) await cluster.dropMember(id);
    };
    const owner = { userId: admitted.user.id, username: admitted.user.username, tokenId: admitted.token.id };
    for (const [i, plan] of admitted.tunnels.entries()) {
      if (plan instanceof AppError || (plan.protocol !== "http" && plan.protocol !== "tls")) continue;
      const asked = hello.tunnels[i];
      // what another node relaying to it needs; its access rules are applied here, where they live (cluster/relay.ts)
      const serving = {
        skipWarning: plan.protocol === "http" && plan.skipWarning,
        responseTimeoutMs: asked?.protocol === "http" ? this.responseTimeout(asked.responseTimeout) : undefined,
        protocol: plan.protocol,
      };
      // the first name's row is the tunnel's; a hostname beside a subdomain is its twin (cluster.ts)
      const names = [plan.subdomain, plan.hostname].filter((n): n is string => n !== undefined);
      if (plan.protocol === "http" && plan.pool) {
        const id = crypto.randomUUID();
        const lost = await cluster.joinPool(names, id, owner, this.sessionId, { ...serving, pool: plan.pool });
        if (lost === undefined) {
          members.set(i, id);
          continue;
        }
        const taken = lost === plan.hostname ? new AppError("HOSTNAME_IN_USE", `'${lost}' is in use by another tunnel`) : new AppError("SUBDOMAIN_TAKEN", `'${lost}' is in use by another tunnel`);
        if (!hello.partial) {
          await giveBack();
          throw taken;
        }
        admitted.tunnels[i] = taken;
        continue;
      }
      const won: string[] = [];
      for (const name of names) {
        const twin = name !== names[0];
        if (!(await cluster.claim(name, owner, this.sessionId, admitted.resume, { ...serving, twin, ...(!twin && names[1] !== undefined ? { hostname: names[1] } : {}) }))) break;
        won.push(name);
      }
      if (won.length === names.length) {
        claimed.push(...won);
        continue;
      }
      for (const name of won) await cluster.release(name);
      const lost = names[won.length]!;
      const taken = lost === plan.hostname ? new AppError("HOSTNAME_IN_USE", `'${lost}' is in use by another tunnel`) : new AppError("SUBDOMAIN_TAKEN", `'${lost}' is in use by another tunnel`);
      if (!hello.partial) {
        await giveBack();
        throw taken;
      }
      admitted.tunnels[i] = taken;
    }
    const first = admitted.tunnels[0];
    if (admitted.tunnels.every((p) => p instanceof AppError) && first instanceof AppError) throw first;
    return { names: claimed, members };
  }

  /**
   * The UDP ports of the admitted udp tunnels, by their index: bound, or why
   * not. A port held in grace for this token is not bound again (its tunnel
   * is taken back as it is).
   */
  private async bindUdpPorts(admitted: Admitted): Promise<Map<number, UdpTunnelPort | AppError>> {
    const bound = new Map<number, UdpTunnelPort | AppError>();
    for (const [i, plan] of admitted.tunnels.entries()) {
      if (plan instanceof AppError || plan.protocol !== "udp" || plan.private) continue;
      if (this.edge.registry.reclaimable(admitted.token.id, { protocol: "udp", port: plan.port }, admitted.resume)) continue;
      const ports = this.edge.udpPorts;
      if (!ports) {
        bound.set(i, new AppError("UDP_UNAVAILABLE", "this server takes no udp tunnels (--udp-ports off)"));
        continue;
      }
      try {
        bound.set(i, await ports.bind(plan.port));
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        bound.set(i, err);
      }
    }
    return bound;
  }

  private refused(err: AppError, token: string, retryAfterS?: number): void {
    this.handshakeEnded(err.code);
    log.info("agent refused", { code: err.code, reason: err.message, remote: this.transport.remote, address: this.transport.address });
    this.audit(err.code, token);
    this.refuse(err.code, err.message, retryAfterS);
  }

  /**
   * A new http or tls tunnel on its names, checked again against what this
   * node holds now (taken meanwhile by another session, between the rules'
   * answer and now). A pooled http tunnel joins the pool on its name, or
   * starts one; the token's own dropped tunnel gives its hostname to the new
   * one.
   */
  private namedTunnel(
    plan: Extract<PlannedTunnel, { protocol: "http" | "tls" }>,
    owner: { userId: number; username: string; tokenId: number },
    resume: string | undefined,
    memberId: string | undefined,
  ): Tunnel {
    const { registry } = this.edge;
    const names = { ...(plan.subdomain !== undefined ? { subdomain: plan.subdomain } : {}), ...(plan.hostname !== undefined ? { hostname: plan.hostname } : {}) };
    const pooled = plan.protocol === "http" ? plan.pool : undefined;
    const held = registry.tunnelBySubdomain((plan.subdomain ?? plan.hostname)!);
    if (held?.pool && pooled && held.pool.userId === owner.userId && held.hostname === plan.hostname && held.subdomain === plan.subdomain) {
      const member = registry.newTunnel("http", names, owner, plan.protocol === "http" && plan.skipWarning, memberId);
      held.pool.add(member);
      return member;
    }
    if (plan.subdomain !== undefined && registry.subdomainHolder(plan.subdomain)) {
      throw new AppError("SUBDOMAIN_TAKEN", `'${plan.subdomain}' is in use by another tunnel`);
    }
    if (plan.hostname !== undefined) {
      const holder = registry.tunnelBySubdomain(plan.hostname);
      // this token's tunnel, dropped (or in the session this one resumes), gives its hostname to the new one
      const own = holder && !holder.pool && holder.tokenId === owner.tokenId && (holder.agent === null || holder.agent.sessionId === resume);
      if (holder && !own) throw new AppError("HOSTNAME_IN_USE", `'${plan.hostname}' is in use by another tunnel`);
      if (holder) registry.remove(holder);
    }
    const t = plan.protocol === "http" ? registry.newTunnel("http", names, owner, plan.skipWarning, pooled ? memberId : undefined) : registry.newTunnel("tls", names, owner, false);
    if (pooled) new TunnelPool<Tunnel>(pooled, owner.userId).add(t);
    return t;
  }

  /** A tcp tunnel on its port: a pooled one joins the user's pool on the port asked, or starts one. */
  private portTunnel(plan: Extract<PlannedTunnel, { protocol: "tcp" }>, owner: { userId: number; username: string; tokenId: number }): Tunnel {
    const { registry, ports } = this.edge;
    const held = plan.port !== undefined ? registry.portHolder(plan.port) : undefined;
    if (held?.pool && plan.pool && held.pool.userId === owner.userId) {
      const member = registry.newTunnel("tcp", { port: plan.port }, owner, false);
      held.pool.add(member);
      member.stopAccepting = held.stopAccepting;
      return member;
    }
    return ports.bind(plan.port, (port) => {
      const t = registry.newTunnel("tcp", { port }, owner, false);
      if (plan.pool) new TunnelPool<Tunnel>(plan.pool, owner.userId).add(t);
      return t;
    });
  }

  /** A udp tunnel on the port bound for it (bindUdpPorts), or that port's refusal. */
  private adoptUdpPort(bound: UdpTunnelPort | AppError | undefined, owner: { userId: number; username: string; tokenId: number }): Tunnel {
    if (bound instanceof AppError) throw bound;
    // its port was held in grace when bound, and has been let go since: the agent asks again
    if (!bound) throw new AppError("PORT_UNAVAILABLE", "the UDP port was let go during the handshake; try again");
    return bound.adopt(this.edge.registry.newTunnel("udp", { port: bound.port }, owner, false));
  }

  /** Where visitors reach a tunnel, as READY names it. */
  private publicAddress(t: Tunnel): string {
    if (t.privateName !== undefined) return `${t.username}/${t.privateName}`;
    switch (t.protocol) {
      // a custom hostname is what its owner asked to be reached by: the address said is its
      case "http":
        return this.edge.httpUrl(t.hostname ?? t.subdomain!);
      case "tls":
        return this.edge.tlsAddress(t.hostname ?? t.subdomain!)!;
      case "udp":
        return this.edge.udpAddress(t.port!);
      case "tcp":
        return this.edge.tcpAddress(t.port!);
    }
  }

  /** Opens the granted tunnels; returns what sends READY, or undefined when the HELLO was refused. */
  /**
   * The admission asked again while an admin change that concerns it was
   * heard since `mark` (before admission read the state): the same rules
   * as a live session's (core/live-admission.ts), a few rounds at most;
   * what still comes after them is judged once the tunnels are live, as
   * for any live session. Throws the refusal of the whole HELLO.
   */
  private async judgedAgain(hello: Hello, admitted: Admitted, mark: number): Promise<Admitted> {
    const { registry, core, live } = this.edge;
    for (let round = 0; round < REJUDGE_ROUNDS; round++) {
      if (!concerns(registry.changesSince(mark), admitted)) return admitted;
      mark = registry.changeMark();
      admitted = await rejudgeAdmitted(core, live, admitted, hello);
      if (this.mux.closed) return admitted;
    }
    // changes without end: the tunnels open, and are judged once live like any (open() asks)
    this.judgeOnceLive = concerns(registry.changesSince(mark), admitted);
    return admitted;
  }

  /** `memberIds`: the ids of the pool members joined over the cluster (claim), by the HELLO's index. */
  private open(hello: Hello, admitted: Admitted, providers: Providers | undefined, udp: Map<number, UdpTunnelPort | AppError>, memberIds: Map<number, string>): (() => void) | undefined {
    const { registry, ports, core } = this.edge;
    const created: Tunnel[] = [];
    try {
      this.userId = admitted.user.id;
      this.tokenId = admitted.token.id;
      const owner = { userId: admitted.user.id, username: admitted.user.username, tokenId: admitted.token.id };
      const refused: { index: number; error: AppError }[] = [];
      const indexes: number[] = [];
      const tunnels: Tunnel[] = [];
      admitted.tunnels.forEach((plan, i) => {
        if (plan instanceof AppError) return void refused.push({ index: i, error: plan });
        if (plan.protocol === "tls" && this.edge.tlsAddress((plan.hostname ?? plan.subdomain)!) === undefined) {
          const unavailable = new AppError("TLS_UNAVAILABLE", "this server passes no TLS through by name (no TLS on its public port, no --tls-port)");
          if (!hello.partial) throw unavailable;
          return void refused.push({ index: i, error: unavailable });
        }
        const priv = plan.protocol === "tls" ? undefined : plan.private;
        const byPort = (plan.protocol === "tcp" || plan.protocol === "udp") && !priv;
        const want = priv
          ? { protocol: plan.protocol, private: { userId: owner.userId, name: priv.name } }
          : plan.protocol === "tcp" || plan.protocol === "udp"
            ? { protocol: plan.protocol, port: plan.port }
            : { protocol: plan.protocol, subdomain: plan.subdomain, hostname: plan.hostname };
        const back = registry.reclaimable(owner.tokenId, want, admitted.resume);
        const asked = hello.tunnels[i];
        const timeout = asked?.protocol === "http" ? this.responseTimeout(asked.responseTimeout) : undefined;
        const allowUpgrade = asked?.protocol === "http" && asked.allowUpgrade?.length ? new Set(asked.allowUpgrade.map((u) => u.toLowerCase())) : undefined;
        // what the access rules' log lines name the tunnel by
        const label = priv ? `${owner.username}/${priv.name}` : plan.protocol === "tcp" || plan.protocol === "udp" ? plan.protocol : (plan.subdomain ?? plan.hostname)!;
        const access = tunnelAccess(asked, cidrs(admitted.user.allowCidrs), label, providers, this.edge.basicAuthLimit);
        if (access instanceof AppError) {
          if (!hello.partial) throw access;
          return void refused.push({ index: i, error: access });
        }
        if (back) {
          back.access = access;
          if (priv) sharePrivate(back, priv);
          if (plan.protocol === "http") back.skipWarning = plan.skipWarning;
          back.responseTimeoutMs = timeout;
          back.allowUpgrade = allowUpgrade;
          indexes.push(i);
          return void tunnels.push(back);
        }
        let t: Tunnel;
        try {
          t = priv
            ? sharePrivate(registry.newTunnel(plan.protocol, { private: priv.name }, owner, false), priv)
            : plan.protocol === "http" || plan.protocol === "tls"
              ? this.namedTunnel(plan, owner, admitted.resume, memberIds.get(i))
              : plan.protocol === "udp"
                ? this.adoptUdpPort(udp.get(i), owner)
                : this.portTunnel(plan, owner);
        } catch (err) {
          // a partial HELLO: a port that cannot be bound is this tunnel's refusal, not the session's
          if (!hello.partial || !(err instanceof AppError)) throw err;
          return void refused.push({ index: i, error: err });
        }
        t.responseTimeoutMs = timeout;
        t.allowUpgrade = allowUpgrade;
        t.access = access;
        created.push(t);
        indexes.push(i);
        tunnels.push(t);
      });
      if (tunnels.length === 0 && refused[0]) throw refused[0].error;
      // the session being resumed (same token, half-open connection) gives way to this one
      if (admitted.resume) {
        registry.closeSession(admitted.resume, WireError.SESSION_REPLACED, "a newer connection of this agent took over", true);
      }
      this.ready = true;
      this.countHandshake("READY");
      this.handshakeEnded("READY");
      this.drains = hello.drain;
      this.keeps = hello.keep;
      this.proxy = hello.proxy;
      this.revokes = hello.revoke;
      registry.attach(this, tunnels);
      // a private tunnel declared anew: who may reach it is asked again at each connector's next stream
      if (tunnels.some((t) => t.privateName !== undefined)) registry.judge?.forget();
      // only a handshake that succeeded counts as use
      core.tokens.touch(admitted.token.id).catch((err) => logFailedWrite("token last use not written", { token: admitted.token.id }, err));
      const granted: GrantedTunnel[] = tunnels.map((t, n) => ({
        id: t.id,
        protocol: t.protocol,
        ...(t.port !== undefined ? { port: t.port } : { subdomain: t.subdomain }),
        ...(t.hostname !== undefined ? { hostname: t.hostname } : {}),
        url: this.publicAddress(t),
        ...(hello.partial ? { index: indexes[n] } : {}),
        ...(t.access ? { access: true } : {}),
        ...(t.pool ? { pool: true } : {}),
        ...(t.privateName !== undefined ? { private: { target: `${t.username}/${t.privateName}`, shares: t.shareNames ?? [] } } : {}),
      }));
      return () => {
        this.mux.sendControl(FrameType.READY, {
          session: this.sessionId,
          username: owner.username,
          tunnels: granted,
          ...(hello.partial ? { refused: refused.map((r) => ({ index: r.index, code: r.error.code, message: r.error.message })) } : {}),
        });
        registry.announced(tunnels);
        for (const r of refused) log.info("tunnel refused", { session: this.sessionId, user: owner.username, code: r.error.code, reason: r.error.message });
        log.info("agent connected", {
          session: this.sessionId,
          user: owner.username,
          token: owner.tokenId,
          remote: this.transport.remote,
          transport: this.transport.kind,
          tunnels: granted.map((g) => g.url).join(","),
        });
      };
    } catch (err) {
      for (const t of created) registry.remove(t);
      if (err instanceof AppError) return void this.refused(err, hello.token);
      throw err;
    }
  }
}
