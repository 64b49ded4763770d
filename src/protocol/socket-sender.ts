/**
 * The sending half of a mux over a raw TCP or TLS socket (Bun.listen or
 * Bun.connect). A Bun socket writes what the kernel takes and reports how
 * much; the rest is ours to keep. The mux hands over a view of its reused
 * scratch buffer, so whatever the socket did not take is copied here and
 * the mux is told "backpressure" until the socket drains.
 */
import type { Socket } from "bun";
import type { SendResult } from "./mux.ts";

/**
 * Held past this, the peer is not reading at all (the mux already stopped
 * sending data; only control frames such as PONG and WINDOW add up): the
 * connection is dropped rather than grown without bound.
 */
const QUEUE_LIMIT = 16 * 1024 * 1024;

/** How long end() waits for the peer to read what is still queued. */
const END_GRACE_MS = 5_000;

export class SocketSender {
  private queue: Uint8Array[] = [];
  private queued = 0;
  private ending = false;
  private closed = false;

  constructor(
    private readonly socket: Socket<unknown>,
    private readonly endGraceMs = END_GRACE_MS,
  ) {}

  get bufferedAmount(): number {
    return this.queued;
  }

  send(bytes: Uint8Array): SendResult {
    if (this.closed || this.ending) return "closed";
    let rest = bytes;
    if (this.queued === 0) {
      const written = this.socket.write(bytes);
      if (written < 0) return this.markClosed();
      if (written === bytes.byteLength) return "sent";
      rest = bytes.subarray(written);
    }
    if (this.queued + rest.byteLength > QUEUE_LIMIT) {
      this.socket.terminate();
      return this.markClosed();
    }
    this.queue.push(rest.slice());
    this.queued += rest.byteLength;
    return "backpressure";
  }

  /** Call from the socket's drain handler; true once everything queued is written. */
  flush(): boolean {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const written = this.socket.write(head);
      if (written < 0) {
        this.markClosed();
        return false;
      }
      this.queued -= written;
      if (written < head.byteLength) {
        this.queue[0] = head.subarray(written);
        return false;
      }
      this.queue.shift();
    }
    if (this.ending) {
      this.closed = true;
      this.socket.end();
    }
    return true;
  }

  /**
   * Ends the connection once what is queued (a last ERROR, say) has been
   * written; a peer that does not read it within END_GRACE_MS is cut off,
   * so a connection that is being closed cannot stay open for ever.
   */
  end(): void {
    if (this.closed || this.ending) return;
    this.ending = true;
    if (this.flush()) return;
    const timer = setTimeout(() => {
      if (this.closed) return;
      this.socket.terminate();
      this.markClosed();
    }, this.endGraceMs);
    timer.unref();
  }

  private markClosed(): "closed" {
    this.closed = true;
    this.queue = [];
    this.queued = 0;
    return "closed";
  }
}
