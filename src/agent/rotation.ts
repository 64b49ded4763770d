/**
 * The agent's side of its pool memberships (edge/pool.ts): which of its
 * tunnels READY said are pool members, their health checks (health.ts),
 * and a rolling restart's leaving: on stop, every member leaves the
 * rotation first (ROTATION), what is in flight finishes (up to the drain
 * timeout), and only then does the agent disconnect. So a member stopped
 * with Ctrl-C or SIGTERM loses no request: the pool's other members take
 * the new ones meanwhile.
 */
import { runtime } from "../runtime/current.ts";
import type { Rotation } from "../protocol/messages.ts";
import { HealthCheck, type HealthSettings } from "./health.ts";
import type { AgentOutput, TunnelView } from "./output.ts";
import { relayOutput } from "./output-relay.ts";

/** How long a stopping member waits for what is in flight, unless told otherwise (--drain-timeout). */
export const DEFAULT_DRAIN_MS = 15_000;
/**
 * A stopping member leaves once nothing is in flight and nothing new has
 * come for this long: requests sent before the edge heard it leave are on
 * their way, and with several nodes another node hears of it a moment
 * later (cluster/remote-tunnels.ts), longer on a loaded machine.
 */
const QUIET_MS = 500;

export class PoolMembership {
  /** Streams in flight: requests not answered, WebSockets and connections not closed. */
  private busy = 0;
  /** When the last stream came (a leaving member waits for them to stop coming). */
  private lastOpened = 0;
  private readonly checks = new Map<string, HealthCheck>();
  /** Pool members of the current session: the edge's id -> the tunnel's name. */
  private members = new Map<string, string>();
  private send?: (r: Rotation) => void;
  private leaving = false;

  constructor(
    private readonly out: AgentOutput,
    /** Health settings by tunnel name (--health-check). */
    private readonly health: Map<string, HealthSettings>,
    private readonly targets: Map<string, TunnelView["target"]>,
  ) {}

  /** A tunnel added on the live session (or given another local service): its health check's settings, for when READY or ADDED says it is a member. */
  adopt(name: string, target: TunnelView["target"], health: HealthSettings | undefined): void {
    this.forget(name);
    this.targets.set(name, target);
    if (health) this.health.set(name, health);
  }

  /** A tunnel removed from the live session: its health check stops. */
  forget(name: string): void {
    this.checks.get(name)?.stop();
    this.checks.delete(name);
    this.health.delete(name);
    this.targets.delete(name);
  }

  /** Whether any tunnel of the session is a pool member. */
  get pooled(): boolean {
    return this.members.size > 0;
  }

  /** A session began: its pool members, and what their rotation is to be now. */
  ready(live: Iterable<TunnelView>, send: (r: Rotation) => void): void {
    this.send = send;
    this.members = new Map([...live].filter((t) => t.pool).map((t) => [t.id, t.name]));
    for (const [id, name] of this.members) {
      const settings = this.health.get(name);
      if (settings && !this.checks.has(name)) {
        const check = new HealthCheck(this.targets.get(name)!, settings, (healthy, why) => this.changed(name, healthy, why));
        this.checks.set(name, check);
        check.start();
      }
      // the edge puts every member of a new session in rotation: one that should not be says so
      if (this.leaving || this.checks.get(name)?.isHealthy === false) send({ tunnel: id, in: false });
    }
  }

  private changed(name: string, healthy: boolean, why: string): void {
    this.out.notice?.(`${name}: ${healthy ? "back in the pool's rotation" : "out of the pool's rotation"} (${why})`);
    if (this.leaving) return;
    for (const [id, n] of this.members) if (n === name) this.send?.({ tunnel: id, in: healthy });
  }

  /** The agent's output with the streams in flight counted (serve-stream.ts tells it of each). */
  counting(out: AgentOutput): AgentOutput {
    const self = this;
    const done = () => {
      if (self.busy > 0) self.busy--;
    };
    const counted: Partial<AgentOutput> = {
      request(e) {
        if (e.kind !== "ws") done();
        out.request(e);
      },
      connection(e) {
        if (e.event === "close") done();
        out.connection(e);
      },
      flow(e) {
        if (e.event === "close") done();
        out.flow?.(e);
      },
      webSocketClosed(e) {
        done();
        out.webSocketClosed?.(e);
      },
      streamOpened(e) {
        self.busy++;
        // read only by a pool member that leaves: no clock read per request for the others
        if (self.members.size > 0) self.lastOpened = Date.now();
        out.streamOpened?.(e);
      },
    };
    return relayOutput(out, counted);
  }

  /**
   * Leaves every pool's rotation and waits until nothing is in flight, or
   * `timeoutMs`; resolves at once for an agent in no pool.
   */
  async leave(timeoutMs: number): Promise<void> {
    if (!this.pooled || this.leaving) return;
    this.leaving = true;
    for (const id of this.members.keys()) this.send?.({ tunnel: id, in: false });
    this.out.notice?.("leaving the pool: finishing what is in flight");
    const deadline = Date.now() + timeoutMs;
    // a moment first: a request the edge sent before it heard may be on its way
    await runtime.sleep(QUIET_MS);
    while ((this.busy > 0 || Date.now() - this.lastOpened < QUIET_MS) && Date.now() < deadline) await runtime.sleep(50);
  }

  stop(): void {
    for (const check of this.checks.values()) check.stop();
  }
}
