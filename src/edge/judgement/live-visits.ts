/**
 * The visits that stay after they were let through — a raw tcp or tls
 * connection, a WebSocket's pipe, a connector's stream, a stream relayed
 * from another node — kept by their tunnel, so that when its rules narrow
 * (an admin's change to its owner's allow_cidrs: edge/live-rules.ts) the
 * access step is run again for each, and those it refuses now end, as a
 * new visit from the same address would be refused. When the tunnel's
 * traffic policies change (an operator's), each is judged again by them,
 * with the facts it came with (`judgedBy`: traffic-policy/live-rejudge.ts).
 * A request that passes and ends is judged anew with the next one; a udp
 * flow's datagrams are judged one by one: neither is kept here.
 */
import type { Stream } from "../../protocol/mux.ts";

/** What the visits are kept by and judged against: a tunnel (registry.ts), as far as this file reads it. */
interface Keeper {
  access?: { refusesAddress(address: string): boolean };
  liveVisits?: LiveVisits;
}

export interface LiveVisit {
  /** The address the IP rules judge. */
  readonly client: string;
  /** It ended by itself: no longer judged (dropped at the next sweep). */
  readonly over: boolean;
  /** Ends it: its rules no longer let it through. */
  end(): void;
  /** What its tunnel's traffic policies judge it by (its connection's facts, a pipe's request head), made when they change; none: only its IP rules judge it again. */
  judgedBy?(): JudgedBy | undefined;
}

/**
 * The facts a traffic policy judges a live visit by, as this file holds
 * them: only traffic-policy/live-rejudge.ts reads them (its PolicySubject),
 * which the judgement does not import (it imports the judgement).
 */
export interface JudgedBy {
  readonly connect: object;
  readonly request?: object;
}

/** Past this many, ended visits are swept out when one comes (then past twice as many as are left). */
const FIRST_SWEEP = 256;

export class LiveVisits {
  private readonly visits = new Set<LiveVisit>();
  private sweepAt = FIRST_SWEEP;

  get size(): number {
    return this.visits.size;
  }

  add(v: LiveVisit): void {
    this.visits.add(v);
    if (this.visits.size < this.sweepAt) return;
    // visits that end without telling (streams) are let go here: the set stays as large as what is live
    for (const known of this.visits) if (known.over) this.visits.delete(known);
    this.sweepAt = Math.max(FIRST_SWEEP, this.visits.size * 2);
  }

  delete(v: LiveVisit): void {
    this.visits.delete(v);
  }

  /** The visits now, to judge them again a batch at a time (live-rejudge.ts). */
  list(): LiveVisit[] {
    return [...this.visits];
  }

  /** The access step again for each (judgement/pipeline.ts): those the tunnel's IP rules refuse now end. How many ended. */
  rejudge(t: Keeper): number {
    let ended = 0;
    for (const v of this.visits) {
      if (v.over) {
        this.visits.delete(v);
        continue;
      }
      if (!t.access?.refusesAddress(v.client)) continue;
      this.visits.delete(v);
      v.end();
      ended++;
    }
    return ended;
  }
}

/** Keeps `v` with `t` until it ends (`delete` it then, or let its `over` say so). */
export function stays(t: Keeper, v: LiveVisit): void {
  (t.liveVisits ??= new LiveVisits()).add(v);
}

/** A stream let through (a connector's, a relayed one): it stays until it closes, and is reset when its rules no longer let it through. `judgedBy`: what its tunnel's policies judge it by. The visit kept. */
export function staysWhileOpen(t: Keeper, client: string, stream: Stream, judgedBy?: () => JudgedBy | undefined): LiveVisit {
  const v: LiveVisit = {
    client,
    get over() {
      return stream.isClosed;
    },
    end: () => stream.reset(ADDRESS_REFUSED),
    judgedBy,
  };
  stays(t, v);
  return v;
}

/** The code a stream is reset with when the tunnel's IP rules no longer let it through. */
const ADDRESS_REFUSED = "ADDRESS_REFUSED";
