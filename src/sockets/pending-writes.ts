/**
 * Bytes for a Bun socket, in order. Bun's socket.write is unbuffered: it
 * writes what the kernel takes and says how much; the rest is kept here and
 * written on drain (call flush()). Used wherever burrow writes to a socket:
 * the direct agent link (socket-sender.ts), TCP relays (socket-stream.ts),
 * the agent's connections to local services (agent/local-http/connection.ts)
 * and the DNS responder's TCP answers (dns/tcp.ts).
 */
export interface WritableSocket {
  /** Bytes taken, or -1 when the socket is closed. */
  write(bytes: Uint8Array): number;
}

export class PendingWrites {
  private queue: Uint8Array[] = [];
  /** Bytes waiting. */
  queued = 0;
  /** The socket said it is closed (write returned -1). */
  closed = false;

  /** `onWritten`: told how many bytes the socket took, as it takes them. */
  constructor(
    private readonly socket: WritableSocket,
    private readonly onWritten?: (n: number) => void,
  ) {}

  get empty(): boolean {
    return this.queue.length === 0;
  }

  /**
   * Writes what the socket takes now (nothing while earlier bytes wait) and
   * keeps the rest; `copy` when the caller will reuse `bytes`. True when all
   * of it went out.
   */
  write(bytes: Uint8Array, copy = false): boolean {
    if (this.closed) return false;
    let rest = bytes;
    if (this.queue.length === 0) {
      const written = this.take(bytes);
      if (written === bytes.byteLength) return true;
      rest = bytes.subarray(Math.max(written, 0));
    }
    this.queue.push(copy ? rest.slice() : rest);
    this.queued += rest.byteLength;
    return false;
  }

  /** Writes what waits, as far as the socket takes it; true once nothing waits. */
  flush(): boolean {
    while (this.queue.length > 0) {
      const head = this.queue[0]!;
      const written = this.take(head);
      if (written <= 0) return false;
      this.queued -= written;
      if (written < head.byteLength) {
        this.queue[0] = head.subarray(written);
        return false;
      }
      this.queue.shift();
    }
    return true;
  }

  /** Forgets what waits (the connection is going away). */
  clear(): void {
    this.queue = [];
    this.queued = 0;
  }

  private take(bytes: Uint8Array): number {
    const written = this.socket.write(bytes);
    if (written < 0) {
      this.closed = true;
      this.clear();
    } else if (written > 0) this.onWritten?.(written);
    return written;
  }
}
