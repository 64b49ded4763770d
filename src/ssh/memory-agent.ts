/**
 * One `ssh -R` forward as an agent's session, in memory: the edge's own
 * AgentConnection (edge/agents.ts) on one side, joined by a pair of muxes
 * to an agent side here, which says HELLO for the forward's tunnel and
 * serves its streams with the agent's own code (agent/serve-stream.ts)
 * toward the client's `-R` target, each connection to it a channel
 * (channel-socket.ts). So the forward is admitted by the handshake's rules
 * (core/admission.ts, with the SSH key as its device), its tunnel is
 * registered, reached, judged and closed as any agent's, and an admin's
 * change reaches it by the registry's paths (REVOKE, or ERROR for the
 * session).
 *
 * Frames are copied and delivered on a later microtask, as a socket would,
 * never inside the sender's call.
 */
import * as v from "valibot";
import type { Dialer, LocalTarget } from "../agent/local-target.ts";
import type { AgentOutput, TunnelView } from "../agent/output.ts";
import { serveStream } from "../agent/serve-stream.ts";
import type { EdgeContext } from "../edge/agent-context.ts";
import { AgentConnection } from "../edge/agents.ts";
import { log } from "../log.ts";
import { parseJsonPayload } from "../protocol/frames.ts";
import { Ready, readOpenMeta, Revoke, type GrantedTunnel, type TunnelRequest } from "../protocol/messages.ts";
import { Mux, type Stream } from "../protocol/mux.ts";
import { FrameType, PROTOCOL_VERSION, WireError, type FrameTypeValue } from "../protocol/wire.ts";

/** Who the forward is, as the edge's connection needs it. */
export interface ForwardPeer {
  /** The SSH client's "ip:port". */
  remote: string;
  /** Its canonical address (the handshake throttle's, the IP rules'). */
  address: string;
  /** The SSH key it signed in with: the device its HELLO is admitted as. */
  sshKey: number;
}

/** What becomes of the forward's session, told once each. */
/** Where the edge keeps its agents' sessions (drained, told SERVER_SHUTDOWN at a stop, counted): this one joins them, and leaves. */
export interface AgentSessionList {
  joined(conn: AgentConnection): void;
  left(conn: AgentConnection): void;
}

export interface ForwardEvents {
  /** Its tunnel is live: where visitors reach it. */
  granted(tunnel: GrantedTunnel): void;
  /** The session ended with a refusal (the handshake's, or an admin's change after it) or the edge closing it. */
  ended(code: string, message: string): void;
  /** Its tunnel was closed alone by an admin's change (REVOKE); the session stays, holding nothing. */
  revoked(code: string, message: string): void;
}

const ErrorBody = v.object({ code: v.string(), message: v.optional(v.string(), "") });

export class MemoryAgent {
  readonly edgeSide: AgentConnection;
  private readonly agentSide: Mux;
  private tunnel?: TunnelView;
  private over = false;

  constructor(
    edge: EdgeContext,
    private readonly sessions: AgentSessionList,
    peer: ForwardPeer,
    /** What the tunnel's streams are served as: its name for the output, where it leads, how its connections are made. */
    private readonly view: { name: string; local: string; target: LocalTarget & { dial: Dialer } },
    private readonly out: AgentOutput,
    private readonly events: ForwardEvents,
  ) {
    const toAgent = (frames: Uint8Array) => {
      const copy = frames.slice();
      queueMicrotask(() => this.agentSide.receive(copy));
      return "sent" as const;
    };
    this.edgeSide = new AgentConnection({ kind: "ssh", remote: peer.remote, address: peer.address, sshKey: peer.sshKey, send: toAgent, close: () => queueMicrotask(() => this.closed()) }, edge);
    this.agentSide = new Mux({
      role: "agent",
      send: (frames) => {
        const copy = frames.slice();
        queueMicrotask(() => this.edgeSide.mux.receive(copy));
        return "sent";
      },
      onStream: (stream) => this.serve(stream),
      onControl: (type, payload) => this.control(type, payload),
    });
    sessions.joined(this.edgeSide);
  }

  /** Asks for the forward's tunnel: the HELLO an agent would say for it. */
  hello(request: TunnelRequest): void {
    this.agentSide.sendControl(FrameType.HELLO, { version: PROTOCOL_VERSION, token: "", tunnels: [request], keep: true, revoke: true, agent: "ssh" });
  }

  /** The client cancelled the forward: its names are free at once, as an agent's that leaves on purpose (GOAWAY). */
  leave(): void {
    if (this.over) return;
    this.agentSide.sendControl(FrameType.GOAWAY, {});
    queueMicrotask(() => this.closed());
  }

  /** The SSH connection ended: the session goes, its names held for the key for the grace period, as a dropped agent's. */
  drop(): void {
    this.closed();
  }

  private closed(): void {
    if (this.over) return;
    this.over = true;
    this.agentSide.close();
    // its session ends as an agent's does when its connection closes
    this.sessions.left(this.edgeSide);
  }

  private control(type: FrameTypeValue, payload: Uint8Array): void {
    try {
      if (type === FrameType.READY) {
        const ready = v.parse(Ready, parseJsonPayload(payload, "READY"));
        const granted = ready.tunnels[0];
        if (!granted) return this.events.ended(WireError.PROTOCOL_ERROR, "no tunnel granted");
        this.tunnel = { name: this.view.name, id: granted.id, protocol: granted.protocol, url: granted.url, local: this.view.local, target: this.view.target, inspect: false };
        return this.events.granted(granted);
      }
      if (type === FrameType.ERROR) {
        const error = v.parse(ErrorBody, parseJsonPayload(payload, "ERROR"));
        return this.events.ended(error.code, error.message);
      }
      if (type === FrameType.REVOKE) {
        const revoke = v.parse(Revoke, parseJsonPayload(payload, "REVOKE"));
        this.tunnel = undefined;
        return this.events.revoked(revoke.code, revoke.message);
      }
      // MOVE and DRAIN are for agents that asked for them; this one asks for neither
    } catch (err) {
      log.warn("ssh forward: a control frame from the edge not understood", { err: String(err) });
    }
  }

  /** A visitor's stream: served toward the client's `-R` target, as the agent serves one toward its local service. */
  private serve(stream: Stream): void {
    const meta = readOpenMeta(stream.meta);
    const tunnel = this.tunnel;
    if (!meta || !tunnel || meta.tunnel !== tunnel.id) return stream.reset(WireError.PROTOCOL_ERROR);
    serveStream(stream, meta, tunnel, this.out);
  }
}
