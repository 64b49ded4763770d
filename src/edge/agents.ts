/**
 * The agents' side of the edge: one AgentConnection per agent connection,
 * a WebSocket at /_burrow/connect or a direct socket on --agent-port. It
 * owns the connection's mux and what the session is (who, what its HELLO
 * said), answers the agent's control frames, and hands the rest to its
 * parts: the handshake up to READY (agent-handshake.ts), the tunnels it
 * opens and closes (agent-tunnels.ts), the streams the agent opens
 * (agent-streams.ts). Visitors' streams are opened here (openStream), the
 * registry's one call on the hot path.
 */
import * as v from "valibot";
import { limitedLog, log } from "../log.ts";
import { jsonPayload, parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { Rotation, type OpenMeta, type PolicyNote, type PolicyPassed } from "../protocol/messages.ts";
import { Mux, type Stream } from "../protocol/mux.ts";
import { passedNoteHead } from "../protocol/policy-passed.ts";
import { DIRECT_DATA_PAYLOAD, FrameType, WireError, type FrameTypeValue } from "../protocol/wire.ts";
import { strangerFault, type AgentSide, type AgentTransport, type EdgeContext, type HelloSaid } from "./agent-context.ts";
import { AgentHandshake } from "./agent-handshake.ts";
import { LiveChanges } from "./agent-live-changes.ts";
import { AgentManagement } from "./agent-management.ts";
import type { AgentAsk, AgentInfo, AskResult } from "../core/live.ts";
import { AgentStreams } from "./agent-streams.ts";
import { AgentTunnels } from "./agent-tunnels.ts";
import { openStream } from "./open-stream.ts";
import { logsFor, NotePace, type LogsRead } from "./traffic-policy/policy-notes.ts";

/** Pool members going out of and back into rotation: an agent that flaps cannot flood the log. */
const rotationLog = limitedLog(60);

export interface AgentSocketData {
  kind: "agent";
  remote: string;
  /** The client's address, as the handshake throttle counts it (behind a trusted proxy, the client it names). */
  address: string;
  /** The address holding a place in the agents' connection budget until the WebSocket closes. */
  counted?: string;
  conn?: AgentConnection;
}

/** Where notePassedEncoded puts a note's payload together (the mux copies it into its batch at once). */
let notePayload = new Uint8Array(1024);

export class AgentConnection implements AgentSide {
  readonly sessionId = crypto.randomUUID();
  userId = 0;
  tokenId = 0;
  username = "";
  connectsTo?: string;
  readonly mux: Mux;
  private ready = false;
  /** Its HELLO said it understands DRAIN. */
  private drains = false;
  /** Its HELLO said it serves kept h1 streams (OpenMeta `keep`). */
  keeps = false;
  /** Its HELLO said it came through a proxy. */
  proxy = false;
  /** Its HELLO said it understands REVOKE (one tunnel closed alone). */
  private revokes = false;
  /** Its HELLO asked for POLICY notes; their pace (policy-notes.ts). */
  private notes: NotePace | undefined;
  /** Its HELLO asked for POLICY_PASSED notes: what the policies did with the requests they let through. */
  tellsPassed = false;
  /** Its HELLO said it makes the POLICY_PASSED notes it can itself (`derived_notes`: traffic-policy/derived-notes.ts). */
  makesNotes = false;
  /** The start of its POLICY_PASSED notes for the tunnel of the last (notePassedEncoded). */
  private notePrefix: { tunnel: string; bytes: Uint8Array } | undefined;
  /** How its HELLO said it reads the notes' log fields: as text, typed (numbers and bools), or as any JSON value (policy-notes.ts logsFor). */
  private logsRead: LogsRead = "text";
  /** Its HELLO said it adds and removes tunnels on the live session (ADD, REMOVE). */
  private lives = false;
  /** Its HELLO said it runs its token's remote config (CONFIG); with `live` only. */
  remote = false;
  /** What its HELLO said it is, runs on and takes of the server's asks, for the list of agents. */
  said: Pick<HelloSaid, "agent" | "system" | "manage"> = {};
  /** The list of agents' view of it, and the server's asks (agent-management.ts). */
  readonly management: AgentManagement;
  private readonly handshake: AgentHandshake;
  private readonly tunnels: AgentTunnels;
  private readonly streams: AgentStreams;
  /** Tunnels added and removed on the live session (agent-live-changes.ts). */
  readonly changes: LiveChanges;

  constructor(
    readonly transport: AgentTransport,
    readonly edge: EdgeContext,
  ) {
    this.mux = new Mux({
      role: "edge",
      batchWrites: true,
      ...(transport.kind === "direct" ? { maxDataPayload: DIRECT_DATA_PAYLOAD } : {}),
      send: (frames) => transport.send(frames),
      onControl: (type, payload) => this.control(type, payload),
      // only a connector opens streams toward the edge; any other agent that does breaks the protocol
      onStream: (stream) => this.streams.peerStream(stream),
      onStreamReset: (code, by) => edge.counters?.reset(by === "local" ? "edge" : by === "peer" ? "agent" : "session", code),
      onClose: (code, message) => {
        this.handshake.muxClosed(code);
        if (code === WireError.KEEPALIVE_TIMEOUT) log.info("agent silent too long, closing", { session: this.sessionId });
        // a throttled address's refusals are summed up by the guard, not logged one by one
        if (code === WireError.GOING_AWAY || code === "RATE_LIMITED") return transport.close(code.slice(0, 100));
        // before a handshake anyone can cause this line: a few a minute then; after it, every one
        (this.ready ? log.info : strangerFault)("agent connection closed", { session: this.sessionId, code, reason: message, address: this.transport.address });
        transport.close(code.slice(0, 100));
      },
    });
    // the transport is open: an agent that goes silent (frozen, its network gone) is found by the mux
    this.mux.keepAlive();
    this.tunnels = new AgentTunnels(this);
    this.streams = new AgentStreams(this);
    this.handshake = new AgentHandshake(this, this.tunnels, this.streams);
    this.changes = new LiveChanges(this, this.tunnels);
    this.management = new AgentManagement(this, (t) => this.tunnels.publicAddress(t), this.changes.names);
  }

  /** Its HELLO said `live`: the server may ask it (ASK), and it says what it runs (STATUS). */
  get live(): boolean {
    return this.lives;
  }

  /** The agent as GET /api/agents lists it. */
  describe(): AgentInfo {
    return this.management.describe(this.ready ? this.edge.registry.sessionTunnels(this.sessionId).filter((t) => t.agent === this) : []);
  }

  /** The server's ask (reconnect, update), answered by the agent. */
  ask(action: AgentAsk): Promise<AskResult> {
    return this.management.ask(action);
  }

  get isReady(): boolean {
    return this.ready;
  }

  /** A connector's session: the private tunnel it reaches. */
  get connects(): { ownerId: number; name: string } | undefined {
    return this.streams.connects;
  }

  /** How the agent reached the edge: its WebSocket, or the direct port. */
  get transportKind(): AgentTransport["kind"] {
    return this.transport.kind;
  }

  becameReady(said: HelloSaid): void {
    this.ready = true;
    this.drains = said.drain;
    this.keeps = said.keep ?? false;
    this.proxy = said.proxy;
    this.revokes = said.revoke ?? false;
    this.lives = said.live ?? false;
    this.remote = this.lives && (said.remote ?? false);
    this.said = { agent: said.agent, system: said.system, manage: said.manage };
    if (said.policyNotes) this.notes = new NotePace();
    this.tellsPassed = said.policyPassed ?? false;
    this.makesNotes = this.tellsPassed && (said.derivedNotes ?? false);
    this.logsRead = said.jsonLogs && said.typedLogs ? "json" : said.typedLogs ? "typed" : "text";
  }

  /** The version of the remote config sent last: an older one read later is not sent after it. */
  private configSent = -1;

  sendConfig(): void {
    if (!this.ready || !this.remote || this.mux.closed) return;
    this.edge.core.tokenConfigs.read(this.tokenId).then(
      (c) => {
        if (this.mux.closed || c.version < this.configSent) return;
        this.configSent = c.version;
        this.mux.sendControl(FrameType.CONFIG, { version: c.version, tunnels: c.tunnels });
      },
      (err) => log.warn("remote config not sent", { session: this.sessionId, err: String(err) }),
    );
  }

  /** A request its tunnel's policies answered at the edge, told to its inspector; none past the pace (counted in the next one). */
  notePolicy(note: PolicyNote): void {
    if (!this.ready || !this.notes || this.mux.closed) return;
    const skipped = this.notes.take(Date.now());
    if (skipped === undefined) return;
    if (note.logs && this.logsRead !== "json") note = { ...note, logs: logsFor(note.logs, this.logsRead) };
    this.mux.sendControl(FrameType.POLICY, skipped > 0 ? { ...note, skipped } : note);
  }

  /** What the policies did with a request they let through to it (passed-notes.ts), when it asked. */
  notePassed(note: PolicyPassed): void {
    if (!this.ready || !this.tellsPassed || this.mux.closed) return;
    if (this.logsRead !== "json" && (note.request?.logs || note.response?.logs || note.events?.logs)) {
      const reads = this.logsRead;
      const text = (phase: PolicyPassed["request"]) => (phase?.logs ? { ...phase, logs: logsFor(phase.logs, reads) } : phase);
      note = { ...note, request: text(note.request), response: text(note.response), events: text(note.events) };
    }
    this.mux.sendEncodedControlInBatch(FrameType.POLICY_PASSED, jsonPayload(note));
  }

  /**
   * notePassed from the note's fields already encoded (passed-notes.ts):
   * `{"tunnel":"<id>","stream":<n>` and `tail`, the JSON notePassed would
   * send; never log fields (their text for an older agent is made there).
   */
  notePassedEncoded(tunnel: string, stream: number, tail: Uint8Array): void {
    if (!this.ready || !this.tellsPassed || this.mux.closed) return;
    if (this.notePrefix?.tunnel !== tunnel) this.notePrefix = { tunnel, bytes: passedNoteHead(tunnel) };
    const prefix = this.notePrefix.bytes;
    const digits = String(stream);
    const size = prefix.byteLength + digits.length + tail.byteLength;
    // one buffer for every note: the mux copies a frame's payload into its batch as it is sent
    if (notePayload.byteLength < size) notePayload = new Uint8Array(Math.max(size, notePayload.byteLength * 2));
    notePayload.set(prefix, 0);
    for (let i = 0; i < digits.length; i++) notePayload[prefix.byteLength + i] = digits.charCodeAt(i);
    notePayload.set(tail, prefix.byteLength + digits.length);
    this.mux.sendEncodedControlInBatch(FrameType.POLICY_PASSED, notePayload.subarray(0, size));
  }

  /** A visitor's stream to the agent; undefined before READY, after the end, or when the mux refuses (open-stream.ts). */
  openStream(meta: OpenMeta, end = false): Stream | undefined {
    if (!this.ready || this.mux.closed) return undefined;
    return openStream(this.mux, meta, end, { session: this.sessionId });
  }

  /**
   * One of its tunnels is closed alone (an admin's change): the agent is told
   * why (REVOKE) and the tunnel's streams end; false, and nothing done,
   * for an agent that would not understand.
   */
  revoke(tunnelId: string, code: string, message: string): boolean {
    if (!this.ready || !this.revokes || this.mux.closed) return false;
    this.tunnels.revoke(tunnelId, code, message);
    return true;
  }

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

  /** `retryAfterS`: when the agent may say HELLO again (RATE_LIMITED), sent as the ERROR's retry_after. */
  refuse(code: string, message: string, retryAfterS?: number): void {
    this.handshake.stopTimer();
    this.mux.fail(code, message, retryAfterS === undefined ? undefined : { retry_after: retryAfterS });
  }

  /** The WebSocket closed (either side): the session ends, its tunnels wait in grace. */
  closed(): void {
    this.management.closed();
    this.handshake.closed();
    this.streams.closed();
    this.mux.close();
    if (this.ready) this.edge.registry.detach(this.sessionId, true);
  }

  private control(type: FrameTypeValue, payload: Uint8Array): void {
    switch (type) {
      case FrameType.HELLO:
        return this.handshake.received(payload);
      case FrameType.GOAWAY:
        // the agent leaves on purpose: free its names and ports now
        this.edge.registry.detach(this.sessionId, false);
        this.ready = false;
        this.mux.close();
        return;
      case FrameType.ERROR:
        this.mux.close(WireError.GOING_AWAY, "agent reported an error");
        return;
      case FrameType.ROTATION:
        return this.rotation(payload);
      case FrameType.ADD:
      case FrameType.REMOVE:
        return this.changes.received(type, payload, this.lives);
      case FrameType.STATUS:
        return this.management.receivedStatus(payload);
      case FrameType.ANSWER:
        return this.management.receivedAnswer(payload);
      default:
        throw new ProtocolError(`unexpected ${type} from an agent`);
    }
  }

  /** A pool member of this session's goes out of rotation or back in. */
  private rotation(payload: Uint8Array): void {
    if (!this.ready) throw new ProtocolError("ROTATION before READY");
    const parsed = v.safeParse(Rotation, parseJsonPayload(payload, "ROTATION"));
    if (!parsed.success) throw new ProtocolError("bad ROTATION");
    // only a pool member of this session's: anything else changes nothing
    const t = this.edge.registry.sessionTunnels(this.sessionId).find((x) => x.id === parsed.output.tunnel);
    if (!t?.pool || t.inRotation === parsed.output.in) return;
    this.edge.registry.setRotation(t, parsed.output.in);
    rotationLog(parsed.output.in ? "pool member back in rotation" : "pool member out of rotation", { session: this.sessionId, tunnel: t.subdomain ?? t.hostname ?? t.port });
  }
}
