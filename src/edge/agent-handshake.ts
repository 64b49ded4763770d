/**
 * An agent's handshake, from its connection's first frame to READY or the
 * refusal: the HELLO read (after the handshake throttle gives it a place),
 * OIDC issuers discovered for a known token, admission (core/admission.ts)
 * with the names claimed over every node, the admission asked again while
 * admin changes concerning it come (judgedAgain), the tunnels opened
 * (agent-tunnels.ts), then READY; a connector's handshake the same way to
 * its private tunnel. Any refusal is an ERROR frame with a stable code,
 * then close; every result is counted for the metrics and the throttle
 * (handshake-verdict.ts).
 *
 * An agent that arrives by WebSocket and says it can go direct is sent a
 * MOVE naming the direct port instead of READY: it says HELLO again there
 * (or, if that port is out of its reach, here once more without asking).
 */
import * as v from "valibot";
import { admit, admitConnector, type Admitted, type ProvedDevice } from "../core/admission.ts";
import { touchDevice } from "../core/devices.ts";
import { AppError } from "../core/errors.ts";
import { rejudgeAdmitted } from "../core/live-admission.ts";
import { logFailedWrite } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { Hello, type GrantedTunnel } from "../protocol/messages.ts";
import { FrameType, HANDSHAKE_TIMEOUT_MS, PROTOCOL_VERSION, WireError } from "../protocol/wire.ts";
import { discoverProviders, helloIssue, needsDiscovery, type Providers } from "./access/handshake.ts";
import type { AgentSide } from "./agent-context.ts";
import type { AgentStreams } from "./agent-streams.ts";
import type { AgentTunnels, OpenedTunnels } from "./agent-tunnels.ts";
import type { HandshakeGuard } from "./handshake-guard.ts";
import { HandshakeVerdict } from "./handshake-verdict.ts";
import { concerns } from "./live-rules.ts";
import { claimOverNodes, type Claimed } from "./node-claims.ts";
import type { Tunnel } from "./registry.ts";
import type { Prepared } from "./kinds/edge-kind.ts";
import { askAdmissionHook } from "./admission-ask.ts";

/** A connector told TUNNEL_OFFLINE asks again after this (its retry_after). */
const CONNECTOR_RETRY_S = 2;
/** Rounds of asking a handshake's admission again while admin changes concerning it keep coming. */
const REJUDGE_ROUNDS = 3;

export class AgentHandshake {
  /** Admin changes concerning the handshake kept coming while it was judged again: its tunnels are judged once live. */
  private judgeOnceLive = false;
  private readonly timer: ReturnType<typeof setTimeout>;
  /** How its result is counted, given to the throttle, audited and told. */
  private readonly verdict: HandshakeVerdict;

  constructor(
    private readonly side: AgentSide,
    private readonly tunnels: AgentTunnels,
    private readonly streams: AgentStreams,
  ) {
    this.verdict = new HandshakeVerdict(side);
    this.timer = setTimeout(() => {
      if (side.isReady) return;
      this.verdict.audit(WireError.HANDSHAKE_TIMEOUT);
      side.refuse(WireError.HANDSHAKE_TIMEOUT, `no HELLO within ${HANDSHAKE_TIMEOUT_MS / 1000} s`);
    }, HANDSHAKE_TIMEOUT_MS);
  }

  /** The device the connection itself proved (an SSH key), which its HELLO is admitted as instead of its token. */
  private get proved(): ProvedDevice | undefined {
    const key = this.side.transport.sshKey;
    return key === undefined ? undefined : { sshKey: key };
  }

  /** Who a HELLO speaks for, before the rules judge it: its token's user, or its key's; undefined when it has neither. */
  private async userOf(hello: Hello): Promise<{ id: number } | undefined> {
    const { core } = this.side.edge;
    if (!this.proved) return (await core.tokens.identify(hello.token))?.user;
    const key = await core.sshKeys.get(this.proved.sshKey).catch((err) => (err instanceof AppError ? undefined : Promise.reject(err)));
    return key && { id: key.userId };
  }

  /** No HELLO is awaited any more (it came, or the connection is refused or closed). */
  stopTimer(): void {
    clearTimeout(this.timer);
  }

  /** The agent's HELLO frame. */
  received(payload: Uint8Array): void {
    if (this.side.isReady) throw new ProtocolError("HELLO after READY");
    this.verdict.helloSeen = true;
    // what the agent sends after its HELLO waits until READY (or the refusal) has gone out
    this.side.mux.hold();
    const guard = this.side.edge.handshakes;
    if (guard) return void this.helloInTurn(guard, payload);
    return this.helloNow(payload);
  }

  /** The mux closed with `code`: what that means for a handshake not yet over. */
  muxClosed(code: string): void {
    this.verdict.muxClosed(code);
  }

