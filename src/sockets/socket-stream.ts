/**
 * Relays bytes between a Bun TCP socket and a mux stream, both ways, with
 * backpressure both ways: a stream out of credit pauses the socket; a socket
 * that cannot take more holds the rest and returns credit only as it drains.
 * Used by the edge (public TCP ports) and the agent (local TCP services).
 */
import type { RuntimeSocket } from "../runtime/types.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { PendingWrites } from "./pending-writes.ts";

export interface RelayCounters {
  /** Bytes read from the socket, sent into the stream. */
  fromSocket?(n: number): void;
  /** Bytes from the stream, written to the socket. */
  toSocket?(n: number): void;
}

export class SocketRelay {
  /** Bytes from the stream the socket has not taken yet; their credit returns as it takes them. */
  private readonly pending: PendingWrites;
  private streamEnded = false;
  private socketEnded = false;
  /** Our side of the socket is half-closed (shutdown), its peer may still send. */
  private shutDown = false;
  private closed = false;

  constructor(
    private readonly socket: RuntimeSocket<any>,
    private readonly stream: Stream,
    private readonly counters: RelayCounters = {},
  ) {
    this.pending = new PendingWrites(socket, (n) => {
      stream.consumed(n);
      counters.toSocket?.(n);
    });
    stream.onData = (chunk) => this.fromStream(chunk);
    stream.onEnd = () => {
      this.streamEnded = true;
      if (this.pending.empty) this.endSocket();
    };
    stream.onDrain = () => socket.resume();
    stream.whenReset(() => {
      this.closed = true;
      socket.terminate();
    });
  }

  // -- socket handlers call these --------------------------------------------------------

  socketData(data: Uint8Array): void {
    if (this.closed) return;
    this.counters.fromSocket?.(data.byteLength);
    if (!this.stream.write(data)) this.socket.pause();
  }

  socketDrain(): void {
    if (this.pending.flush() && this.streamEnded) this.endSocket();
  }

  /** The socket's peer half-closed: no more bytes from it. */
  socketEnd(): void {
    this.socketEnded = true;
    this.stream.end();
  }

  /** The socket closed; `error` when it failed rather than ended. */
  socketClosed(error?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    // after our shutdown() Bun reports the peer's FIN as a close without an end event
    if (!this.socketEnded && this.shutDown && error === undefined) {
      this.socketEnded = true;
      this.stream.end();
    }
    if (!this.socketEnded || !this.streamEnded || !this.pending.empty) this.stream.reset(WireError.CANCELLED);
  }

  private fromStream(chunk: Uint8Array): void {
    if (this.closed) return;
    this.pending.write(chunk);
  }

  private endSocket(): void {
    if (this.socketEnded) {
      // both directions are done
      this.closed = true;
      this.socket.end();
    } else {
      // a half-close: Bun's end() would close the socket for reading too, and lose what the peer still sends
      this.shutDown = true;
      this.socket.shutdown();
    }
  }
}
