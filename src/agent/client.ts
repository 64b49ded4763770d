/**
 * The agent: one WebSocket to the edge carrying every stream of its
 * tunnels. It says HELLO, prints what READY grants, serves streams, pings,
 * and on a lost connection retries for ever with backoff and jitter,
 * asking for the same name or port and resuming its session. It stops for
 * good only on a refusal that retrying cannot fix.
 *
 * This file holds the runs and the sessions: the connection, its mux, the
 * waits, stop and retune, and the streams served. Its parts each own their
 * state: what is asked for and granted, with the control frames that
 * change it (client-control.ts); the way to the edge's direct port
 * (client-direct.ts); which refusals end a run (client-retries.ts). What
 * they share is client-context.ts.
 */
import { readOpenMeta } from "../protocol/messages.ts";
import { Mux, type Stream } from "../protocol/mux.ts";
import { CONNECT_PATH, DEAD_AFTER_MS, FrameType, DRAIN_MAX_MS, RESTART_RETRY_FOR_MS, RESTART_RETRY_MS, WireError } from "../protocol/wire.ts";
import { webSocketLink, type Link } from "../sockets/links.ts";
import type { WebSocketOptions } from "../runtime/types.ts";
import type { AgentOptions, AgentTunnel, ClientSide, SessionOutcome, SessionResult, TunnelChange } from "./client-context.ts";
import { applyLive, planChange } from "./client-changes.ts";
import { SessionControl } from "./client-control.ts";
import { DirectRoute } from "./client-direct.ts";
import { backoff, FATAL_CODES, retryAfterDelay, WAIT_AND_RETRY } from "./client-retries.ts";
import type { AgentOutput, TunnelView } from "./output.ts";
import { serveStream } from "./serve-stream.ts";
import { DEFAULT_DRAIN_MS, PoolMembership } from "./rotation.ts";
import { openSocksBridge, type SocksBridge } from "./socks.ts";
import { relayOutput } from "./output-relay.ts";
import { StatusReport } from "./status-report.ts";
import type { AskAction } from "../protocol/messages.ts";

export type { AgentOutput } from "./output.ts";
export type { AgentOptions, AgentTunnel, TunnelChange } from "./client-context.ts";
export { backoff, FATAL_CODES, retryAfterDelay, WAIT_AND_RETRY } from "./client-retries.ts";

/** How long a retune waits for the old connection's close before it connects again regardless. */
const RETUNE_CLOSE_MS = 2_000;

export class Agent {
  private link?: Link;
  private mux?: Mux;
  private stopping = false;
  private wake?: () => void;
  /** Connections the edge said DRAIN on, finishing their streams; closed on stop(). */
  private readonly draining = new Set<Link>();

  /** Pool memberships: health checks, ROTATION, and the leaving of a rolling restart (rotation.ts). */
  private readonly pools: PoolMembership;
  /** The output streams are served with: in-flight streams counted for a pool member's leaving. */
  private readonly served: AgentOutput;
  /** The tunnels asked for and granted, the session to resume, and the control frames that change them (client-control.ts). */
  private readonly control: SessionControl;
  /** The way to the edge's direct port, and what this run learnt of it (client-direct.ts). */
  private readonly direct: DirectRoute;

  /** What the agent says of itself to the server's list of agents (STATUS). */
  private readonly report: StatusReport;
  private readonly opts: AgentOptions;

