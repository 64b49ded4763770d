/**
 * A local connection after `101 Switching Protocols`: it now carries the
 * protocol the visitor and the service switched to (a WebSocket, most
 * often), and its bytes and the stream's are piped to each other as they
 * come, whatever they say: no re-framing, no message size limit. Credit
 * works as for a body: the stream's bytes are credited once the socket
 * took them, and the socket is not read while the stream is out of credit.
 * Each direction ends on its own (a FIN each way, the connection half-open
 * meanwhile); the connection is never pooled again.
 */
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import type { ExchangeTap } from "../inspector/tap.ts";
import type { ConnectionUser, LocalConnection } from "./connection.ts";

export interface SwitchedOptions {
  /** The edge's FIN came already (with the upgrade request). */
  visitorEnded: boolean;
  /** Shown the bytes both ways as they pass (the inspector reads a WebSocket's messages from them). */
  tap?: ExchangeTap;
  /** Once, when both directions are over or the pipe broke. */
  onClosed(): void;
}

export function pipeSwitched(stream: Stream, conn: LocalConnection, opts: SwitchedOptions): void {
  new SwitchedPipe(stream, conn, opts).start();
}

class SwitchedPipe implements ConnectionUser {
  /** Bytes from the stream the socket has not taken yet: their credit waits. */
  private uncredited = 0;
  private visitorDone = false;
  private serviceDone = false;
  private over = false;

  constructor(
    private readonly stream: Stream,
    private readonly conn: LocalConnection,
    private readonly opts: SwitchedOptions,
  ) {}

  start(): void {
    const { stream, conn } = this;
    conn.user = this;
    stream.onDrain = () => conn.resume();
    stream.whenReset(() => {
      conn.destroy();
      this.close();
    });
    if (this.over) return; // reset already
    // the pipe may begin paused: the 101 itself can have filled the stream's credit
    if (stream.write(new Uint8Array(0))) conn.resume();
    // the end first: setting onData hands over the bytes that waited for the 101 (exchange.ts), and a
    // FIN that came after them only then
    stream.onEnd = () => this.visitorEnded();
    stream.onData = (chunk) => this.fromVisitor(chunk);
    if (this.opts.visitorEnded) this.visitorEnded();
    if (conn.closed) this.lost(undefined);
  }

  private fromVisitor(chunk: Uint8Array): void {
    if (this.over) return this.stream.consumed(chunk.byteLength);
    this.opts.tap?.switchedBytes("visitor", chunk);
    this.uncredited += chunk.byteLength;
    if (this.conn.write(chunk)) this.credit();
  }

  private visitorEnded(): void {
    if (this.over || this.visitorDone) return;
    this.visitorDone = true;
    if (this.conn.flushed) this.endSocket();
  }

  /** Our FIN to the service, once all the visitor sent is written; both done: the connection closes. */
  private endSocket(): void {
    if (this.serviceDone) {
      this.conn.close();
      this.close();
    } else {
      this.conn.shutdown();
    }
  }

  private credit(): void {
    if (this.uncredited === 0) return;
    this.stream.consumed(this.uncredited);
    this.uncredited = 0;
  }

  // -- connection events -------------------------------------------------------------------------

  received(bytes: Uint8Array): void {
    if (this.over) return;
    this.opts.tap?.switchedBytes("service", bytes);
    if (!this.stream.write(bytes)) this.conn.pause();
  }

  drained(): void {
    this.credit();
    if (this.visitorDone && !this.over) this.endSocket();
  }

  ended(): void {
    if (this.over) return;
    this.serviceDone = true;
    this.stream.end();
    if (this.visitorDone && this.conn.flushed) this.endSocket();
  }

  lost(error: Error | undefined): void {
    if (this.over) return;
    // after our shutdown() Bun reports the service's FIN as a close without an end event
    if (!this.serviceDone && this.conn.halfClosed && error === undefined) {
      this.serviceDone = true;
      this.stream.end();
    }
    if (!this.serviceDone || !this.visitorDone || this.uncredited > 0) {
      this.stream.reset(`${WireError.UPSTREAM_FAILED} ${error ? "the local service reset the connection" : "the local service closed the connection"}`);
    }
    this.close();
  }

  private close(): void {
    if (this.over) return;
    this.over = true;
    this.stream.onDrain = undefined;
    this.credit();
    this.opts.onClosed();
  }
}
