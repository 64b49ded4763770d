/**
 * Everything the agent tells the person (or script) running it, as events.
 * The agent calls these; src/cli/agent-output/ turns them into lines, JSON
 * or the live terminal screen. Every event that belongs to a tunnel names it
 * by the name the user gave it (the burrow.yml key, or the protocol for
 * `burrow http` / `burrow tcp`).
 */
import type { DerivedNotes, PolicyNote, PolicyPassed } from "../protocol/messages.ts";
import type { TunnelKind } from "../protocol/kinds.ts";
import type { LocalTarget } from "./local-target.ts";
import type { FlowCounts } from "./udp.ts";

/** One tunnel as granted: where the public reaches it, and where it leads. */
export interface TunnelView {
  /** The user's name for it: a burrow.yml key, or "http" / "tcp" for a one-tunnel command. */
  name: string;
  /** The edge's id for it in this session (OPEN frames name it). */
  id: string;
  protocol: TunnelKind;
  subdomain?: string;
  port?: number;
  /** The public address, as a person would type it. */
  url: string;
  /** The local service, as a person would type it ("localhost:3000", "https://localhost:8443"). */
  local: string;
  target: LocalTarget;
  /** Whether its HTTP requests go to the inspector. */
  inspect: boolean;
  /** A pool member (several agents behind its name or port). */
  pool?: boolean;
  /** A private tunnel: reached with `burrow connect <target>` by its owner and these users. */
  private?: { target: string; shares: string[] };
  /** Its own rules as its POLICY_PASSED notes name them, when the server sends no note the agent can make itself (inspector/made-note.ts). */
  notes?: DerivedNotes;
}

export interface ReadyView {
  username: string;
  session: string;
  /** The server as the agent reaches it. */
  server: string;
  tunnels: TunnelView[];
}

export interface RequestEvent {
  tunnel: string;
  method: string;
  path: string;
  status: number | string;
  ms: number;
  /** "ws" for a WebSocket's upgrade: the WebSocket stays open until webSocketClosed. */
  kind?: "http" | "ws";
  /** The path route that served it (--route), when one did. */
  route?: string;
}

/**
 * A visitor's stream arrived on a tunnel: an HTTP request, a WebSocket, a
 * TCP connection or a UDP flow, by its tunnel's kind ("ws" for a WebSocket;
 * a tls tunnel's connection is told as "tcp", which is how it is served).
 */
export interface StreamOpenedEvent {
  tunnel: string;
  kind: TunnelKind | "ws";
}

/** A WebSocket through a tunnel ended: its visitor or the local service closed it, or its handshake failed. */
export interface WebSocketClosedEvent {
  tunnel: string;
  path: string;
  /** From the visitor's upgrade request to the close. */
  ms: number;
  /** Whether the local service took the upgrade (a request event said "101 websocket"). */
  opened: boolean;
}

export interface ConnectionEvent {
  tunnel: string;
  remote: string;
  event: "open" | "close";
  bytesIn?: number;
  bytesOut?: number;
  /** On close: how long the connection was open. */
  ms?: number;
  /** On close: why the local service could not be reached, when it could not. */
  error?: string;
}

/** A udp tunnel's flow (one visitor address and port) began or ended. Never its payloads. */
export interface FlowEvent {
  tunnel: string;
  /** The visitor, "ip:port". */
  remote: string;
  event: "open" | "close";
  /** On close: datagrams and bytes each way (in: toward the local service). */
  datagramsIn?: number;
  datagramsOut?: number;
  bytesIn?: number;
  bytesOut?: number;
  /** On close: datagrams dropped (the link congested, or too many before the local socket was made). */
  dropped?: number;
  /** On close: how long the flow lived. */
  ms?: number;
  /** On close: what the local service answered with an error (nothing listening), when it did. */
  error?: string;
  /** On open: the flow's counts as they grow, for a reader that shows open flows (the inspector); no output prints it. */
  live?: Readonly<FlowCounts>;
}

export interface AgentOutput {
  /** A session began (first connect or a reconnect): these tunnels are live. */
  ready(r: ReadyView): void;
  /** An HTTP request (or WebSocket upgrade) through a tunnel was answered or failed. */
  request(e: RequestEvent): void;
  /** A TCP connection through a tunnel opened or closed. */
  connection(e: ConnectionEvent): void;
  /** A UDP flow through a tunnel opened or closed. */
  flow?(e: FlowEvent): void;
  /** The connection to the server is down; the next try comes in `inMs`. */
  reconnecting(why: string, inMs: number, attempt: number): void;
  /** Something worth a line that changes nothing for the tunnels. */
  notice?(message: string): void;
  /** The server refused the whole session for good: the agent exits 1 after this. */
  refused(code: string, message: string): void;
  /** The server refused one tunnel of several; the others run (burrow start). It is not asked for again. */
  tunnelRefused?(name: string, code: string, message: string): void;
  /**
   * A request to a tunnel was answered by the server's traffic policies and
   * never came here (a POLICY note): for the inspector. Only an output that
   * has this asks the server for them.
   */
  policyNote?(tunnel: TunnelView, note: PolicyNote): void;
  /**
   * What the server's traffic policies did with a request they let through
   * to this agent, on the session's stream `note.stream` (a POLICY_PASSED
   * note): for the inspector. Only an output that has this asks for them.
   */
  policyPassed?(tunnel: TunnelView, note: PolicyPassed): void;
  /** A tunnel added on the live session (or given new settings) is live: the others went on untouched. */
  tunnelAdded?(t: TunnelView): void;
  /** A tunnel was removed from the live session; the others go on. */
  tunnelRemoved?(name: string): void;
  /** Round trip to the edge, from a PING's PONG (every keepalive interval). */
  latency?(ms: number): void;
  /**
   * A stream arrived: open until its request event (http), its
   * webSocketClosed (ws) or its connection close (tcp). Counts what is in
   * flight; called for every visitor, so it must be cheap.
   */
  streamOpened?(e: StreamOpenedEvent): void;
  /** A WebSocket ended (after its "101 websocket" request event, or instead of one when the handshake failed). */
  webSocketClosed?(e: WebSocketClosedEvent): void;
  /** The request inspector listens here (a URL a person opens in a browser). */
  inspector?(url: string): void;
  /**
   * The server said it is restarting (DRAIN): the session is going, and the
   * agent connects again at once and keeps trying quickly (no reconnecting
   * events) until a server answers READY.
   */
  restarting?(): void;
}
