/**
 * The captured requests: the newest --inspect-keep of them, fewer when their
 * bodies together pass MAX_TOTAL_BODY_BYTES, oldest out first. It is what
 * the agent's request paths report to (RequestTaps), what the API reads,
 * and the source of the live stream, which gets what changed in batches
 * (STREAM_BATCH_MS) and only while someone listens.
 */
import type { OpenMeta } from "../../protocol/messages.ts";
import type { TunnelView } from "../output.ts";
import { Capture, type CaptureOwner } from "./capture.ts";
import { MAX_TOTAL_BODY_BYTES, STREAM_BATCH_MS } from "./limits.ts";
import type { RequestTaps } from "./tap.ts";

export type StoreNews = { kind: "changed"; captures: Capture[] } | { kind: "cleared" };

export interface ListQuery {
  tunnel?: string;
  limit?: number;
}

export class CaptureStore implements RequestTaps, CaptureOwner {
  private nextId = 1;
  /** By id; a Map keeps insertion order, so the first entry is the oldest. */
  private readonly captures = new Map<number, Capture>();
  private held = 0;
  private readonly listeners = new Set<(news: StoreNews) => void>();
  private readonly dirty = new Set<Capture>();
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  /** The tunnels of the agent's current session (from its ready event). */
  tunnels: TunnelView[] = [];

  constructor(
    readonly keep: number,
    private readonly maxHeldBytes = MAX_TOTAL_BODY_BYTES,
  ) {}

  begin(tunnel: TunnelView, meta: OpenMeta, replayOf?: number): Capture | undefined {
    if (!tunnel.inspect || !meta.head) return undefined;
    const capture = new Capture(this.nextId++, tunnel, meta.head, meta.remote, meta.kind === "ws" ? "ws" : "http", this, replayOf);
    this.captures.set(capture.id, capture);
    this.trim();
    this.changed(capture);
    return capture;
  }

  get(id: number): Capture | undefined {
    return this.captures.get(id);
  }

  /** Newest first. */
  list(query: ListQuery = {}): Capture[] {
    const out: Capture[] = [];
    const limit = query.limit ?? this.keep;
    const all = [...this.captures.values()];
    for (let i = all.length - 1; i >= 0 && out.length < limit; i--) {
      const c = all[i]!;
      if (query.tunnel === undefined || c.tunnel.name === query.tunnel) out.push(c);
    }
    return out;
  }

  get size(): number {
    return this.captures.size;
  }

  /** Body bytes held by all captures. */
  get heldBytes(): number {
    return this.held;
  }

  clear(): void {
    for (const c of this.captures.values()) c.evicted = true;
    this.captures.clear();
    this.dirty.clear();
    this.held = 0;
    for (const l of this.listeners) l({ kind: "cleared" });
  }

  /** Hears of changes until the returned function is called. */
  subscribe(listener: (news: StoreNews) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.dirty.clear();
    };
  }

  // -- CaptureOwner --------------------------------------------------------------------------------

  changed(capture: Capture): void {
    if (this.listeners.size === 0) return; // nobody watching: no work at all
    this.dirty.add(capture);
    this.flushTimer ??= setTimeout(this.flush, STREAM_BATCH_MS);
  }

  grew(n: number): void {
    this.held += n;
    if (this.held > this.maxHeldBytes) this.trim();
  }

  // -- internals -----------------------------------------------------------------------------------

  private trim(): void {
    for (const oldest of this.captures.values()) {
      // the newest stays even alone over budget: it holds at most two bodies' caps
      if (this.captures.size <= 1 || (this.captures.size <= this.keep && this.held <= this.maxHeldBytes)) return;
      this.captures.delete(oldest.id);
      this.dirty.delete(oldest);
      oldest.evicted = true;
      this.held -= oldest.heldBytes;
    }
  }

  private readonly flush = (): void => {
    this.flushTimer = undefined;
    const batch = [...this.dirty].filter((c) => !c.evicted);
    this.dirty.clear();
    if (batch.length === 0) return;
    for (const l of this.listeners) l({ kind: "changed", captures: batch });
    for (const c of batch) c.announced = true;
  };
}
