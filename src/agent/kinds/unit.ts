/**
 * What a tunnel kind is on the agent's side: how it serves a stream the
 * edge opened, and how a tunnel spec of its kind becomes the tunnel the
 * agent asks for. One unit per kind in this folder, gathered in index.ts
 * (AGENT_KINDS), whose type demands one for every kind of the kind table
 * (protocol/kinds.ts).
 */
import type { OpenMeta, PrivateRequest, TcpAccess } from "../../protocol/messages.ts";
import type { Stream } from "../../protocol/mux.ts";
import type { RequestTaps } from "../inspector/tap.ts";
import type { LocalTarget } from "../local-target.ts";
import type { AgentOutput, TunnelView } from "../output.ts";
import type { SpecTunnel, TunnelSpec } from "../settings/tunnel-spec-types.ts";

/** What the spec made of a tunnel's options before its kind's unit makes its request (settings/tunnel-spec.ts tunnelOf). */
export interface SpecParts {
  target: LocalTarget;
  /** Its IP rules (every kind takes them), not yet compacted. */
  ip: Required<TcpAccess>;
  /** Its private request, when it is private. */
  priv: PrivateRequest | undefined;
  /** `pool` and its balance, when it is a pool member; else nothing. */
  pooled: { pool?: true; balance?: "round-robin" | "least-requests" };
  /** A pool member's health check, when it has one; else nothing. */
  health: Pick<SpecTunnel, "health">;
  /** Its subdomain and hostname as asked (a kind reached by a name). */
  names: { subdomain?: string; hostname?: string };
}

export interface AgentKind {
  /** Its local service may be given as a URL (http:// or https://), not only PORT or HOST:PORT. */
  readonly urlTarget: boolean;
  /**
   * Serves one stream the edge opened on a tunnel of this kind (OPEN's
   * `kind` is the kind table's `stream` of it) to the tunnel's local
   * service, telling the output. A failure ends the stream, never the agent.
   */
  serve(stream: Stream, meta: OpenMeta, tunnel: TunnelView, out: AgentOutput, inspector?: RequestTaps): void;
  /** The tunnel the agent runs for a spec of this kind, without a mistake (specProblem first): its HELLO request, its local target, its extras. */
  tunnel(spec: TunnelSpec, parts: SpecParts): SpecTunnel;
}
