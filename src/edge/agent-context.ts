/**
 * What the parts of an agent's connection share: the edge they work for
 * (EdgeContext), what carries the agent's frames (AgentTransport), and the
 * connection as its parts see it (AgentSide). The connection itself is
 * agents.ts; its handshake agent-handshake.ts, its tunnels agent-tunnels.ts,
 * its streams agent-streams.ts.
 */
import type { EdgeEvents } from "./edge-events.ts";
import type { AdmissionHook } from "../webhooks/admission-hook.ts";
import type { LiveView } from "../core/admission.ts";
import type { Core } from "../core/index.ts";
import { limitedLog } from "../log.ts";
import type { EdgeCounters } from "../metrics/edge-counters.ts";
import type { Mux, SendResult } from "../protocol/mux.ts";
import type { HandshakeGuard } from "./handshake-guard.ts";
import type { OtherNodes } from "./other-nodes.ts";
import type { PortAllocator } from "./ports.ts";
import type { AgentLink, Registry } from "./registry.ts";
import type { UdpPortAllocator } from "./udp-ports.ts";
import type { EdgePolicies } from "./traffic-policy/edge-policies.ts";

/** What an unauthenticated peer of the agents' endpoints can make the edge say: a few lines a minute. */
export const strangerFault = limitedLog(30);

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
  /** --admission-hook: asked before a handshake's tunnels go live; undefined: none. */
  admissionHook?: AdmissionHook;
  /** What the edge sees happen, as events (edge-events.ts). */
  events?: EdgeEvents;
  /** Handshake results and stream resets, for the metrics. */
  counters?: EdgeCounters;
  /** Traffic policies: a tunnel's own compiled at its handshake, the operator's layers; undefined: none are taken (READY does not say `policy`). */
  policies?: EdgePolicies;
}

/** What carries an agent's frames: its WebSocket or its direct socket, or for an SSH session's tunnels the SSH gateway (ssh/) in memory. */
export interface AgentTransport {
  readonly kind: "websocket" | "direct" | "ssh";
  /**
   * The SSH key whose signature the SSH gateway checked: the device the
   * HELLO is admitted as, instead of its token (core/admission.ts
   * ProvedDevice). Only the gateway's own connections have it.
   */
  readonly sshKey?: number;
  /** The agent's address, "ip:port". */
  readonly remote: string;
  /** The client's canonical IP, what per-address throttles count by (the real client behind a trusted proxy). */
  readonly address: string;
  send(frames: Uint8Array): SendResult;
  /** Ends the connection after what was sent; `reason` is a short code. */
  close(reason: string): void;
}

/** What its HELLO said the agent understands or is, kept for the session once READY goes out. */
export interface HelloSaid {
  drain: boolean;
  keep?: boolean;
  proxy: boolean;
  revoke?: boolean;
  /** It wants POLICY notes (wire.ts) for its inspector. */
  policyNotes?: boolean;
  /** It wants POLICY_PASSED notes (wire.ts) for its inspector. */
  policyPassed?: boolean;
  /** It makes the POLICY_PASSED notes it can itself (HELLO's `derived_notes`). */
  derivedNotes?: boolean;
  /** It reads the notes' log fields typed (HELLO's `typed_logs`), and those that are null, lists or maps as they are (`json_logs`). */
  typedLogs?: boolean;
  jsonLogs?: boolean;
  /** It adds and removes tunnels on the live session (wire.ts ADD, REMOVE). */
  live?: boolean;
  /** It runs the token's remote config (wire.ts CONFIG). */
  remote?: boolean;
  /** What it says it is (HELLO's `agent`: "burrow/1.2.0"). */
  agent?: string;
  /** What it runs on, and which of the server's asks it takes (HELLO's `system`, `manage`). */
  system?: { os: string; arch: string; started: string };
  manage?: { restart: boolean; update: boolean };
}

/** An agent's connection as its parts see it: who it is, its mux, and the two ways its handshake ends. */
export interface AgentSide extends AgentLink {
  readonly sessionId: string;
  readonly mux: Mux;
  readonly transport: AgentTransport;
  readonly edge: EdgeContext;
  readonly isReady: boolean;
  userId: number;
  tokenId: number;
  /** Its user's name, once its handshake knows it. */
  username: string;
  /** A connector's session: what it reaches, "owner/name" (burrow connect). */
  connectsTo?: string;
  /** Its handshake succeeded: from now on it carries streams, with what its HELLO said. */
  becameReady(said: HelloSaid): void;
  /** Tells the agent why (ERROR) and closes its connection; `retryAfterS` is sent as the ERROR's retry_after. */
  refuse(code: string, message: string, retryAfterS?: number): void;
  /** Sends the token's remote config (CONFIG), to an agent that runs it; nothing to another. */
  sendConfig(): void;
}
