/**
 * A session's control channel as the agent sees it, and the state it
 * changes: the tunnels still asked for (with the name or port each was
 * granted, to ask for again), those the current session holds (by the
 * edge's id, what OPEN names), and the session to resume. HELLO says the
 * first; READY's grants and REVOKE change them; MOVE and ERROR end the
 * session, which client.ts runs (DRAIN too, since it hands the connection
 * over rather than ending it).
 */
import * as v from "valibot";
import { parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { isNamedKind } from "../protocol/kinds.ts";
import { Hello, Move, PolicyNote, Ready, Refusal, Revoke } from "../protocol/messages.ts";
import { FrameType, PROTOCOL_VERSION, WireError, type FrameTypeValue } from "../protocol/wire.ts";
import { VERSION } from "../version.ts";
import { unenforcedAccess } from "./access.ts";
import type { AgentTunnel, ClientSide, SessionOutcome } from "./client-context.ts";
import { localAuthority } from "./local-target.ts";
import type { TunnelView } from "./output.ts";
import type { PoolMembership } from "./rotation.ts";

export class SessionControl {
  /**
   * The tunnels still asked for, each with what to ask on reconnect: the
   * name or port the server gave last time. A tunnel the server refused on
   * its own (burrow start) leaves this list.
   */
  private tunnels: AgentTunnel[];
  /** The granted tunnels of the current session, by the edge's id (OPEN names it). */
  private live = new Map<string, TunnelView>();
  /** The session READY named last: HELLO asks to resume it. */
  private resume?: string;

  /** `pools`: the client's pool memberships, told at each READY which tunnels are members. */
  constructor(
    private readonly client: ClientSide,
    private readonly pools: PoolMembership,
  ) {
    this.tunnels = client.opts.tunnels.map((t) => ({ ...t, request: { ...t.request } }));
  }

  /** The session READY named last, while it may be resumed; undefined before READY and after a retune. */
  get session(): string | undefined {
    return this.resume;
  }

  /** Asks for these tunnels from the next HELLO on; not a resume: the old session's names are freed by its GOAWAY, not handed over in grace. */
  ask(tunnels: AgentTunnel[]): void {
    this.tunnels = tunnels.map((t) => ({ ...t, request: { ...t.request } }));
    this.resume = undefined;
  }

  /** What HELLO says on a new connection; `direct`: the agent can go to the direct port (MOVE). */
  hello(direct: boolean): v.InferInput<typeof Hello> {
    const opts = this.client.opts;
    return {
      version: PROTOCOL_VERSION,
      token: opts.token,
      tunnels: this.tunnels.map((t) => t.request),
      ...(opts.connect ? { connect: { target: opts.connect.target } } : {}),
      // several tunnels: the edge grants those it can and names the refused ones in READY
      partial: this.tunnels.length > 1 || undefined,
      proxy: Boolean(opts.proxy),
      resume: this.resume,
      agent: `burrow/${VERSION}`,
      direct,
      drain: true,
      keep: true,
      revoke: true,
      // the requests the server's policies answer, told only to an agent whose inspector shows them
      ...(opts.out.policyNote ? { policy_notes: true } : {}),
    };
  }

  /** The tunnel a stream OPEN names is for, or undefined (the stream is reset). */
  tunnelFor(id: string): TunnelView | undefined {
    // an edge that predates tunnel ids in OPEN, or a one-tunnel session: the only tunnel
    return this.live.get(id) ?? (this.live.size === 1 ? this.live.values().next().value : undefined);
  }

  /** A control frame of the session (DRAIN aside); `finish` ends the session, `markReady` says READY came. */
  receive(type: FrameTypeValue, payload: Uint8Array, finish: (o: SessionOutcome) => void, markReady: () => void): void {
    if (type === FrameType.READY) {
      const parsed = v.safeParse(Ready, parseJsonPayload(payload, "READY"));
      if (!parsed.success) throw new ProtocolError(`bad READY: ${parsed.issues[0]?.message}`);
      const ready = parsed.output;
      const unprotected = unenforcedAccess(this.tunnels, ready);
      if (unprotected) {
        this.client.mux?.sendControl(FrameType.GOAWAY); // the server frees what it opened, now
        return finish({ kind: "refused", code: unprotected.code, message: unprotected.message });
      }
      this.resume = ready.session;
      this.takeGrants(ready);
      markReady();
      const connect = this.client.opts.connect;
      if (connect) {
        if (!ready.connect) return finish({ kind: "refused", code: WireError.PROTOCOL_ERROR, message: "the server answered a connector's HELLO without what it reaches (is it older than burrow connect?)", ours: true });
        connect.ready(ready.connect);
      }
      this.pools.ready(this.live.values(), (r) => this.client.mux?.sendControl(FrameType.ROTATION, r));
      this.client.opts.out.ready({ username: ready.username, session: ready.session, server: this.client.opts.server, tunnels: [...this.live.values()] });
      // a first round trip now, so the latency is known at once rather than a keepalive later
      this.client.mux?.ping();
    } else if (type === FrameType.POLICY) {
      const parsed = v.safeParse(PolicyNote, parseJsonPayload(payload, "POLICY"));
      if (!parsed.success) throw new ProtocolError(`bad POLICY: ${parsed.issues[0]?.message}`);
      const tunnel = this.live.get(parsed.output.tunnel);
      if (tunnel) this.client.opts.out.policyNote?.(tunnel, parsed.output);
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
        this.client.opts.out.tunnelRefused?.(t.name, r?.code ?? WireError.PROTOCOL_ERROR, r?.message ?? "the server granted no tunnel for it");
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
    this.client.opts.out.tunnelRefused?.(t.name, r.code, r.message);
  }
}
