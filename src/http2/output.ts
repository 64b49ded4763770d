/**
 * What one connection sends: frames written back to back into one buffer
 * and handed to the socket together, once the turn that made them is over
 * (a response's HEADERS, DATA and END_STREAM go in one write), or at once
 * when the batch reaches BATCH_BYTES.
 *
 * The socket side (Http2Io) takes every write and says false when some of
 * it waits for the kernel; from then the connection is `blocked`: streams
 * stop sending DATA until drained(). Frames the connection must still say
 * meanwhile (answers to PING and SETTINGS, resets) are bounded: past
 * H2_MAX_QUEUED_CONTROL_BYTES queued for a client that does not read, the
 * connection is cut (the flood of answers CVE-2019-9512/9515 describe).
 */
import { giveBackScratch, lendScratch } from "../protocol/scratch.ts";
import { Flag, FRAME_HEADER_LENGTH, FrameType } from "./wire.ts";

/** The socket, as the connection needs it. */
export interface Http2Io {
  /** Writes bytes; false when some of them wait for the socket (drained() follows). The bytes are the caller's no more: a view of them may be kept. */
  write(bytes: Uint8Array): boolean;
  /** Closes once what was written has gone out. */
  close(): void;
  /** Closes at once. */
  terminate(): void;
}

/** A batch this large leaves at once, inside a turn or not. */
export const BATCH_BYTES = 64 * 1024;

export class Output {
  /** The socket holds bytes it could not write yet. */
  blocked = false;
  /** Bytes handed to the socket while it was blocked. */
  private sinceBlocked = 0;
  private buf: Uint8Array | undefined;
  private size = 0;
  private corked = 0;
  private scheduled = false;
  private done = false;
  private readonly flushTask = () => {
    this.scheduled = false;
    this.flush();
  };

  constructor(
    private readonly io: Http2Io,
    /** Past this many bytes queued for a socket that does not drain: called once, to cut the connection. */
    private readonly maxWhileBlocked: number,
    private readonly overflowed: () => void,
  ) {}

  /** Frames written until uncork() leave together. */
  cork(): void {
    this.corked++;
  }

  /** `now`: what waits leaves at once rather than at the end of the turn. */
  uncork(now = false): void {
    if (--this.corked > 0) return;
    if (now) this.flush();
    else this.schedule();
  }

  /** The socket wrote everything it held. */
  drained(): void {
    this.blocked = false;
    this.sinceBlocked = 0;
  }

  /** Sends what waits, then closes the socket once it is written. */
  close(): void {
    if (this.done) return;
    this.flush();
    this.done = true;
    this.io.close();
  }

  /** Closes the socket at once; what waits is dropped. */
  terminate(): void {
    this.done = true;
    this.drop();
    this.io.terminate();
  }

  /** Forgets what waits (the socket is gone). */
  drop(): void {
    this.done = true;
    if (this.buf) giveBackScratch(this.buf);
    this.buf = undefined;
    this.size = 0;
  }

  // -- frames ------------------------------------------------------------------------------------------

  /** Room for a frame with `length` bytes of payload; writes its header and returns where its payload goes (in `bytes`). */
  private frame(length: number, type: number, flags: number, stream: number): number {
    const needed = FRAME_HEADER_LENGTH + length;
    if (this.buf === undefined) {
      this.buf = lendScratch(needed);
      this.size = 0;
    } else if (this.size + needed > this.buf.byteLength) {
      if (this.size >= BATCH_BYTES) {
        this.flush();
        this.buf = lendScratch(needed);
        this.size = 0;
      } else {
        const grown = lendScratch(this.size + needed);
        grown.set(this.buf.subarray(0, this.size));
        giveBackScratch(this.buf);
        this.buf = grown;
      }
    }
    const b = this.buf;
    let at = this.size;
    b[at++] = length >>> 16;
    b[at++] = (length >>> 8) & 0xff;
    b[at++] = length & 0xff;
    b[at++] = type;
    b[at++] = flags;
    b[at++] = (stream >>> 24) & 0x7f;
    b[at++] = (stream >>> 16) & 0xff;
    b[at++] = (stream >>> 8) & 0xff;
    b[at++] = stream & 0xff;
    this.size = at + length;
    return at;
  }

