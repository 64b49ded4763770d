/**
 * The captured requests: the newest --inspect-keep of them, fewer when their
 * bodies together pass MAX_TOTAL_BODY_BYTES, oldest out first. It is what
 * the agent's request paths report to (RequestTaps), what the API reads,
 * and the source of the live stream, which gets what changed in batches
 * (STREAM_BATCH_MS) and only while someone listens.
 */
import type { PolicyNote, PolicyPassed } from "../../protocol/messages.ts";
import type { TunnelView } from "../output.ts";
import { Capture, type CaptureOwner } from "./capture.ts";
import { MAX_TOTAL_BODY_BYTES, STREAM_BATCH_MS } from "./limits.ts";
import type { RequestTaps, TappedRequest } from "./tap.ts";

export type StoreNews = { kind: "changed"; captures: Capture[] } | { kind: "cleared" };

export interface ListQuery {
  tunnel?: string;
  limit?: number;
}

export class CaptureStore implements RequestTaps, CaptureOwner {
  private nextId = 1;
  /**
   * The captures, oldest first, in a ring of `keep` slots: ids are
   * consecutive and leave only from the oldest end, so id N sits at
   * (head + N - oldest id) and no lookup table is needed.
   */
  private readonly ring: (Capture | undefined)[];
  private head = 0;
  private count = 0;
  private held = 0;
  private readonly listeners = new Set<(news: StoreNews) => void>();
  private readonly dirty = new Set<Capture>();
  private flushTimer: ReturnType<typeof setTimeout> | undefined;
  /** The tunnels of the agent's current session (from its ready event). */
  tunnels: TunnelView[] = [];

  constructor(
    readonly keep: number,
    private readonly maxHeldBytes = MAX_TOTAL_BODY_BYTES,
  ) {
    this.ring = new Array(keep);
  }

  begin(tunnel: TunnelView, request: TappedRequest, replayOf?: number): Capture | undefined {
    if (!tunnel.inspect) return undefined;
    if (this.count === this.keep) this.dropOldest();
    const capture = new Capture(this.nextId++, tunnel, request.method, request.path, request.headers, request.remote, request.websocket ? "ws" : "http", this, replayOf, request.route, request.started);
    this.ring[(this.head + this.count) % this.keep] = capture;
    this.count++;
    if (request.stream !== undefined) this.onStream(request.stream, capture);
    this.changed(capture);
    return capture;
  }

  /**
   * The latest capture on each of the session's streams, for the server's
   * POLICY_PASSED notes, which name a request by its stream (a kept stream
   * carries one request after another; a note comes before the next).
   * Bounded: as many as the store keeps captures.
   */
  private readonly byStream = new Map<number, Capture>();

  private onStream(stream: number, capture: Capture): void {
    const streams = this.byStream;
    streams.delete(stream);
    streams.set(stream, capture);
    if (streams.size > this.keep) streams.delete(streams.keys().next().value!);
  }

  /** A new session: its streams are not the last one's. */
  sessionBegan(): void {
    this.byStream.clear();
  }

  /** What the server's traffic policies did with a request they let through (a POLICY_PASSED note): shown with its capture. */
  passedAtEdge(tunnel: TunnelView, note: PolicyPassed): void {
    const capture = this.byStream.get(note.stream);
    if (!capture || capture.evicted || capture.tunnel.name !== tunnel.name) return;
    capture.passedNote = note;
    this.changed(capture);
  }

  /** A request the server's traffic policies answered (a POLICY note): listed as one, marked as the edge's answer. */
  answeredAtEdge(tunnel: TunnelView, note: PolicyNote): void {
    const capture = this.begin(tunnel, { method: note.method, path: note.target, headers: [], websocket: false, remote: note.remote ?? "" });
    capture?.edgeAnswer(note);
  }

  get(id: number): Capture | undefined {
    const oldest = this.at(0);
    if (!oldest || !Number.isInteger(id)) return undefined;
    const offset = id - oldest.id;
    return offset >= 0 && offset < this.count ? this.at(offset) : undefined;
  }

  /** Newest first. */
  list(query: ListQuery = {}): Capture[] {
    const out: Capture[] = [];
    const limit = query.limit ?? this.keep;
    for (let i = this.count - 1; i >= 0 && out.length < limit; i--) {
      const c = this.at(i)!;
      if (query.tunnel === undefined || c.tunnel.name === query.tunnel) out.push(c);
    }
    return out;
  }

  get size(): number {
    return this.count;
  }

  /** Body bytes held by all captures. */
  get heldBytes(): number {
    return this.held;
  }

  clear(): void {
    while (this.count > 0) this.dropOldest();
    this.byStream.clear();
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
    // the newest stays even alone over budget: it holds at most two bodies' caps
    while (this.held > this.maxHeldBytes && this.count > 1) this.dropOldest();
  }

  // -- internals -----------------------------------------------------------------------------------

  private at(offset: number): Capture | undefined {
    return this.ring[(this.head + offset) % this.keep];
  }

  private dropOldest(): void {
    const oldest = this.ring[this.head]!;
    this.ring[this.head] = undefined;
    this.head = (this.head + 1) % this.keep;
    this.count--;
    this.held -= oldest.heldBytes;
    oldest.release();
    if (this.dirty.size > 0) this.dirty.delete(oldest);
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