  /** The connection closed (either side). */
  closed(): void {
    this.verdict.closed();
    this.stopTimer();
  }

  /**
   * A HELLO once the handshake throttle gives it a place: a throttled
   * address is turned away before its HELLO is parsed or its token looked
   * up; the others wait while the address's handshakes in flight take its
   * allowance (each counts as a failure until it is judged).
   */
  private async helloInTurn(guard: HandshakeGuard, payload: Uint8Array): Promise<void> {
    const turn = await guard.reserve(this.side.transport.address);
    if (turn.refusal) {
      this.verdict.audit(turn.refusal.code);
      return this.side.refuse(turn.refusal.code, turn.refusal.message, Number(turn.refusal.headers["Retry-After"]));
    }
    if (this.side.mux.closed) return turn.ticket[Symbol.dispose]();
    this.verdict.hold(turn.ticket);
    try {
      this.helloNow(payload);
    } catch (err) {
      if (err instanceof ProtocolError) return this.side.refuse(WireError.PROTOCOL_ERROR, err.message);
      this.verdict.failed(err);
    }
  }

  private helloNow(payload: Uint8Array): void {
    try {
      return this.hello(parseJsonPayload(payload, "HELLO"));
    } catch (err) {
      // a HELLO that is not JSON or not a Hello counts as a failed handshake (PROTOCOL_ERROR is sent)
      if (err instanceof ProtocolError) {
        this.verdict.ended(WireError.PROTOCOL_ERROR);
        this.verdict.audit(WireError.PROTOCOL_ERROR);
      }
      throw err;
    }
  }

  /**
   * A HELLO with OIDC tunnels: its issuers answer discovery first, and only
   * once its token is known good, so a stranger cannot make the edge fetch
   * anything. Then the HELLO goes on as any other, with what they answered.
   */
  private async discoverThenHello(raw: unknown, tunnels: Hello["tunnels"]): Promise<void> {
    const judged = this.verdict.judge();
    const { edge, mux } = this.side;
    try {
      let providers: Providers = new Map();
      try {
        // who is asking, before anything is fetched for them (tunnel by tunnel comes after discovery)
        await admit(edge.core, { token: (raw as Hello).token, proxy: false, tunnels: [], partial: true }, edge.live, this.proved);
        providers = await discoverProviders(tunnels, edge.oidcHttpIssuers ?? false);
      } catch (err) {
        if (!(err instanceof AppError)) throw err; // a refusal: hello() below meets it again and refuses as always
        this.verdict.ended(err.code); // the token's verdict, for the throttle, even if the agent has gone
      }
      if (!mux.closed) this.hello(raw, providers);
    } catch (err) {
      if (err instanceof ProtocolError) return this.side.refuse(WireError.PROTOCOL_ERROR, err.message);
      this.verdict.failed(err);
    } finally {
      judged();
    }
  }

