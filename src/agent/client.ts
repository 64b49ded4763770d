/**
 * The agent: one WebSocket to the edge carrying every stream of its
 * tunnels. It says HELLO, prints what READY grants, serves streams, pings,
 * and on a lost connection retries for ever with backoff and jitter,
 * asking for the same name or port and resuming its session. It stops for
 * good only on a refusal that retrying cannot fix.
 */
import * as v from "valibot";
import { parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { isNamedKind } from "../protocol/kinds.ts";
import { Move, readOpenMeta, Ready, Refusal, Revoke, type TunnelRequest } from "../protocol/messages.ts";
import { Mux, type Stream } from "../protocol/mux.ts";
import {
  CONNECT_PATH,
  DEAD_AFTER_MS,
  FrameType,
  PROTOCOL_VERSION,
  DRAIN_MAX_MS,
  RECONNECT_BASE_MS,
  RECONNECT_MAX_MS,
  RESTART_RETRY_FOR_MS,
  RESTART_RETRY_MS,
  WireError,
  type FrameTypeValue,
} from "../protocol/wire.ts";
import { VERSION } from "../version.ts";
import { ACCESS_UNSUPPORTED, unenforcedAccess } from "./access.ts";
import { localAuthority, type LocalTarget } from "./local-target.ts";
import { directLink, webSocketLink, type Link } from "../sockets/links.ts";
import type { WebSocketOptions } from "../runtime/types.ts";
import { askDirectPort } from "./direct-port.ts";
import type { AgentOutput, TunnelView } from "./output.ts";
import type { RequestTaps } from "./inspector/tap.ts";
import { serveStream } from "./serve-stream.ts";
import type { HealthSettings } from "./health.ts";
import { DEFAULT_DRAIN_MS, PoolMembership } from "./rotation.ts";
import { openSocksBridge, type SocksBridge } from "./socks.ts";

export type { AgentOutput } from "./output.ts";

/** Refusals that no retry can fix: the agent exits. */
export const FATAL_CODES = new Set([
  "AUTH_FAILED",
  "TOKEN_DISABLED",
  "USER_DISABLED",
  "PROTOCOL_DENIED",
  "PROXY_DENIED",
  "TRAFFIC_EXCEEDED",
  "SUBDOMAIN_INVALID",
  "SUBDOMAIN_RESERVED",
  // a hostname the user does not hold (verified) now: an admin registers it, not a retry
  "HOSTNAME_NOT_ALLOWED",
  "VERSION_MISMATCH",
  WireError.SESSION_REPLACED,
  WireError.PROTOCOL_ERROR,
  // a tunnel's access settings: the same HELLO would be refused again
  "CIDR_INVALID",
  "BASIC_AUTH_INVALID",
  "HEADER_RULE_INVALID",
  "OIDC_INVALID",
  "AUTH_REQUIRED",
  ACCESS_UNSUPPORTED,
  // private tunnels: their owner's declaration, or a connector not shared with
  "PRIVATE_NAME_INVALID",
  "SHARE_UNKNOWN_USER",
  "SHARE_DENIED",
  "NOT_SHARED",
]);

/**
 * Refusals for a while, not for good: the server turned this address away
 * (too many failed handshakes from it, maybe not ours), or its database is
 * down or read-only. Not fatal, even on a first connect: the agent says so,
 * waits what the refusal's retry_after asks (bounded) and tries again;
 * sooner would only be refused again, and giving up would leave a good
 * agent down because of someone else on its address or an outage.
 */
const THROTTLED = "RATE_LIMITED";
export const WAIT_AND_RETRY = new Set([THROTTLED, "DATABASE_UNAVAILABLE", "TUNNEL_OFFLINE"]);
/** The longest wait a server's retry_after can impose; past it the agent tries anyway. */
const MAX_RETRY_AFTER_S = 3600;

/** How long a retune waits for the old connection's close before it connects again regardless. */
const RETUNE_CLOSE_MS = 2_000;
/** How long the agent tries the edge's direct port before it stays on the WebSocket. */
const DIRECT_CONNECT_TIMEOUT_MS = 3_000;
/** How long the agent waits for READY (or a refusal) on the direct port before it stays on the WebSocket. */
const DIRECT_ANSWER_TIMEOUT_MS = 5_000;

/** One tunnel the agent keeps open: what to ask the edge for, and where its streams go. */
export interface AgentTunnel {
  /** The user's name for it (a burrow.yml key; "http" or "tcp" for the one-tunnel commands). */
  name: string;
  request: TunnelRequest;
  target: LocalTarget;
  /** Its HTTP requests go to the inspector (when there is one). */
  inspect?: boolean;
  /** A pool member's health check (--health-check): out of the pool's rotation while it fails. */
  health?: HealthSettings;
}

export interface AgentOptions {
  server: string;
  token: string;
  /** At least one, at most 16 (HELLO's limit); all asked for in one HELLO, over one connection. None for a connector. */
  tunnels: AgentTunnel[];
  /**
   * `burrow connect owner/name`: this agent reaches a private tunnel instead
   * of opening tunnels; `ready` is told what it reaches at each READY, and
   * openConnectStream() carries a local connection there.
   */
  connect?: { target: string; ready(c: NonNullable<Ready["connect"]>): void };
  proxy?: string;
  /** How long a stopping pool member waits for what is in flight before it disconnects (--drain-timeout). */
  drainTimeoutMs?: number;
  insecure?: boolean;
  out: AgentOutput;
  /** The request inspector's capture, when it runs. */
  inspector?: RequestTaps;
}

type Outcome =
  /** `ours`: the agent found the server's bytes malformed (PROTOCOL_ERROR); otherwise an ERROR frame said so. */
  | { kind: "refused"; code: string; message: string; ours?: boolean; retryAfterS?: number }
  | { kind: "lost"; why: string }
  | { kind: "stopped" }
  /** The edge sent MOVE: say HELLO again on its direct port. */
  | { kind: "moved"; port: number }
  /** The edge sent DRAIN: connect again now; the old connection finishes its streams meanwhile. */
  | { kind: "draining" }
  /** retune(): the tunnels asked for changed; connect again now and ask for them. */
  | { kind: "retuned" };

export class Agent {
  private link?: Link;
  private mux?: Mux;
  /** The direct port could not be reached once: this run of the agent stays on the WebSocket. */
  private directUnreachable = false;
  /** The direct port that admitted the last session: reconnects try it first. */
  private knownDirectPort?: number;
  /** The edge was asked where its direct port is (once a run: an older edge has no answer). */
  private askedDirectPort = false;
  private session?: string;
  private stopping = false;
  private wake?: () => void;
  /** Connections the edge said DRAIN on, finishing their streams; closed on stop(). */
  private readonly draining = new Set<Link>();
  /**
   * The tunnels still asked for, each with what to ask on reconnect: the
   * name or port the server gave last time. A tunnel the server refused on
   * its own (burrow start) leaves this list.
   */
  private tunnels: AgentTunnel[];
  /** The granted tunnels of the current session, by the edge's id (OPEN names it). */
  private live = new Map<string, TunnelView>();

  /** Pool memberships: health checks, ROTATION, and the leaving of a rolling restart (rotation.ts). */
  private readonly pools: PoolMembership;
  /** The output streams are served with: in-flight streams counted for a pool member's leaving. */
  private readonly served: AgentOutput;

  constructor(private readonly opts: AgentOptions) {
    if (opts.tunnels.length === 0 && !opts.connect) throw new Error("an agent needs at least one tunnel, or a private tunnel to connect to");
    this.tunnels = opts.tunnels.map((t) => ({ ...t, request: { ...t.request } }));
    const health = new Map(opts.tunnels.filter((t) => t.health).map((t) => [t.name, t.health!]));
    this.pools = new PoolMembership(opts.out, health, new Map(opts.tunnels.map((t) => [t.name, t.target])));
    this.served = this.pools.counting(opts.out);
  }

  /** Runs until a fatal refusal (exit code 1) or stop() (exit code 0). */
  async run(): Promise<number> {
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

  /** Ends the session under way on purpose (retune); unset between sessions. */
  private endSession?: () => void;

  /**
   * Asks for these tunnels instead (burrow-agent's sessions, which add and
   * close tunnels as a program asks): the connection is closed as stop()
   * closes it, so the server frees at once the names no longer asked for,
   * and a new one asks for the rest (their names and ports as granted) and
   * the new ones. A wait between tries ends at once.
   */
  retune(tunnels: AgentTunnel[]): void {
    if (this.stopping) return;
    this.tunnels = tunnels.map((t) => ({ ...t, request: { ...t.request } }));
    // not a resume: the old session's names are freed by its GOAWAY, not handed over in grace
    this.session = undefined;
    if (this.endSession) this.endSession();
    else this.wake?.();
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
    this.pools.stop();
    this.wake?.();
    for (const link of this.draining) link.close();
    if (this.mux && !this.mux.closed && this.link?.isOpen) {
      this.mux.sendControl(FrameType.GOAWAY);
    }
    this.link?.close();
  }

  private async connectOnce(): Promise<{ outcome: Outcome; wasReady: boolean }> {
    const server = new URL(connectUrl(this.opts.server));
    const secure = server.protocol === "wss:";
    // through a proxy the agent goes only where the proxy takes it
    const canGoDirect = !this.opts.proxy && !this.directUnreachable;
    if (canGoDirect && this.knownDirectPort !== undefined) {
      // a reconnect: straight to the direct port that admitted the last session, one connection
      // instead of a WebSocket and a MOVE first; if that fails, the WebSocket asks afresh
      const again = await this.reconnectDirect(server, secure, this.knownDirectPort);
      if (again) return again;
    }
    if (canGoDirect && !this.askedDirectPort) {
      // a first connect: ask where the direct port is, and go there instead of a WebSocket and a MOVE
      this.askedDirectPort = true;
      const port = await askDirectPort(server, this.opts.insecure);
      if (this.stopping) return { outcome: { kind: "stopped" }, wasReady: false };
      if (port !== undefined) return this.goDirect(server, secure, port);
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
    let result: { outcome: Outcome; wasReady: boolean };
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
    return this.goDirect(server, secure, result.outcome.port);
  }

  /** A session on the direct port the edge named (MOVE, or its answer to askDirectPort); the WebSocket when that does not work out. */
  private async goDirect(server: URL, secure: boolean, port: number): Promise<{ outcome: Outcome; wasReady: boolean }> {
    const link = await this.openDirect(server, secure, port);
    if (this.stopping) return { outcome: { kind: "stopped" }, wasReady: false };
    // a firewall in the way, most often: the WebSocket, which goes wherever HTTP goes, carries the session
    if (typeof link === "string") return this.stayOnWebSocket(port, link);
    const direct = await this.runSession(link, true, DIRECT_ANSWER_TIMEOUT_MS);
    const o = direct.outcome;
    if (direct.wasReady) this.knownDirectPort = port;
    if (direct.wasReady || this.stopping) return direct;
    // the port took the connection, but no edge answered HELLO there (another service, a middlebox
    // that lets connections in and nothing through): retrying would only be sent there again
    if (o.kind === "lost") return this.stayOnWebSocket(port, `${o.why} before READY`);
    if (o.kind === "refused" && o.ours) return this.stayOnWebSocket(port, `what answers there is not a burrow server: ${o.message}`);
    return direct;
  }

  /** A link to the edge's direct port, or why there is none (Ctrl-C meanwhile closes it again). */
  private async openDirect(server: URL, secure: boolean, port: number): Promise<Link | string> {
    const host = server.hostname.replace(/^\[|\]$/g, "");
    try {
      const link = await directLink({
        host,
        port,
        tls: secure ? { rejectUnauthorized: !this.opts.insecure, serverName: host } : undefined,
        timeoutMs: DIRECT_CONNECT_TIMEOUT_MS,
      });
      if (this.stopping) link.close();
      return link;
    } catch (err) {
      return (err as Error).message;
    }
  }

  /**
   * A session on the direct port remembered from before, or undefined when
   * that did not work out (the server restarted with another port, say):
   * then it is forgotten and the WebSocket asks as on a first connect. A
   * refusal from the server itself (AUTH_FAILED...) is the outcome as is.
   */
  private async reconnectDirect(server: URL, secure: boolean, port: number): Promise<{ outcome: Outcome; wasReady: boolean } | undefined> {
    const link = await this.openDirect(server, secure, port);
    if (this.stopping) return { outcome: { kind: "stopped" }, wasReady: false };
    if (typeof link !== "string") {
      const r = await this.runSession(link, true, DIRECT_ANSWER_TIMEOUT_MS);
      const o = r.outcome;
      if (r.wasReady || this.stopping) return r;
      if (o.kind === "refused" && !o.ours) return r;
    }
    this.knownDirectPort = undefined;
    return undefined;
  }

  /** The direct port did not work out: this run of the agent uses the WebSocket, starting now. */
  private stayOnWebSocket(port: number, why: string): Promise<{ outcome: Outcome; wasReady: boolean }> {
    this.directUnreachable = true;
    this.opts.out.notice?.(`the server's direct port ${port} is out of reach (${why}); staying on the WebSocket`);
    return this.connectOnce();
  }

  /** `answerWithinMs`: without READY or ERROR by then, the session is lost (a port that takes connections and says nothing). */
  private runSession(link: Link, direct: boolean, answerWithinMs?: number): Promise<{ outcome: Outcome; wasReady: boolean }> {
    this.link = link;
    return new Promise((resolve) => {
      let wasReady = false;
      let settled = false;
      /** DRAIN came: the run goes on with a new connection, this one only finishes its streams. */
      let detached = false;
      /** retune() ended it: the run goes on with a new connection at once. */
      let retuning = false;
      const finish = (o: Outcome) => {
        if (detached) {
          this.draining.delete(link);
          mux.close();
          return;
        }
        if (settled) return;
        settled = true;
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
          this.control(type, payload, finish, () => (wasReady = true));
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
      this.endSession = () => {
        this.endSession = undefined;
        retuning = true;
        if (!link.isOpen) return finish({ kind: "retuned" });
        // as stop() leaves: GOAWAY, then the close, whose end finishes the session
        mux.sendControl(FrameType.GOAWAY);
        link.close();
        setTimeout(() => finish({ kind: "retuned" }), RETUNE_CLOSE_MS).unref?.();
      };
      const detach = () => {
        this.endSession = undefined;
        settled = true;
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
        mux.sendControl(FrameType.HELLO, {
          version: PROTOCOL_VERSION,
          token: this.opts.token,
          tunnels: this.tunnels.map((t) => t.request),
          ...(this.opts.connect ? { connect: { target: this.opts.connect.target } } : {}),
          // several tunnels: the edge grants those it can and names the refused ones in READY
          partial: this.tunnels.length > 1 || undefined,
          proxy: Boolean(this.opts.proxy),
          resume: this.session,
          agent: `burrow/${VERSION}`,
          direct,
          drain: true,
          keep: true,
          revoke: true,
        });
      };
      link.onMessage = (frames) => mux.receive(frames);
      link.onFrame = (piece) => mux.receiveFrame(piece);
      link.onBadFrames = (message) => mux.fail(WireError.PROTOCOL_ERROR, message);
      link.onDrain = () => mux.drained();
      link.onClose = (why) => finish({ kind: "lost", why });
      if (link.isOpen) link.onOpen();
    });
  }

  private control(type: FrameTypeValue, payload: Uint8Array, finish: (o: Outcome) => void, markReady: () => void): void {
    if (type === FrameType.READY) {
      const parsed = v.safeParse(Ready, parseJsonPayload(payload, "READY"));
      if (!parsed.success) throw new ProtocolError(`bad READY: ${parsed.issues[0]?.message}`);
      const ready = parsed.output;
      const unprotected = unenforcedAccess(this.tunnels, ready);
      if (unprotected) {
        this.mux?.sendControl(FrameType.GOAWAY); // the server frees what it opened, now
        return finish({ kind: "refused", code: ACCESS_UNSUPPORTED, message: unprotected });
      }
      this.session = ready.session;
      this.takeGrants(ready);
      markReady();
      if (this.opts.connect) {
        if (!ready.connect) return finish({ kind: "refused", code: WireError.PROTOCOL_ERROR, message: "the server answered a connector's HELLO without what it reaches (is it older than burrow connect?)", ours: true });
        this.opts.connect.ready(ready.connect);
      }
      this.pools.ready(this.live.values(), (r) => this.mux?.sendControl(FrameType.ROTATION, r));
      this.opts.out.ready({ username: ready.username, session: ready.session, server: this.opts.server, tunnels: [...this.live.values()] });
      // a first round trip now, so the latency is known at once rather than a keepalive later
      this.mux?.ping();
    } else if (type === FrameType.REVOKE) {
      const parsed = v.safeParse(Revoke, parseJsonPayload(payload, "REVOKE"));
      if (!parsed.success) throw new ProtocolError(`bad REVOKE: ${parsed.issues[0]?.message}`);
      this.revoked(parsed.output);
    } else if (type === FrameType.MOVE) {
      const parsed = v.safeParse(Move, parseJsonPayload(payload, "MOVE"));
      if (!parsed.success) throw new ProtocolError(`bad MOVE: ${parsed.issues[0]?.message}`);
      finish({ kind: "moved", port: parsed.output.port });
    } else if (type === FrameType.ERROR) {
      const parsed = v.safeParse(Refusal, parseJsonPayload(payload, "ERROR"));
      const r = parsed.success ? parsed.output : { code: "PROTOCOL_ERROR", message: "malformed ERROR frame" };
      finish({ kind: "refused", code: r.code, message: r.message, retryAfterS: "retry_after" in r ? r.retry_after : undefined });
    }
  }

  /**
   * READY's grants matched to the tunnels asked for: by `index` when the
   * edge gives one (several tunnels), else in order. Refused tunnels are
   * reported by name and dropped; the others remember the name or port they
   * got, to ask for it again on reconnect.
   */
  private takeGrants(ready: Ready): void {
    const asked = this.tunnels;
    const refusedAt = new Map((ready.refused ?? []).map((r) => [r.index, r]));
    const grants = new Map<number, Ready["tunnels"][number]>();
    ready.tunnels.forEach((g, i) => grants.set(g.index ?? i, g));
    this.live = new Map();
    const kept: AgentTunnel[] = [];
    asked.forEach((t, i) => {
      const g = grants.get(i);
      if (!g || g.protocol !== t.request.protocol) {
        const r = refusedAt.get(i);
        this.opts.out.tunnelRefused?.(t.name, r?.code ?? WireError.PROTOCOL_ERROR, r?.message ?? "the server granted no tunnel for it");
        return;
      }
      // a reconnection asks for what was granted: the same name, or the same port
      t.request = isNamedKind(t.request) ? { ...t.request, subdomain: g.subdomain } : { ...t.request, port: g.port };
      kept.push(t);
      this.live.set(g.id, {
        name: t.name,
        id: g.id,
        protocol: g.protocol,
        subdomain: g.subdomain,
        port: g.port,
        url: g.url,
        local: `${t.target.tls ? "https://" : ""}${localAuthority(t.target)}`,
        target: t.target,
        inspect: t.inspect ?? true,
        ...(g.pool ? { pool: true } : {}),
        ...(g.private ? { private: g.private } : {}),
      });
    });
    this.tunnels = kept;
  }

  /**
   * One tunnel closed alone by the server (an admin's change no longer
   * allows it): said as a refused tunnel, and not asked for again; the
   * others go on.
   */
  private revoked(r: Revoke): void {
    const t = this.live.get(r.tunnel);
    if (!t) return;
    this.live.delete(r.tunnel);
    this.tunnels = this.tunnels.filter((x) => x.name !== t.name);
    this.opts.out.tunnelRefused?.(t.name, r.code, r.message);
  }

  /** A connector's local connection: a stream to the private tunnel it reaches; undefined while not connected. */
  openConnectStream(remote: string, kind: "tcp" | "udp" = "tcp"): Stream | undefined {
    if (!this.mux || this.mux.closed || !this.session) return undefined;
    try {
      return this.mux.open({ tunnel: "connect", kind, remote });
    } catch {
      return undefined; // too many streams, or the connection closing: this local connection is closed
    }
  }

  private serve(stream: Stream): void {
    const meta = readOpenMeta(stream.meta);
    if (!meta) return stream.reset(WireError.PROTOCOL_ERROR);
    // an edge that predates tunnel ids in OPEN, or a one-tunnel session: the only tunnel
    const tunnel = this.live.get(meta.tunnel) ?? (this.live.size === 1 ? this.live.values().next().value : undefined);
    if (!tunnel) return stream.reset(WireError.PROTOCOL_ERROR);
    serveStream(stream, meta, tunnel, this.served, this.opts.inspector);
  }
}

/** Exponential backoff with jitter: half fixed, half random, capped. */
export function backoff(attempt: number): number {
  const ceiling = Math.min(RECONNECT_MAX_MS, RECONNECT_BASE_MS * 2 ** Math.min(attempt, 16));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

/** The wait a RATE_LIMITED refusal asks for, plus up to a second of jitter; without one, the usual backoff. */
export function retryAfterDelay(retryAfterS: number | undefined, attempt: number): number {
  if (retryAfterS === undefined) return backoff(attempt);
  return Math.round(Math.min(retryAfterS, MAX_RETRY_AFTER_S) * 1000 + Math.random() * 1000);
}

export function connectUrl(server: string): string {
  const u = new URL(server);
  u.protocol = u.protocol === "https:" || u.protocol === "wss:" ? "wss:" : "ws:";
  u.pathname = CONNECT_PATH;
  u.search = "";
  return u.toString();
}
