/**
 * What the parts of the agent's client share: what it is asked to keep
 * open (AgentOptions, AgentTunnel), how one session ends (SessionOutcome),
 * and the client as its parts see it (ClientSide). The client itself is
 * client.ts (its runs and sessions); the move to the edge's direct port is
 * client-direct.ts, what the edge says on a session's control channel
 * client-control.ts, and what a refusal means for the next try
 * client-retries.ts.
 */
import type { AskAction, Config, Ready, TunnelRequest } from "../protocol/messages.ts";
import type { Mux } from "../protocol/mux.ts";
import type { Link } from "../sockets/links.ts";
import type { HealthSettings } from "./health.ts";
import type { RequestTaps } from "./inspector/tap.ts";
import type { LocalTarget } from "./local-target.ts";
import type { AgentOutput, TunnelView } from "./output.ts";

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
  /**
   * false: the agent does not say `live` in HELLO, and changes its tunnels
   * by connecting again, as the version before did (tests of the version
   * rules). Otherwise it adds and removes them on the live session when the
   * server takes that (READY's `live`).
   */
  live?: boolean;
  /**
   * false: the agent does not say `derived_notes` in HELLO, and is sent
   * every POLICY_PASSED note, as the version before was (tests of the
   * version rules). Otherwise its inspector makes the notes it can itself.
   */
  derivedNotes?: boolean;
  /**
   * `burrow start --remote`: the agent runs its token's tunnels kept on the
   * server. Its HELLO asks for none and says `remote`; each CONFIG the
   * server sends is given to `config` (remote-config.ts), and after each
   * READY the tunnels it ran are added again on the new session.
   */
  remote?: {
    config(c: Config): void;
    /** The version run now (-1: none yet) and why the last that came was not taken, for STATUS. */
    state?(): { version: number; error?: string };
  };
  /**
   * Which of the server's asks (wire.ts ASK) the agent takes: its own
   * flags (--remote-restart, --remote-update) and how it runs `burrow
   * update`. Undefined: it takes none (burrow-agent's programs).
   */
  manage?: { restart: boolean; update: boolean; runUpdate(): Promise<{ ok: boolean; message: string }> };
  /** Where each tunnel comes from (the command's tunnel set), for STATUS. */
  sourceOf?(name: string): "remote" | "local" | "api" | undefined;
}

/** What a change of the tunnels asked for came to (Agent.retune). */
export interface TunnelChange {
  /** Tunnels live now that were not before (or were given new settings). */
  added: TunnelView[];
  /** Tunnels the server refused, with why; they are not asked for again. */
  refused: { name: string; code: string; message: string }[];
  /** Tunnels no longer live. */
  removed: string[];
  /** Tunnels asked for while the connection is down: the next HELLO asks for them. */
  pending: string[];
  /** The server does not take changes on a live session (READY without `live`): the connection started again, and the other tunnels' requests in flight were cut. */
  reconnected: boolean;
}

export type SessionOutcome =
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

/** How a session ended, and whether READY came first (a session that was ready resets the backoff). */
export interface SessionResult {
  outcome: SessionOutcome;
  wasReady: boolean;
}

/** The client as its parts see it: what it was asked, whether it is stopping, its connection, and how it connects. */
export interface ClientSide {
  readonly opts: AgentOptions;
  /** stop() was called: whatever is under way ends as "stopped". */
  readonly stopping: boolean;
  /** The mux of the latest session (the one READY and ROTATION go out on); undefined before the first. */
  readonly mux: Mux | undefined;
  /** A session over `link`. `answerWithinMs`: without READY or ERROR by then, the session is lost. */
  runSession(link: Link, direct: boolean, answerWithinMs?: number): Promise<SessionResult>;
  /** One connect from the start: the direct port when it may go there, else the WebSocket. */
  connectOnce(): Promise<SessionResult>;
  /** The server asks (ASK): the answer, and what to do once it is sent. */
  asked(action: AskAction): { accepted: boolean; message: string; then?: () => void };
}
