/**
 * Two Mux instances, "edge" and "agent", joined by an in-memory message
 * transport. Every frame sent is logged (decoded) with what send() answered,
 * so tests can count bytes on the wire. Optionally the transport pushes back:
 * send() says "backpressure" once more than `backpressureAt` bytes wait for
 * delivery, and the sending mux is told drained() when its queue empties.
 * With `cutReads`, each direction is a byte stream instead, as on the
 * direct port: the bytes are delivered in reads cut at random places,
 * through a FrameReader that passes DATA frames cut by reads on in pieces.
 */
import { FrameReader } from "../../src/protocol/frame-reader.ts";
import { decodeFrames, type Frame } from "../../src/protocol/frames.ts";
import { Mux, type MuxOptions, type SendResult } from "../../src/protocol/mux.ts";
import { FrameType } from "../../src/protocol/wire.ts";
import { between, prng } from "./support.ts";

export type Side = "edge" | "agent";
type SideOptions = Partial<Omit<MuxOptions, "send" | "role">>;

export type WireEvent =
  | { kind: "send"; frame: Frame; result: SendResult }
  | { kind: "drained" };

export interface PairOptions {
  edge?: SideOptions;
  agent?: SideOptions;
  /** Applied to both sides unless a side sets its own. */
  initialWindow?: number;
  /** Queued bytes (per direction) beyond which send() reports "backpressure". */
  backpressureAt?: number;
  /** How frames are delivered: a microtask per batch, or a macrotask (default). */
  delivery?: "microtask" | "immediate";
  /** A byte stream cut into reads of 1 to `max` bytes at places drawn from `seed`, read by a FrameReader. */
  cutReads?: { seed: number; max: number };
}

class Link {
  readonly log: WireEvent[] = [];
  private queue: Uint8Array[] = [];
  queuedBytes = 0;
  private scheduled = false;
  private saidBackpressure = false;
  /** Set once both muxes exist. */
  from!: Mux;
  to!: Mux;
  private reader?: FrameReader;
  private cut?: () => number;

  constructor(private readonly opts: PairOptions) {
    if (!opts.cutReads) return;
    const rand = prng(opts.cutReads.seed);
    const max = opts.cutReads.max;
    this.cut = () => between(rand, 1, max);
    this.reader = new FrameReader(
      (frames) => this.to.receive(frames),
      (piece) => this.to.receiveFrame(piece),
    );
  }

  get idle(): boolean {
    return !this.scheduled && this.queue.length === 0;
  }

  send(message: Uint8Array): SendResult {
    // a copy: the log must show what went on the wire even if the sender reuses its buffer
    const copy = message.slice();
    this.queue.push(copy);
    this.queuedBytes += copy.byteLength;
    this.schedule();
    let result: SendResult = "sent";
    if (this.opts.backpressureAt !== undefined && this.queuedBytes > this.opts.backpressureAt) {
      this.saidBackpressure = true;
      result = "backpressure";
    }
    // a message may carry several frames: each is logged with what its message's send() answered
    decodeFrames(copy, (frame) => this.log.push({ kind: "send", frame, result }));
    return result;
  }

  private schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    if (this.opts.delivery === "microtask") queueMicrotask(() => this.deliver());
    else setImmediate(() => this.deliver());
  }

  private deliver() {
    this.scheduled = false;
    const batch = this.queue;
    this.queue = [];
    if (this.reader) this.readCut(batch);
    else
      for (const message of batch) {
        this.queuedBytes -= message.byteLength;
        this.to.receive(message);
      }
    if (this.queue.length > 0) return this.schedule();
    if (this.saidBackpressure) {
      this.saidBackpressure = false;
      this.log.push({ kind: "drained" });
      this.from.drained();
    }
  }

  /** The messages as one byte stream, in reads of random sizes, each a fresh buffer as a socket's are. */
  private readCut(batch: Uint8Array[]) {
    const all = Buffer.concat(batch);
    for (const message of batch) this.queuedBytes -= message.byteLength;
    for (let at = 0; at < all.byteLength; ) {
      const n = Math.min(this.cut!(), all.byteLength - at);
      this.reader!.push(all.slice(at, at + n));
      at += n;
    }
  }

  /** Frames of one type sent over this link. */
  frames(type?: number): Frame[] {
    const out: Frame[] = [];
    for (const e of this.log) if (e.kind === "send" && (type === undefined || e.frame.type === type)) out.push(e.frame);
    return out;
  }

  /** DATA payload bytes sent over this link, optionally for one stream. */
  dataBytes(stream?: number): number {
    let n = 0;
    for (const f of this.frames(FrameType.DATA)) if (stream === undefined || f.stream === stream) n += f.payload.byteLength;
    return n;
  }
}

export interface MemoryPair {
  edge: Mux;
  agent: Mux;
  /** edge -> agent */
  toAgent: Link;
  /** agent -> edge */
  toEdge: Link;
  closes: Record<Side, { code: string; message: string }[]>;
  /** Resolves once no frame is queued or scheduled in either direction. */
  settle(): Promise<void>;
}

export function memoryPair(opts: PairOptions = {}): MemoryPair {
  const toAgent = new Link(opts);
  const toEdge = new Link(opts);
  const closes: MemoryPair["closes"] = { edge: [], agent: [] };
  const make = (role: Side, link: Link, side: SideOptions = {}) =>
    new Mux({
      ...side,
      role,
      initialWindow: side.initialWindow ?? opts.initialWindow,
      send: (frame) => link.send(frame),
      onClose: (code, message) => {
        closes[role].push({ code, message });
        side.onClose?.(code, message);
      },
    });
  const edge = make("edge", toAgent, opts.edge);
  const agent = make("agent", toEdge, opts.agent);
  toAgent.from = edge;
  toAgent.to = agent;
  toEdge.from = agent;
  toEdge.to = edge;

  async function settle() {
    // each turn lets scheduled deliveries run; a livelock ends in an error, not a hung test
    for (let turn = 0; turn < 1_000_000; turn++) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      if (toAgent.idle && toEdge.idle) return;
    }
    throw new Error("the pair never went quiet");
  }

  return { edge, agent, toAgent, toEdge, closes, settle };
}