  constructor(given: AgentOptions) {
    if (given.tunnels.length === 0 && !given.connect && !given.remote) throw new Error("an agent needs at least one tunnel, or a private tunnel to connect to, or the server's remote config");
    // the changes of its tunnels and their refusals are the server's list's too (STATUS)
    const out = relayOutput(given.out, {
      tunnelRefused: (name, code, message) => {
        this.report.noteError(`tunnel '${name}' refused: ${code}: ${message}`);
        given.out.tunnelRefused?.(name, code, message);
      },
      tunnelAdded: (t) => {
        this.report.changed();
        given.out.tunnelAdded?.(t);
      },
      tunnelRemoved: (name) => {
        this.report.changed();
        given.out.tunnelRemoved?.(name);
      },
    });
    const opts = (this.opts = { ...given, out });
    this.wanted = opts.tunnels;
    const health = new Map(opts.tunnels.filter((t) => t.health).map((t) => [t.name, t.health!]));
    this.pools = new PoolMembership(opts.out, health, new Map(opts.tunnels.map((t) => [t.name, t.target])));
    this.served = this.pools.counting(opts.out);
    // the agent as its parts see it: their own methods stay off the Agent's public face
    const agent = this;
    const side: ClientSide = {
      opts,
      get stopping() {
        return agent.stopping;
      },
      get mux() {
        return agent.mux;
      },
      runSession: (link, direct, answerWithinMs) => agent.runSession(link, direct, answerWithinMs),
      connectOnce: () => agent.connectOnce(),
      asked: (action) => agent.asked(action),
    };
    this.control = new SessionControl(side, this.pools);
    this.direct = new DirectRoute(side);
    this.report = new StatusReport(side, () => ({ live: this.control.state.live, tunnels: this.control.views() }));
  }

  /** What the agent runs changed in a way the server's list of agents shows (its remote config's version, say). */
  statusChanged(error?: string): void {
    if (error !== undefined) this.report.noteError(error);
    else this.report.changed();
  }

  private updating = false;

  /** The server's ask (ASK), answered by the agent's own flags (AgentOptions.manage). */
  private asked(action: AskAction): { accepted: boolean; message: string; then?: () => void } {
    const m = this.opts.manage;
    if (!m) return { accepted: false, message: "this agent takes no asks from the server" };
    if (action === "restart") {
      if (!m.restart) return { accepted: false, message: "this agent's --remote-restart is off" };
      return {
        accepted: true,
        message: "connecting again",
        then: () => {
          this.opts.out.notice?.("the server's admin asked this agent to connect again");
          // no GOAWAY: its tunnels' names stay held for it, and the new connection takes them back
          this.endSession?.(false);
        },
      };
    }
    if (!m.update) return { accepted: false, message: "this agent's --remote-update is off" };
    if (this.updating) return { accepted: false, message: "burrow update runs already" };
    this.updating = true;
    return {
      accepted: true,
      message: "running burrow update",
      then: () => {
        this.opts.out.notice?.("the server's admin asked this agent to run burrow update");
        void m
          .runUpdate()
          .then((r) => {
            this.opts.out.notice?.(`burrow update: ${r.message}`);
            if (!r.ok) this.report.noteError(`burrow update failed: ${r.message}`);
          })
          .finally(() => (this.updating = false));
      },
    };
  }

  /** Runs until a fatal refusal (exit code 1) or stop() (exit code 0). */
  async run(): Promise<number> {
    try {
      return await this.runs();
    } finally {
      // what waits for a READY hears that none comes
      this.control.ended();
    }
  }

  private async runs(): Promise<number> {
    let attempt = 0;
    let everReady = false;
    /** Since when the server has been restarting (DRAIN): retries come quickly, not with backoff. */
    let restartingSince: number | undefined;
    for (;;) {
      const { outcome, wasReady } = await this.connectOnce();
      if (wasReady) {
        everReady = true;
        attempt = 0;
        if (outcome.kind !== "draining") restartingSince = undefined;
      }
      if (outcome.kind === "stopped" || this.stopping) return 0;
      if (outcome.kind === "retuned") continue;
      if (outcome.kind === "draining") {
        // straight away: the server that takes over may already listen
        restartingSince = Date.now();
        if (this.opts.out.restarting) this.opts.out.restarting();
        else this.opts.out.notice?.("the server is restarting: connecting again");
        continue;
      }
      if (restartingSince !== undefined && Date.now() - restartingSince < RESTART_RETRY_FOR_MS && outcome.kind === "lost") {
        await this.pause(RESTART_RETRY_MS + Math.round(Math.random() * RESTART_RETRY_MS));
        if (this.stopping) return 0;
        continue;
      }
      const throttled = outcome.kind === "refused" && WAIT_AND_RETRY.has(outcome.code);
      if (outcome.kind === "refused" && !throttled && (FATAL_CODES.has(outcome.code) || !everReady)) {
        this.opts.out.refused(outcome.code, outcome.message);
        return 1;
      }
      if (throttled) this.opts.out.refused(outcome.code, outcome.message); // the sentence says why, and for how long
      const why =
        outcome.kind === "refused"
          ? throttled
            ? outcome.code
            : `${outcome.code}: ${outcome.message}`
          : outcome.kind === "moved"
            ? "the server sent MOVE on its direct port"
            : outcome.why;
      const delay = throttled ? retryAfterDelay(outcome.retryAfterS, attempt++) : backoff(attempt++);
      this.opts.out.reconnecting(why, delay, attempt);
      await this.pause(delay);
      if (this.stopping) return 0;
    }
  }

