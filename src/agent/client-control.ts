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
import { PassedNoteReader } from "../protocol/policy-passed.ts";
import { Ask, Config, Hello, Move, PolicyNote, Ready, Refusal, RemoveTunnel, Revoke, TunnelAdded, type AddTunnel } from "../protocol/messages.ts";
import { FrameType, PROTOCOL_VERSION, WireError, type FrameTypeValue } from "../protocol/wire.ts";
import { VERSION } from "../version.ts";
import { REMOTE_UNSUPPORTED, unenforcedAccess } from "./access.ts";
import type { AgentTunnel, ClientSide, SessionOutcome } from "./client-context.ts";
import { localAuthority } from "./local-target.ts";
import type { TunnelView } from "./output.ts";
import type { PoolMembership } from "./rotation.ts";

/** What the agent runs on, for the server's list of agents (HELLO's `system`): said as Node names them, with when this process started. */
const SYSTEM = { os: String(globalThis.process?.platform ?? "unknown").slice(0, 32), arch: String(globalThis.process?.arch ?? "unknown").slice(0, 32), started: new Date().toISOString() };

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
  /** READY came on the current connection, and it has not ended since. */
  private connected = false;
  /** The current session's READY said `live`: tunnels are added and removed on it (ADD, REMOVE). */
  private liveSession = false;
  /** ADD and REMOVE frames sent and not yet answered, by their ref. */
  private readonly waiting = new Map<number, { resolve(answer: TunnelAdded): void; reject(err: Error): void }>();
  private nextRef = 1;
  /** Why each tunnel refused at the last READY was refused, by its name. */
  readonly lastRefused = new Map<string, { code: string; message: string }>();
  /** Told at the next READY, or when the connection ends. */
  private readyWaiters: (() => void)[] = [];
  /** The edge's POLICY_PASSED notes, most of them the last one's bytes for another stream. */
  private readonly passedNotes = new PassedNoteReader();

  /** `pools`: the client's pool memberships, told at each READY which tunnels are members. */
  constructor(
    private readonly client: ClientSide,
    private readonly pools: PoolMembership,
  ) {
    this.tunnels = client.opts.tunnels.map((t) => ({ ...t, request: { ...t.request } }));
    this.remember(this.tunnels);
  }

  /**
   * What each tunnel was asked for with, by its name, as the program asked
   * (its request changes to the name or port granted): a change compares
   * the tunnel asked for next with this (client-changes.ts).
   */
  readonly askedAs = new Map<string, string>();

  private remember(tunnels: readonly AgentTunnel[]): void {
    for (const t of tunnels) this.askedAs.set(t.name, JSON.stringify(t.request));
  }

  /** The session READY named last, while it may be resumed; undefined before READY and after a retune. */
  get session(): string | undefined {
    return this.resume;
  }

  /** Asks for these tunnels from the next HELLO on; not a resume: the old session's names are freed by its GOAWAY, not handed over in grace. */
  ask(tunnels: AgentTunnel[]): void {
    this.tunnels = tunnels.map((t) => ({ ...t, request: { ...t.request } }));
    this.askedAs.clear();
    this.remember(this.tunnels);
    this.resume = undefined;
  }

  /** The tunnels asked for now, each with the name or port it was granted (the same objects: changes.ts keeps them). */
  get asked(): readonly AgentTunnel[] {
    return this.tunnels;
  }

  /**
   * These tunnels from now on (the next HELLO asks for them), the session
   * resumed as it is; `fresh`: those among them not asked for before, as
   * the program asks for them (planChange's `come`).
   */
  keepAsking(tunnels: AgentTunnel[], fresh: readonly AgentTunnel[] = []): void {
    this.tunnels = tunnels;
    for (const name of [...this.askedAs.keys()]) if (!tunnels.some((t) => t.name === name)) this.askedAs.delete(name);
    this.remember(fresh);
  }

  /** Whether a session is ready now, and whether its READY said `live`. */
  get state(): { connected: boolean; live: boolean } {
    return { connected: this.connected, live: this.connected && this.liveSession };
  }

  /** The granted tunnel of the current session named `name`. */
  viewNamed(name: string): TunnelView | undefined {
    for (const t of this.live.values()) if (t.name === name) return t;
    return undefined;
  }

  /** The tunnels live on the current session. */
  views(): TunnelView[] {
    return [...this.live.values()];
  }

  /** Resolves at the next READY, or when the connection ends. */
  nextReady(): Promise<void> {
    return new Promise((resolve) => this.readyWaiters.push(resolve));
  }

  /** The session ended: what waited for an answer on it is told so. */
  ended(): void {
    this.connected = false;
    this.liveSession = false;
    for (const w of this.waiting.values()) w.reject(new Error("the connection to the server ended"));
    this.waiting.clear();
    for (const wake of this.readyWaiters.splice(0)) wake();
  }

  /** Sends ADD and resolves with its answer; rejects when the session ends first. */
  add(name: string, request: AddTunnel["tunnel"]): Promise<TunnelAdded> {
    return this.send(FrameType.ADD, (ref) => ({ ref, name, tunnel: request }));
  }

  /** Sends REMOVE and resolves once the server answers (the name or port is free); rejects when the session ends first. */
  remove(id: string): Promise<void> {
    return this.send(FrameType.REMOVE, (ref) => ({ ref, tunnel: id })).then(() => {});
  }

  private send(type: FrameTypeValue, body: (ref: number) => unknown): Promise<TunnelAdded> {
    const mux = this.client.mux;
    if (!mux || mux.closed || !this.liveSession) return Promise.reject(new Error("the connection to the server ended"));
    const ref = this.nextRef++ % 0xffff_ffff;
    return new Promise((resolve, reject) => {
      this.waiting.set(ref, { resolve, reject });
      mux.sendControl(type, body(ref));
    });
  }

  /** A tunnel the server granted on the live session (ADDED): live now, asked for again on reconnect by what it got. */
  granted(t: AgentTunnel, g: NonNullable<TunnelAdded["tunnel"]>): TunnelView {
    t.request = isNamedKind(t.request) ? { ...t.request, subdomain: g.subdomain } : { ...t.request, port: g.port };
    const view = viewOf(t, g);
    this.live.set(g.id, view);
    this.pools.adopt(t.name, t.target, t.health);
    this.pools.ready(this.live.values(), (r) => this.client.mux?.sendControl(FrameType.ROTATION, r));
    return view;
  }

  /** A tunnel of the live session gone (REMOVED, or an ADD the agent takes back). */
  dropped(id: string): void {
    const view = this.live.get(id);
    if (!view) return;
    this.live.delete(id);
    this.pools.forget(view.name);
  }

  /** What HELLO says on a new connection; `direct`: the agent can go to the direct port (MOVE). */
  hello(direct: boolean): v.InferInput<typeof Hello> {
    const opts = this.client.opts;
    // the remote config's agent starts every session with none, and adds its tunnels once READY says it may (client.ts)
    if (opts.remote) this.tunnels = [];
    return {
      version: PROTOCOL_VERSION,
      token: opts.token,
      tunnels: this.tunnels.map((t) => t.request),
      ...(opts.remote ? { remote: true } : {}),
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
      ...(opts.out.policyPassed ? { policy_passed: true } : {}),
      // the notes it can make itself are not sent: the inspector makes them (inspector/made-note.ts)
      ...(opts.out.policyPassed && opts.derivedNotes !== false ? { derived_notes: true } : {}),
      ...(opts.out.policyNote || opts.out.policyPassed ? { typed_logs: true, json_logs: true } : {}),
      // an agent told to behave as the version before did (tests of the version rules) does not say it
      live: opts.live !== false,
      system: SYSTEM,
      ...(opts.manage ? { manage: { restart: opts.manage.restart, update: opts.manage.update } } : {}),
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
      if (this.client.opts.remote && ready.live !== true) {
        this.client.mux?.sendControl(FrameType.GOAWAY);
        return finish({ kind: "refused", code: REMOTE_UNSUPPORTED, message: "the server does not keep devices' tunnels (it is older than remote configs): update burrow on the server, or run the tunnels from a burrow.yml" });
      }
      this.resume = ready.session;
      this.takeGrants(ready);
      this.connected = true;
      this.liveSession = ready.live === true && this.client.opts.live !== false;
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
      for (const wake of this.readyWaiters.splice(0)) wake();
    } else if (type === FrameType.POLICY) {
      const parsed = v.safeParse(PolicyNote, parseJsonPayload(payload, "POLICY"));
      if (!parsed.success) throw new ProtocolError(`bad POLICY: ${parsed.issues[0]?.message}`);
      const tunnel = this.live.get(parsed.output.tunnel);
      if (tunnel) this.client.opts.out.policyNote?.(tunnel, parsed.output);
    } else if (type === FrameType.POLICY_PASSED) {
      const note = this.passedNotes.read(payload);
      const tunnel = this.live.get(note.tunnel);
      if (tunnel) this.client.opts.out.policyPassed?.(tunnel, note);
    } else if (type === FrameType.ADDED || type === FrameType.REMOVED) {
      this.answered(type, payload);
    } else if (type === FrameType.ASK) {
      const parsed = v.safeParse(Ask, parseJsonPayload(payload, "ASK"));
      if (!parsed.success) throw new ProtocolError(`bad ASK: ${parsed.issues[0]?.message}`);
      const answer = this.client.asked(parsed.output.action);
      this.client.mux?.sendControl(FrameType.ANSWER, { ref: parsed.output.ref, accepted: answer.accepted, message: answer.message });
      // once the answer has gone: a restart ends this connection
      if (answer.then) setTimeout(answer.then, 0);
    } else if (type === FrameType.CONFIG) {
      const parsed = v.safeParse(Config, parseJsonPayload(payload, "CONFIG"));
      if (!parsed.success) throw new ProtocolError(`bad CONFIG: ${parsed.issues[0]?.message}`);
      this.client.opts.remote?.config(parsed.output);
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

  /** ADDED or REMOVED: the answer to the frame of that ref; one nobody waits for is a protocol error. */
  private answered(type: FrameTypeValue, payload: Uint8Array): void {
    const what = type === FrameType.ADDED ? "ADDED" : "REMOVED";
    const raw = parseJsonPayload(payload, what);
    const parsed = type === FrameType.ADDED ? v.safeParse(TunnelAdded, raw) : v.safeParse(RemoveTunnel, raw);
    if (!parsed.success) throw new ProtocolError(`bad ${what}: ${parsed.issues[0]?.message}`);
    const w = this.waiting.get(parsed.output.ref);
    if (!w) throw new ProtocolError(`${what} for no ADD or REMOVE sent`);
    this.waiting.delete(parsed.output.ref);
    w.resolve(parsed.output as TunnelAdded);
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
    this.lastRefused.clear();
    const kept: AgentTunnel[] = [];
    asked.forEach((t, i) => {
      const g = grants.get(i);
      if (!g || g.protocol !== t.request.protocol) {
        const r = refusedAt.get(i);
        const code = r?.code ?? WireError.PROTOCOL_ERROR;
        const message = r?.message ?? "the server granted no tunnel for it";
        this.lastRefused.set(t.name, { code, message });
        this.client.opts.out.tunnelRefused?.(t.name, code, message);
        return;
      }
      // a reconnection asks for what was granted: the same name, or the same port
      t.request = isNamedKind(t.request) ? { ...t.request, subdomain: g.subdomain } : { ...t.request, port: g.port };
      kept.push(t);
      this.live.set(g.id, viewOf(t, g));
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

/** A tunnel granted (READY's or ADDED's entry), as the agent's output and its streams see it. */
function viewOf(t: AgentTunnel, g: Ready["tunnels"][number]): TunnelView {
  return {
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
    ...(g.notes ? { notes: g.notes } : {}),
  };
}
