/**
 * The sending half of a mux over a raw TCP or TLS socket (Bun.listen or
 * Bun.connect). A Bun socket writes what the kernel takes and reports how
 * much; the rest is ours to keep. The mux hands over a view of its reused
 * scratch buffer, so whatever the socket did not take is copied here and
 * the mux is told "backpressure" until the socket drains.
 */
import type { RuntimeSocket } from "../runtime/types.ts";
import { PendingWrites } from "./pending-writes.ts";
import type { SendResult } from "../protocol/mux.ts";

/**
 * Held past this, the peer is not reading at all (the mux already stopped
 * sending data; only control frames such as PONG and WINDOW add up): the
 * connection is dropped rather than grown without bound.
 */
const QUEUE_LIMIT = 16 * 1024 * 1024;

/** How long end() waits for the peer to read what is still queued. */
const END_GRACE_MS = 5_000;

export class SocketSender {
  private readonly pending: PendingWrites;
  private ending = false;
  private closed = false;

  constructor(
    private readonly socket: RuntimeSocket,
    private readonly endGraceMs = END_GRACE_MS,
  ) {
    this.pending = new PendingWrites(socket);
  }

  get bufferedAmount(): number {
    return this.pending.queued;
  }

  send(bytes: Uint8Array): SendResult {
    if (this.closed || this.ending) return "closed";
    if (this.pending.queued + bytes.byteLength > QUEUE_LIMIT) {
      this.socket.terminate();
      return this.markClosed();
    }
    // a copy of what the socket does not take: the mux reuses its buffer
    if (this.pending.write(bytes, true)) return "sent";
    return this.pending.closed ? this.markClosed() : "backpressure";
  }

  /** Call from the socket's drain handler; true once everything queued is written. */
  flush(): boolean {
    if (!this.pending.flush()) {
      if (this.pending.closed) this.markClosed();
      return false;
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
    this.pending.clear();
    return "closed";
  }
}