  /** Ends the session under way on purpose (retune, the server's ask to reconnect), with GOAWAY unless told not to; unset between sessions. */
  private endSession?: (goaway?: boolean) => void;

  /** The change under way (changes are carried out one at a time, in the order asked). */
  private changing: Promise<unknown> = Promise.resolve();
  /** The tunnels asked for last (retune's), which a remote config's agent adds again on each new session. */
  private wanted: AgentTunnel[];

  /**
   * Runs these tunnels instead, by their names (burrow.yml reloaded, the
   * agent API, burrow-agent's sessions, the server's remote config):
   * client-changes.ts. On a session whose READY said `live`, the tunnels
   * that go are given up and the new ones asked for alone, and the others
   * (and their requests in flight) are not touched. On a server that
   * predates it, the connection is closed as stop() closes it, so the
   * server frees at once the names no longer asked for, and a new one asks
   * for the rest (their names and ports as granted) and the new ones. While
   * the connection is down the next HELLO asks for them, at once.
   */
  retune(tunnels: AgentTunnel[]): Promise<TunnelChange> {
    this.wanted = tunnels;
    const change = this.changing.then(() => this.change(tunnels));
    this.changing = change.catch(() => {});
    return change;
  }

  /** The tunnels live on the current session (empty while it is down). */
  liveTunnels(): TunnelView[] {
    return this.control.views();
  }

  private async change(tunnels: AgentTunnel[]): Promise<TunnelChange> {
    const nothing: TunnelChange = { added: [], refused: [], removed: [], pending: [], reconnected: false };
    if (this.stopping) return nothing;
    const plan = planChange(this.control.asked, tunnels, this.control.askedAs);
    const { connected, live } = this.control.state;
    if (connected && live) {
      const done = await applyLive(this.control, plan, this.opts.out);
      this.report.changed();
      return done;
    }
    if (!connected) {
      // no session now: the next HELLO asks for the new list, at once
      this.control.keepAsking(plan.next, plan.come);
      this.wake?.();
      return { ...nothing, pending: plan.come.map((t) => t.name), removed: plan.gone.map((t) => t.name) };
    }
    if (plan.gone.length === 0 && plan.come.length === 0) {
      this.control.keepAsking(plan.next, plan.come);
      return nothing;
    }
    // a server that predates changes on a live session: a new connection asks for the new list
    this.control.ask(plan.next);
    const ended = this.control.nextReady();
    this.endSession?.();
    await ended;
    // the new connection's READY (or its end, or the run's)
    if (!this.stopping) await this.control.nextReady();
    const live_ = new Set(this.control.views().map((v) => v.name));
    return {
      added: this.control.views().filter((v) => plan.come.some((t) => t.name === v.name)),
      refused: plan.come.flatMap((t) => {
        const r = this.control.lastRefused.get(t.name);
        return r && !live_.has(t.name) ? [{ name: t.name, ...r }] : [];
      }),
      removed: plan.gone.map((t) => t.name),
      pending: plan.come.filter((t) => !live_.has(t.name) && !this.control.lastRefused.has(t.name)).map((t) => t.name),
      reconnected: true,
    };
  }