  /** The frame is complete: the batch leaves now if it is large, else at the turn's end. */
  private written(): void {
    if (this.size >= BATCH_BYTES) this.flush();
    else if (this.corked === 0) this.schedule();
  }

  private u32(at: number, value: number): void {
    const b = this.buf!;
    b[at] = (value >>> 24) & 0xff;
    b[at + 1] = (value >>> 16) & 0xff;
    b[at + 2] = (value >>> 8) & 0xff;
    b[at + 3] = value & 0xff;
  }

  /** SETTINGS with `pairs` as [id, value, id, value...]. */
  settings(pairs: readonly number[]): void {
    let at = this.frame(pairs.length * 3, FrameType.SETTINGS, 0, 0);
    for (let i = 0; i < pairs.length; i += 2) {
      this.buf![at] = pairs[i]! >>> 8;
      this.buf![at + 1] = pairs[i]! & 0xff;
      this.u32(at + 2, pairs[i + 1]!);
      at += 6;
    }
    this.written();
  }

  settingsAck(): void {
    this.frame(0, FrameType.SETTINGS, Flag.ACK, 0);
    this.written();
  }

  pingAck(opaque: Uint8Array): void {
    const at = this.frame(8, FrameType.PING, Flag.ACK, 0);
    this.buf!.set(opaque, at);
    this.written();
  }

  goaway(lastStream: number, code: number, debug: string): void {
    const text = Buffer.from(debug.slice(0, 200), "latin1");
    const at = this.frame(8 + text.byteLength, FrameType.GOAWAY, 0, 0);
    this.u32(at, lastStream);
    this.u32(at + 4, code);
    this.buf!.set(text, at + 8);
    this.written();
  }

  rstStream(stream: number, code: number): void {
    const at = this.frame(4, FrameType.RST_STREAM, 0, stream);
    this.u32(at, code);
    this.written();
  }

  windowUpdate(stream: number, increment: number): void {
    const at = this.frame(4, FrameType.WINDOW_UPDATE, 0, stream);
    this.u32(at, increment);
    this.written();
  }

  /** One DATA frame (its bytes copied into the batch). */
  data(stream: number, endStream: boolean, bytes: Uint8Array): void {
    const at = this.frame(bytes.byteLength, FrameType.DATA, endStream ? Flag.END_STREAM : 0, stream);
    this.buf!.set(bytes, at);
    this.written();
  }

  /** A header block as HEADERS and as many CONTINUATION frames as `maxFrameSize` asks, back to back (nothing may come between them). */
  headers(stream: number, endStream: boolean, block: Uint8Array, maxFrameSize: number): void {
    let at = 0;
    let type: number = FrameType.HEADERS;
    let flags = endStream ? Flag.END_STREAM : 0;
    do {
      const n = Math.min(maxFrameSize, block.byteLength - at);
      const last = at + n === block.byteLength;
      const p = this.frame(n, type, flags | (last ? Flag.END_HEADERS : 0), stream);
      this.buf!.set(block.subarray(at, at + n), p);
      at += n;
      type = FrameType.CONTINUATION;
      flags = 0;
    } while (at < block.byteLength);
    this.written();
  }

  // -- to the socket ---------------------------------------------------------------------------------

  private schedule(): void {
    if (this.scheduled || this.size === 0) return;
    this.scheduled = true;
    queueMicrotask(this.flushTask);
  }

  /** Hands the batch to the socket now. */
  flush(): void {
    const buf = this.buf;
    const size = this.size;
    if (buf === undefined || size === 0 || this.done) return;
    this.buf = undefined;
    this.size = 0;
    if (this.blocked) this.sinceBlocked += size;
    // a socket that took it all keeps no view of it: the buffer serves the next batch
    if (this.io.write(buf.subarray(0, size))) giveBackScratch(buf);
    else this.blocked = true;
    if (this.blocked && this.sinceBlocked > this.maxWhileBlocked) {
      this.done = true;
      this.overflowed();
    }
  }
}
