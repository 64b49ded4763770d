/**
 * The agent's side of each tunnel kind, one line per kind: its type
 * demands a unit for every kind of the kind table (protocol/kinds.ts), so
 * a kind added there is not served until it has one here.
 */
import { KIND_NAMES, KINDS, type StreamKind, type TunnelKind } from "../../protocol/kinds.ts";
import { HTTP_AGENT } from "./http.ts";
import { TCP_AGENT } from "./tcp.ts";
import { TLS_AGENT } from "./tls.ts";
import type { AgentKind } from "./unit.ts";
import { UDP_AGENT } from "./udp.ts";

export type { AgentKind, SpecParts } from "./unit.ts";

export const AGENT_KINDS = { http: HTTP_AGENT, tcp: TCP_AGENT, tls: TLS_AGENT, udp: UDP_AGENT } as const satisfies Record<TunnelKind, AgentKind>;

/** Who serves a stream, by OPEN's kind: the unit of the tunnel kind whose stream it is. Without a prototype, so that no other name finds anything. */
export const SERVE_BY_STREAM: Readonly<Record<StreamKind, AgentKind["serve"]>> = Object.assign(
  Object.create(null) as Record<StreamKind, AgentKind["serve"]>,
  Object.fromEntries(KIND_NAMES.map((k) => [KINDS[k].stream, AGENT_KINDS[k].serve])),
);