  /** Waits `ms`, or less if stop() comes first. */
  private pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      this.wake = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  /**
   * Leaves on purpose: the server frees the tunnel's name or port at once.
   * A pool member leaves the rotation first and finishes what is in flight
   * (up to the drain timeout), so its pool loses no request.
   */
  stop(): void {
    if (this.stopping) return;
    if (this.pools.pooled && this.mux && !this.mux.closed && !this.leaving) {
      this.leaving = true;
      void this.pools.leave(this.opts.drainTimeoutMs ?? DEFAULT_DRAIN_MS).then(() => this.stopNow());
      return;
    }
    this.stopNow();
  }

  private leaving = false;

  private stopNow(): void {
    this.stopping = true;
    this.report.stop();
    this.pools.stop();
    this.wake?.();
    for (const link of this.draining) link.close();
    if (this.mux && !this.mux.closed && this.link?.isOpen) {
      this.mux.sendControl(FrameType.GOAWAY);
    }
    this.link?.close();
  }

  private async connectOnce(): Promise<SessionResult> {
    const server = new URL(connectUrl(this.opts.server));
    const secure = server.protocol === "wss:";
    // through a proxy the agent goes only where the proxy takes it
    const canGoDirect = this.direct.possible;
    if (canGoDirect) {
      // the direct port the last session had, or the one the edge names on a first connect
      const there = await this.direct.first(server, secure);
      if (there) return there;
    }
    const tls: NonNullable<WebSocketOptions["tls"]> = { rejectUnauthorized: !this.opts.insecure };
    let options: WebSocketOptions & { perMessageDeflate?: boolean } = { perMessageDeflate: false, tls };
    let url = server.toString();
    let bridge: SocksBridge | undefined;
    if (this.opts.proxy?.startsWith("socks5")) {
      try {
        bridge = await openSocksBridge(this.opts.proxy, { host: server.hostname, port: Number(server.port || (secure ? 443 : 80)) });
      } catch (err) {
        return { outcome: { kind: "lost", why: `SOCKS proxy: ${(err as Error).message}` }, wasReady: false };
      }
      // the WebSocket goes to the bridge but names the real server
      url = `${server.protocol}//${bridge.address}${server.pathname}`;
      options = { ...options, headers: { host: server.host } };
      tls.serverName = server.hostname;
    } else if (this.opts.proxy) {
      options.proxy = this.opts.proxy;
    }
    let result: SessionResult;
    try {
      result = await this.runSession(webSocketLink(url, options), canGoDirect);
    } catch (err) {
      return { outcome: { kind: "lost", why: (err as Error).message }, wasReady: false };
    } finally {
      bridge?.close();
    }
    if (result.outcome.kind !== "moved") return result;
    if (!canGoDirect) {
      // following it would be the same WebSocket, the same MOVE, again and again, with no backoff
      return { outcome: { kind: "refused", code: WireError.PROTOCOL_ERROR, message: "MOVE to an agent that did not ask to go direct" }, wasReady: false };
    }
    return this.direct.go(server, secure, result.outcome.port);
  }