  private hello(raw: unknown, providers?: Providers): void {
    const parsed = v.safeParse(Hello, raw);
    if (!parsed.success) throw new ProtocolError(`bad HELLO: ${helloIssue(parsed.issues)}`);
    const hello = parsed.output;
    const { side } = this;
    this.stopTimer();
    if (hello.version !== PROTOCOL_VERSION) {
      this.verdict.audit(WireError.VERSION_MISMATCH, hello.token);
      return side.refuse(
        WireError.VERSION_MISMATCH,
        `this server speaks protocol version ${PROTOCOL_VERSION}, the agent ${hello.version}: please update burrow on the ${hello.version < PROTOCOL_VERSION ? "client" : "server"} (burrow update)`,
      );
    }
    const directPort = side.edge.directPort?.();
    if (hello.direct && side.transport.kind === "websocket" && directPort !== undefined) {
      // nothing is admitted here: the agent says the same HELLO on the direct port
      this.verdict.succeeded("MOVE");
      side.mux.sendControl(FrameType.MOVE, { port: directPort });
      side.mux.close(WireError.GOING_AWAY, "moved to the direct port");
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
    const judged = this.verdict.judge();
    const { side } = this;
    const { edge } = side;
    try {
      let admitted: Awaited<ReturnType<typeof admitConnector>>;
      try {
        admitted = await admitConnector(edge.core, { token: hello.token, proxy: hello.proxy, target }, this.proved);
      } catch (err) {
        if (err instanceof AppError) return this.verdict.refused(err, hello.token);
        throw err;
      }
      const { user, token, owner, declared } = admitted;
      const label = `${owner.username}/${declared.name}`;
      const here = edge.registry.privateTunnel(owner.id, declared.name);
      const elsewhere = here?.agent ? undefined : await edge.nodes?.privateElsewhere(owner.id, declared.name).catch(() => undefined);
      if (!here?.agent && !elsewhere) return this.verdict.refused(new AppError("TUNNEL_OFFLINE", `${label} is shared with you, but its owner's agent is not connected now`), hello.token, CONNECTOR_RETRY_S);
      if (side.mux.closed) return;
      side.userId = user.id;
      side.tokenId = token.id;
      side.username = user.username;
      side.connectsTo = label;
      side.becameReady({ drain: hello.drain, proxy: hello.proxy, agent: hello.agent, system: hello.system });
      this.verdict.succeeded("READY");
      edge.registry.attach(side, []);
      this.streams.connected(admitted, label, here, elsewhere);
      touchDevice(edge.core, token.id, token.lastUsed === null ? { address: side.transport.address } : undefined).catch((err) => logFailedWrite("token last use not written", { token: token.id }, err));
      void edge.core.audit.record({ action: "private.connect", address: side.transport.address, outcome: "ok", userId: user.id, username: user.username, tokenId: token.id, target: `private:${label}` });
      side.mux.sendControl(FrameType.READY, {
        session: side.sessionId,
        username: user.username,
        tunnels: [],
        connect: { target: label, protocol: declared.protocol, ...(declared.localPort !== null ? { localPort: declared.localPort } : {}) },
      });
      log.info("connector connected", { session: side.sessionId, user: user.username, to: label, remote: side.transport.remote, ...(elsewhere ? { via: "another node" } : {}) });
    } catch (err) {
      this.verdict.failed(err);
    } finally {
      judged();
      side.mux.release();
    }
  }

  /** The rules (core/admission.ts) answer, then the tunnels open and READY goes out, or the refusal. */
  private async admitThenOpen(hello: Hello, providers: Providers | undefined): Promise<void> {
    const { side } = this;
    const { edge, mux } = side;
    // before admission reads the state: an admin change heard after it is judged before the tunnels open
    const mark = edge.registry.changeMark();
    const judged = this.verdict.judge();
    try {
      let admitted: Admitted | undefined;
      let claimed: Claimed = { names: [], members: new Map() };
      const cluster = edge.nodes;
      try {
        const rules = async () => {
          admitted = await admit(edge.core, hello, edge.live, this.proved);
          if (cluster) claimed = await claimOverNodes(cluster, edge, side.sessionId, hello, admitted);
        };
        // several nodes: the user's handshakes are judged one at a time over the cluster
        const user = cluster && (await this.userOf(hello));
        if (cluster && user) await cluster.oneUserAtATime(user.id, rules);
        else await rules();
      } catch (err) {
        if (err instanceof AppError) return this.verdict.refused(err, hello.token);
        throw err;
      }
      // what a kind binds first (a udp port: binding is asynchronous) is bound before the tunnels open, and closed if none adopts it
      const prepared = admitted && !mux.closed ? await this.tunnels.prepare(admitted) : new Map<number, Prepared | AppError>();
      // the agent may have gone while the rules were asked
      let announce: (() => void) | undefined;
      let refusal: AppError | undefined;
      try {
        // the operator's own word (--admission-hook), after the rules and before the tunnels go live
        if (admitted && !mux.closed && edge.admissionHook) {
          const refused = await askAdmissionHook(edge, admitted, side.transport.address);
          if (refused) throw refused;
        }
        if (admitted && !mux.closed) admitted = await this.judgedAgain(hello, admitted, mark);
        // no wait between the last look at the changes heard and the tunnels going live
        announce = !mux.closed && admitted ? this.open(hello, admitted, providers, prepared, claimed.members) : undefined;
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        refusal = err;
      } finally {
        for (const bound of prepared.values()) if (!(bound instanceof AppError)) bound.closeUnadopted();
      }
      if (cluster) {
        // a claim no tunnel took (a refusal after it, the agent gone) is given back
        for (const name of claimed.names) void cluster.release(name);
        for (const id of claimed.members.values()) void cluster.dropMember(id).catch((err) => log.warn("cluster pool member not given back", { err: String(err) }));
        // tcp, udp and private tunnels and pool members (new, or taken back from grace) are in the shared list before the agent hears READY, as http ones are (claimed)
        const rows = side.isReady ? edge.registry.sessionTunnels(side.sessionId).filter((t) => t.port !== undefined || t.pool || t.privateName !== undefined) : [];
        await Promise.all(rows.map((t) => cluster.registerRow(t, side.sessionId).catch((err) => log.warn("cluster tunnel row not written", { err: String(err) }))));
      }
      if (refusal) return this.verdict.refused(refusal, hello.token);
      if (this.judgeOnceLive && admitted && side.isReady) void edge.registry.rulesChanged({ userId: admitted.user.id });
      announce?.();
    } catch (err) {
      this.verdict.failed(err);
    } finally {
      judged();
      mux.release();
    }
  }

  /**
   * The admission asked again while an admin change that concerns it was
   * heard since `mark` (before admission read the state): the same rules
   * as a live session's (core/live-admission.ts), a few rounds at most;
   * what still comes after them is judged once the tunnels are live, as
   * for any live session. Throws the refusal of the whole HELLO.
   */
  private async judgedAgain(hello: Hello, admitted: Admitted, mark: number): Promise<Admitted> {
    const { registry, core, live } = this.side.edge;
    for (let round = 0; round < REJUDGE_ROUNDS; round++) {
      if (!concerns(registry.changesSince(mark), admitted)) return admitted;
      mark = registry.changeMark();
      admitted = await rejudgeAdmitted(core, live, admitted, hello);
      if (this.side.mux.closed) return admitted;
    }
    // changes without end: the tunnels open, and are judged once live like any (admitThenOpen asks)
    this.judgeOnceLive = concerns(registry.changesSince(mark), admitted);
    return admitted;
  }

  /**
   * The granted tunnels open (agent-tunnels.ts) and the session goes live;
   * returns what sends READY, or undefined when the HELLO was refused.
   * `memberIds`: the ids of the pool members joined over the cluster
   * (claimOverNodes), by the HELLO's index.
   */
  private open(hello: Hello, admitted: Admitted, providers: Providers | undefined, prepared: Map<number, Prepared | AppError>, memberIds: Map<number, string>): (() => void) | undefined {
    const { side } = this;
    const { registry, core } = side.edge;
    const created: Tunnel[] = [];
    try {
      side.userId = admitted.user.id;
      side.tokenId = admitted.token.id;
      const owner = { userId: admitted.user.id, username: admitted.user.username, tokenId: admitted.token.id };
      const opened = this.tunnels.open({ hello, admitted, providers, prepared, memberIds, created });
      const { tunnels, refused } = opened;
      if (tunnels.length === 0 && refused[0]) throw refused[0].error;
      // the session being resumed (same token, half-open connection) gives way to this one
      if (admitted.resume) {
        registry.closeSession(admitted.resume, WireError.SESSION_REPLACED, "a newer connection of this agent took over", true);
      }
      side.username = admitted.user.username;
      side.becameReady({
        drain: hello.drain,
        keep: hello.keep,
        proxy: hello.proxy,
        revoke: hello.revoke,
        policyNotes: hello.policy_notes,
        policyPassed: hello.policy_passed,
        derivedNotes: hello.derived_notes,
        typedLogs: hello.typed_logs,
        jsonLogs: hello.json_logs,
        live: hello.live,
        remote: hello.remote,
        agent: hello.agent,
        system: hello.system,
        manage: hello.manage,
      });
      this.verdict.succeeded("READY");
      registry.attach(side, tunnels);
      // a private tunnel declared anew: who may reach it is asked again at each connector's next stream
      if (tunnels.some((t) => t.privateName !== undefined)) registry.judge?.forget();
      // only a handshake that succeeded counts as use
      touchDevice(core, admitted.token.id, admitted.token.lastUsed === null ? { address: side.transport.address } : undefined).catch((err) => logFailedWrite("token last use not written", { token: admitted.token.id }, err));
      const granted = this.tunnels.granted(opened, hello.partial);
      return () => this.announce(hello, owner, opened, granted);
    } catch (err) {
      for (const t of created) registry.remove(t);
      if (err instanceof AppError) return void this.verdict.refused(err, hello.token);
      throw err;
    }
  }

  /** READY with the tunnels granted (and, to a partial HELLO, those refused), then the log lines. */
  private announce(hello: Hello, owner: { username: string; tokenId: number }, opened: OpenedTunnels, granted: GrantedTunnel[]): void {
    const { side } = this;
    side.mux.sendControl(FrameType.READY, {
      session: side.sessionId,
      username: owner.username,
      tunnels: granted,
      ...(hello.partial ? { refused: opened.refused.map((r) => ({ index: r.index, code: r.error.code, message: r.error.message })) } : {}),
      // it may add and remove tunnels on this session from now on (wire.ts ADD, REMOVE)
      ...(hello.live ? { live: true } : {}),
    });
    side.edge.registry.announced(opened.tunnels);
    // an agent that runs its token's remote config hears it now, after READY
    side.sendConfig();
    for (const r of opened.refused) log.info("tunnel refused", { session: side.sessionId, user: owner.username, code: r.error.code, reason: r.error.message });
    log.info("agent connected", {
      session: side.sessionId,
      user: owner.username,
      token: owner.tokenId,
      remote: side.transport.remote,
      transport: side.transport.kind,
      tunnels: granted.map((g) => g.url).join(","),
    });
  }
}
