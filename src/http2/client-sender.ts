/**
 * The sending half of a client connection: request heads HPACK-coded as
 * they are framed (so the server's table follows ours frame by frame), and
 * what streams queue of their bodies sent as the server's windows, its
 * SETTINGS_MAX_FRAME_SIZE and the socket allow; as sender.ts does for the
 * server's responses.
 *
 * A stream waits in one of three places: for the socket (drained() sends
 * on), for the connection's window (a WINDOW_UPDATE on stream 0), or on
 * its own window. What waits is the stream's own queue, which its writer
 * fills only within the credit it has (a tunnel stream's), so nothing here
 * grows without bound.
 */
import { HpackEncoder } from "./hpack-encoder.ts";
import type { Output } from "./output.ts";
import type { H2ClientStream, Fields } from "./client-stream.ts";
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, DEFAULT_WINDOW, ErrorCode, MAX_WINDOW, StreamError } from "./wire.ts";

const EMPTY = new Uint8Array(0);

export class ClientSender {
  readonly encoder = new HpackEncoder();
  /** The server's window for our DATA on the connection. */
  private window = DEFAULT_WINDOW;
  /** The server's SETTINGS_INITIAL_WINDOW_SIZE and SETTINGS_MAX_FRAME_SIZE (the latter at most what we send). */
  initialWindow = DEFAULT_WINDOW;
  maxFrameSize = DEFAULT_MAX_FRAME_SIZE;
  private readonly ioWaiters = new Set<H2ClientStream>();
  private readonly windowWaiters = new Set<H2ClientStream>();

  constructor(private readonly out: Output) {}

  /** A request head, coded now and framed at once (streams open in order of their ids: so do their heads). */
  head(s: H2ClientStream, fields: Fields, endStream: boolean): void {
    this.out.headers(s.id, endStream, this.encoder.encode(undefined, fields), this.maxFrameSize);
    if (endStream) s.sentEnd();
  }

  /** The socket wrote what it held: streams waiting for it send on, in turn. */
  drained(): void {
    for (const s of this.ioWaiters) {
      if (this.out.blocked) break;
      this.ioWaiters.delete(s);
      this.flush(s);
    }
  }

  /** A WINDOW_UPDATE for the connection. */
  connectionWindow(increment: number): void {
    this.window += increment;
    if (this.window > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "the connection's window past 2^31-1");
    for (const s of this.windowWaiters) {
      if (this.window <= 0 || this.out.blocked) break;
      this.windowWaiters.delete(s);
      this.flush(s);
    }
  }

  /** A WINDOW_UPDATE for `s`. */
  streamWindow(s: H2ClientStream, increment: number): void {
    s.sendWindow += increment;
    if (s.sendWindow > MAX_WINDOW) throw new StreamError(s.id, ErrorCode.FLOW_CONTROL_ERROR, "a stream's window past 2^31-1");
    if (s.pendingBytes > 0 || (s.endQueued && !s.localEnded)) this.flush(s);
  }

  /** The server's SETTINGS_INITIAL_WINDOW_SIZE changed: every stream's window moves by the difference (RFC 9113 §6.9.2). */
  setInitialWindow(value: number, streams: Iterable<H2ClientStream>): void {
    const delta = value - this.initialWindow;
    this.initialWindow = value;
    if (delta === 0) return;
    const all = [...streams];
    for (const s of all) {
      s.sendWindow += delta;
      if (s.sendWindow > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "a stream's window past 2^31-1");
    }
    if (delta > 0) for (const s of all) if (s.pendingBytes > 0) this.flush(s);
  }

  /** Sends what `s` has queued, as far as the windows and the socket allow; then its END_STREAM when it is due. */
  flush(s: H2ClientStream): void {
    if (s.isClosed) return;
    if (this.out.blocked) {
      this.ioWaiters.add(s);
      return;
    }
    while (s.pendingBytes > 0 && !this.out.blocked) {
      const window = Math.min(s.sendWindow, this.window);
      if (window <= 0) break;
      const chunk = s.pending[0]!;
      const n = Math.min(chunk.byteLength, window, this.maxFrameSize);
      let part = chunk;
      if (n === chunk.byteLength) s.pending.shift();
      else {
        part = chunk.subarray(0, n);
        s.pending[0] = chunk.subarray(n);
      }
      s.pendingBytes -= n;
      s.sendWindow -= n;
      this.window -= n;
      // the last bytes of an ended request carry END_STREAM themselves
      const fin = s.pendingBytes === 0 && s.endQueued;
      this.out.data(s.id, fin, part);
      if (fin) {
        s.sentEnd();
        return s.allSent();
      }
    }
    if (s.isClosed) return;
    if (s.pendingBytes > 0) {
      if (this.out.blocked) this.ioWaiters.add(s);
      else if (this.window <= 0) this.windowWaiters.add(s);
      return; // else it waits on its own window: streamWindow() sends on
    }
    if (s.endQueued && !s.localEnded) {
      if (this.out.blocked) return void this.ioWaiters.add(s);
      this.out.data(s.id, true, EMPTY);
      s.sentEnd();
    }
    s.allSent();
  }

  forget(s: H2ClientStream): void {
    this.ioWaiters.delete(s);
    this.windowWaiters.delete(s);
  }
}
