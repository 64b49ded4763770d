/**
 * The udp tunnels' flows as the inspector lists them: those open now, with
 * their counts as they grow, and the last FLOWS_KEPT that ended. Sources,
 * counts and ages only: a flow's payloads are never kept.
 */
import type { FlowCounts } from "../udp.ts";
import type { FlowEvent } from "../output.ts";

/** Ended flows the list keeps, newest first out last. */
export const FLOWS_KEPT = 200;

interface Flow {
  tunnel: string;
  remote: string;
  startedAt: Date;
  counts: Readonly<FlowCounts>;
  /** Once ended: how long it lived, and the service's error if there was one. */
  ended?: { ms: number; error?: string };
}

export interface FlowJson {
  tunnel: string;
  remote: string;
  state: "open" | "ended";
  started_at: string;
  /** How long it has been open, or how long it lived. */
  age_ms: number;
  datagrams_in: number;
  datagrams_out: number;
  bytes_in: number;
  bytes_out: number;
  dropped: number;
  error: string | null;
}

const NO_COUNTS: FlowCounts = { datagramsIn: 0, datagramsOut: 0, bytesIn: 0, bytesOut: 0, dropped: 0 };

export class FlowList {
  /** Open flows by "tunnel remote". */
  private readonly open = new Map<string, Flow>();
  /** Ended ones, oldest first. */
  private readonly ended: Flow[] = [];

  constructor(private readonly now: () => number = Date.now) {}

  /** The agent's flow event (output.ts). */
  heard(e: FlowEvent): void {
    const key = `${e.tunnel} ${e.remote}`;
    if (e.event === "open") {
      this.open.set(key, { tunnel: e.tunnel, remote: e.remote, startedAt: new Date(this.now()), counts: e.live ?? NO_COUNTS });
      return;
    }
    const flow = this.open.get(key);
    if (!flow) return;
    this.open.delete(key);
    const { datagramsIn = 0, datagramsOut = 0, bytesIn = 0, bytesOut = 0, dropped = 0 } = e;
    flow.counts = { datagramsIn, datagramsOut, bytesIn, bytesOut, dropped };
    flow.ended = { ms: e.ms ?? this.now() - flow.startedAt.getTime(), ...(e.error ? { error: e.error } : {}) };
    this.ended.push(flow);
    if (this.ended.length > FLOWS_KEPT) this.ended.shift();
  }

  /** Open flows first, then the ended ones, newest first within each; `tunnel` keeps one tunnel's. */
  list(tunnel?: string): FlowJson[] {
    const now = this.now();
    const of = (flows: Iterable<Flow>) => [...flows].filter((f) => tunnel === undefined || f.tunnel === tunnel).reverse();
    return [...of(this.open.values()), ...of(this.ended)].map((f) => ({
      tunnel: f.tunnel,
      remote: f.remote,
      state: f.ended ? "ended" : "open",
      started_at: f.startedAt.toISOString(),
      age_ms: Math.round(f.ended ? f.ended.ms : now - f.startedAt.getTime()),
      datagrams_in: f.counts.datagramsIn,
      datagrams_out: f.counts.datagramsOut,
      bytes_in: f.counts.bytesIn,
      bytes_out: f.counts.bytesOut,
      dropped: f.counts.dropped,
      error: f.ended?.error ?? null,
    }));
  }
}
