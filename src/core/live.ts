/**
 * What core and the admin API need from whatever holds live tunnels: what is
 * live now, and a way to close what an admin action takes away. The edge's
 * registry implements it; core never imports the edge.
 */
import type { ErrorCode } from "./errors.ts";
import type { Protocol } from "../validate/fields.ts";

export interface ActiveTunnel {
  protocol: Protocol;
  /** For http and tls tunnels. */
  subdomain?: string;
  /** Its custom hostname, when it has one. */
  hostname?: string;
  /** A pool member: whether it takes new requests now. */
  pool?: { inRotation: boolean };
  /** A private tunnel: reached as `target` (owner/name) by its owner and the users of `shares`; `connected`: connectors now. */
  private?: { target: string; shares: string[]; connected: number };
  /** For tcp tunnels. */
  port?: number;
  userId: number;
  username: string;
  tokenId: number;
  connectedAt: Date;
  bytesIn: number;
  bytesOut: number;
}

export interface LiveTunnels {
  /** On one node an answer at once; with several, a query of the shared registry. */
  list(): ActiveTunnel[] | Promise<ActiveTunnel[]>;
  /** Closes every live tunnel of the user; the agent is told why. */
  closeUser(userId: number, code: ErrorCode, message: string): void;
  /** Closes every live tunnel opened with the token. */
  closeToken(tokenId: number, code: ErrorCode, message: string): void;
  /**
   * An admin change that may narrow what someone may do: the live sessions
   * it concerns (tunnels, tunnels held in grace, connectors) are judged
   * again by the handshake's rules (live-admission.ts), on every node; what
   * they no longer allow is closed with the code the handshake would give.
   * Settles once this node's are judged; never rejects.
   */
  rulesChanged?(change: RulesChange): Promise<void>;
  /**
   * The token's remote config changed (core/token-configs.ts): its live
   * agents that run it (`burrow start --remote`) are sent it, on every node.
   */
  configChanged?(tokenId: number): void;
  /** The agents connected now, on every node (GET /api/agents). */
  agents?(): AgentInfo[] | Promise<AgentInfo[]>;
  /** Asks the agent of session `id`, wherever it is connected, to reconnect or to run `burrow update`; its answer. */
  askAgent?(id: string, action: AgentAsk): Promise<AskResult>;
}

/** What the server may ask an agent (protocol/messages.ts ASK_ACTIONS). */
export type AgentAsk = "restart" | "update";

/** An agent's answer to an ask, or that no node has its session. */
export type AskResult = { found: false } | { found: true; answered: false; /** Why, when it is not the 10 s that ran out. */ why?: string } | { found: true; answered: true; accepted: boolean; message: string };

/** One connected agent (one session), as the admin API lists it. */
export interface AgentInfo {
  id: string;
  /** The node it is connected to (several nodes); undefined on one node. */
  nodeId?: string;
  userId: number;
  username: string;
  tokenId: number;
  /** What its HELLO said it is ("burrow/1.2.0"); undefined when it said nothing. */
  agent?: string;
  system?: { os: string; arch: string; started: string };
  connectedAt: string;
  /** Its address, "ip:port". */
  remote: string;
  transport: string;
  /** Its tunnels now, with its own names for them when it said them. */
  tunnels: { id: string; name?: string; protocol: string; url: string; source?: string }[];
  /** `burrow connect`'s session: what it reaches. */
  connects?: string;
  /** It runs its token's remote config: the version it runs, or why it could not. */
  config: { remote: boolean; version?: number; error?: string };
  lastError?: { message: string; at: string };
  /** Which of the server's asks it takes (its flags); undefined: it takes none (an older agent, burrow-agent). */
  manage?: { restart: boolean; update: boolean };
}

/** What an admin change concerns, so that only the live sessions it may narrow are judged again. */
export type RulesChange =
  /** A user's settings (allowed_protocols, can_share, max_tunnels, ...): their sessions, and the connectors to their private tunnels. */
  | { userId: number }
  /** A custom hostname registered, verified or deleted: the tunnels on it, or on a name under it for a wildcard. */
  | { hostname: string }
  /** A subdomain reserved: the tunnel on it. */
  | { subdomain: string };

export const noLiveTunnels: LiveTunnels = { list: () => [], closeUser() {}, closeToken() {} };
