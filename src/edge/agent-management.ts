/**
 * An agent's connection as the server's list of agents sees it (GET
 * /api/agents): what its HELLO said it is and takes (its version, OS and
 * architecture, when it started, which asks it takes), what it says it
 * runs now (wire.ts STATUS: its own names for its tunnels, the remote
 * config's version, its last error), and the server's asks (ASK: connect
 * again, run `burrow update`) with the agent's answer (ANSWER), which is
 * the agent's to give by its own flags.
 */
import * as v from "valibot";
import type { AgentAsk, AgentInfo, AskResult } from "../core/live.ts";
import { log } from "../log.ts";
import { parseJsonPayload, ProtocolError } from "../protocol/frames.ts";
import { Answer, Status } from "../protocol/messages.ts";
import { FrameType } from "../protocol/wire.ts";
import type { AgentSide, HelloSaid } from "./agent-context.ts";
import type { Tunnel } from "./registry.ts";

/** How long an ask waits for the agent's answer. */
export const ASK_TIMEOUT_MS = 10_000;
/** Asks waiting for an answer on one connection at most: an admin's clicks, not a flood. */
const MAX_ASKS = 8;

export class AgentManagement {
  /** What its last STATUS said. */
  private status?: Status;
  /** Each ask waiting, by its ref: settled with the agent's ANSWER, or with undefined when the connection ended first. */
  private readonly asks = new Map<number, (answer: Answer | undefined) => void>();
  private nextRef = 1;
  readonly connectedAt = new Date();

  constructor(
    private readonly side: AgentSide & { readonly said: Pick<HelloSaid, "agent" | "system" | "manage">; readonly live: boolean; readonly remote: boolean },
    /** Where visitors reach a tunnel (READY's url). */
    private readonly addressOf: (t: Tunnel) => string,
    /** The agent's names for the tunnels it added (ADD's `name`), by id. */
    private readonly addedNames: ReadonlyMap<string, string>,
  ) {}

  /** A STATUS frame: kept (the list shows it), and the list's rows on other nodes told. */
  receivedStatus(payload: Uint8Array): void {
    if (!this.side.isReady || !this.side.live) throw new ProtocolError("STATUS from an agent whose session does not say live");
    const parsed = v.safeParse(Status, parseJsonPayload(payload, "STATUS"));
    if (!parsed.success) throw new ProtocolError(`bad STATUS: ${parsed.issues[0]?.message}`);
    this.status = parsed.output;
    this.side.edge.registry.sessionChanged(this.side);
  }

  /** An ANSWER frame: the ask of that ref settles with it (one nobody waits for any more is dropped: it came late). */
  receivedAnswer(payload: Uint8Array): void {
    const parsed = v.safeParse(Answer, parseJsonPayload(payload, "ANSWER"));
    if (!parsed.success) throw new ProtocolError(`bad ANSWER: ${parsed.issues[0]?.message}`);
    const settle = this.asks.get(parsed.output.ref);
    this.asks.delete(parsed.output.ref);
    settle?.(parsed.output);
  }

  /** Asks the agent to reconnect or to update, and waits for its answer (ASK_TIMEOUT_MS at most). */
  ask(action: AgentAsk): Promise<AskResult> {
    const { mux, sessionId } = this.side;
    // an `ssh -R` forward has no agent of burrow's at the other end: OpenSSH's client can neither reconnect on an ask nor update
    if (this.side.transport.kind === "ssh") return Promise.resolve({ found: true, answered: true, accepted: false, message: `an SSH gateway session (ssh -R) takes no ${action} ask: its client is OpenSSH, not burrow's agent (end it by removing its SSH key)` });
    if (!this.side.live) return Promise.resolve({ found: true, answered: true, accepted: false, message: "the agent does not take the server's asks (it is older than them, or is a connector)" });
    if (mux.closed) return Promise.resolve({ found: true, answered: false });
    if (this.asks.size >= MAX_ASKS) return Promise.resolve({ found: true, answered: true, accepted: false, message: `${MAX_ASKS} asks are waiting for this agent's answer already` });
    const ref = this.nextRef++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.asks.delete(ref);
        resolve({ found: true, answered: false });
      }, ASK_TIMEOUT_MS);
      this.asks.set(ref, (a) => {
        clearTimeout(timer);
        // gone before it answered: no answer, not a refusal (the agent said nothing; it may well be back on a new connection)
        if (a === undefined) return resolve({ found: true, answered: false, why: "the agent's connection ended before it answered" });
        log.info("agent answered an ask", { session: sessionId, action, accepted: a.accepted });
        resolve({ found: true, answered: true, accepted: a.accepted, message: a.message });
      });
      mux.sendControl(FrameType.ASK, { ref, action });
    });
  }

  /** The connection ended: what waited for an answer hears there is none. */
  closed(): void {
    for (const settle of this.asks.values()) settle(undefined);
    this.asks.clear();
  }

  /** The agent as GET /api/agents lists it. */
  describe(tunnels: readonly Tunnel[]): AgentInfo {
    const { side } = this;
    const named = new Map((this.status?.tunnels ?? []).map((t) => [t.id, t]));
    return {
      id: side.sessionId,
      userId: side.userId,
      username: side.username,
      tokenId: side.tokenId,
      ...(side.said.agent !== undefined ? { agent: side.said.agent } : {}),
      ...(side.said.system ? { system: side.said.system } : {}),
      connectedAt: this.connectedAt.toISOString(),
      remote: side.transport.remote,
      transport: side.transport.kind,
      tunnels: tunnels.map((t) => {
        const said = named.get(t.id);
        const name = said?.name ?? this.addedNames.get(t.id);
        return { id: t.id, ...(name !== undefined ? { name } : {}), protocol: t.protocol, url: this.addressOf(t), ...(said?.source ? { source: said.source } : {}) };
      }),
      ...(side.connectsTo !== undefined ? { connects: side.connectsTo } : {}),
      config: { remote: side.remote, ...(this.status?.config ? { version: this.status.config.version, ...(this.status.config.error ? { error: this.status.config.error } : {}) } : {}) },
      ...(this.status?.error ? { lastError: this.status.error } : {}),
      ...(side.live && side.said.manage ? { manage: side.said.manage } : {}),
    };
  }
}