  /** `answerWithinMs`: without READY or ERROR by then, the session is lost (a port that takes connections and says nothing). */
  private runSession(link: Link, direct: boolean, answerWithinMs?: number): Promise<SessionResult> {
    this.link = link;
    return new Promise((resolve) => {
      let wasReady = false;
      let settled = false;
      /** DRAIN came: the run goes on with a new connection, this one only finishes its streams. */
      let detached = false;
      /** retune() ended it: the run goes on with a new connection at once. */
      let retuning = false;
      const finish = (o: SessionOutcome) => {
        if (detached) {
          this.draining.delete(link);
          mux.close();
          return;
        }
        if (settled) return;
        settled = true;
        this.control.ended();
        this.endSession = undefined;
        clearTimeout(connectTimer);
        clearTimeout(answerTimer);
        mux.close();
        resolve({ outcome: this.stopping ? { kind: "stopped" } : retuning ? { kind: "retuned" } : o, wasReady });
      };
      const mux = new Mux({
        role: "agent",
        batchWrites: true,
        maxDataPayload: link.maxDataPayload,
        send: (frames) => link.send(frames),
        onStream: (stream) => this.serve(stream),
        onControl: (type, payload) => {
          if (type === FrameType.DRAIN && wasReady && !settled) return detach();
          this.control.receive(type, payload, finish, () => {
            wasReady = true;
            this.report.changed();
            // the remote config's agent said HELLO with no tunnel: what it ran comes back on this session, alone each
            if (this.opts.remote) void this.retune(this.wanted);
          });
        },
        onClose: (code, message) => {
          if (code === WireError.PROTOCOL_ERROR) finish({ kind: "refused", code, message, ours: true });
          if (code === WireError.KEEPALIVE_TIMEOUT) {
            finish({ kind: "lost", why: `no answer from the server for ${DEAD_AFTER_MS / 1000} s` });
            // a peer that does not answer would not answer a closing handshake either
            return link.terminate();
          }
          link.close();
        },
        onPong: (ms) => this.opts.out.latency?.(ms),
      });
      this.mux = mux;
      this.endSession = (goaway = true) => {
        this.endSession = undefined;
        retuning = true;
        if (!link.isOpen) return finish({ kind: "retuned" });
        // as stop() leaves: GOAWAY, then the close, whose end finishes the session
        if (goaway) mux.sendControl(FrameType.GOAWAY);
        link.close();
        setTimeout(() => finish({ kind: "retuned" }), RETUNE_CLOSE_MS).unref?.();
      };
      const detach = () => {
        this.endSession = undefined;
        settled = true;
        this.control.ended();
        detached = true;
        clearTimeout(answerTimer);
        this.draining.add(link);
        // the edge closes it when its streams are done; should it not, the agent does
        setTimeout(() => link.close(), DRAIN_MAX_MS).unref();
        resolve({ outcome: { kind: "draining" }, wasReady });
      };
      // a connection that does not open (packets dropped on the way) is given up as a silent one is
      const connectTimer = link.isOpen
        ? undefined
        : setTimeout(() => {
            finish({ kind: "lost", why: `no connection to the server within ${DEAD_AFTER_MS / 1000} s` });
            link.terminate();
          }, DEAD_AFTER_MS);
      const answerTimer =
        answerWithinMs === undefined
          ? undefined
          : setTimeout(() => {
              if (wasReady) return;
              finish({ kind: "lost", why: `no answer within ${answerWithinMs / 1000} s` });
              link.close();
            }, answerWithinMs);

      link.onOpen = () => {
        clearTimeout(connectTimer);
        mux.keepAlive();
        mux.sendControl(FrameType.HELLO, this.control.hello(direct));
      };
      link.onMessage = (frames) => mux.receive(frames);
      link.onFrame = (piece) => mux.receiveFrame(piece);
      link.onBadFrames = (message) => mux.fail(WireError.PROTOCOL_ERROR, message);
      link.onDrain = () => mux.drained();
      link.onClose = (why) => finish({ kind: "lost", why });
      if (link.isOpen) link.onOpen();
    });
  }

  /** A connector's local connection: a stream to the private tunnel it reaches; undefined while not connected. */
  openConnectStream(remote: string, kind: "tcp" | "udp" = "tcp"): Stream | undefined {
    if (!this.mux || this.mux.closed || !this.control.session) return undefined;
    try {
      return this.mux.open({ tunnel: "connect", kind, remote });
    } catch {
      return undefined; // too many streams, or the connection closing: this local connection is closed
    }
  }

  private serve(stream: Stream): void {
    const meta = readOpenMeta(stream.meta);
    if (!meta) return stream.reset(WireError.PROTOCOL_ERROR);
    const tunnel = this.control.tunnelFor(meta.tunnel);
    if (!tunnel) return stream.reset(WireError.PROTOCOL_ERROR);
    serveStream(stream, meta, tunnel, this.served, this.opts.inspector);
  }
}

export function connectUrl(server: string): string {
  const u = new URL(server);
  u.protocol = u.protocol === "https:" || u.protocol === "wss:" ? "wss:" : "ws:";
  u.pathname = CONNECT_PATH;
  u.search = "";
  return u.toString();
}
