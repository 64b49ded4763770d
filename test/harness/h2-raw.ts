/**
 * A hand-made HTTP/2 client on a raw TCP socket, for the attack tests: it
 * writes whatever frames a test makes (test/harness/h2-frames.ts) and reads
 * what the server answers, frame by frame, until the server closes.
 */
import type { Socket } from "bun";
import { PendingWrites } from "../../src/sockets/pending-writes.ts";
import { clientPreface, ServerFrames } from "./h2-frames.ts";
import { waitUntil } from "./wait.ts";

export interface RawH2 extends AsyncDisposable {
  readonly frames: ServerFrames;
  /** The server closed the connection (or it failed). */
  readonly isClosed: boolean;
  /** Writes bytes (queued while the socket is full); false once closed. */
  send(...chunks: Uint8Array[]): boolean;
  /** Waits until `ok` holds, failing after `ms` with `what`. */
  until(ok: () => boolean, ms: number, what: string): Promise<void>;
  /** Waits for the server to close the connection. */
  untilClosed(ms: number): Promise<void>;
  /** Stops reading what the server sends (a client that never reads). A paused socket learns of no close either: resumeReading() before untilClosed(). */
  stopReading(): void;
  /** Reads again after stopReading(). */
  resumeReading(): void;
  close(): void;
}

/** Connects to 127.0.0.1:`port`; `preface` (default) sends the client preface and an empty SETTINGS first. */
export async function rawH2(port: number, opts: { preface?: boolean; settings?: [number, number][] } = {}): Promise<RawH2> {
  const frames = new ServerFrames();
  let closed = false;
  let out: PendingWrites | undefined;
  const socket: Socket<undefined> = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      data: (_s, bytes) => frames.push(bytes),
      drain: () => void out?.flush(),
      close: () => void (closed = true),
      error: () => void (closed = true),
      end: () => void (closed = true),
    },
  });
  out = new PendingWrites(socket);
  const raw: RawH2 = {
    frames,
    get isClosed() {
      return closed;
    },
    send(...chunks) {
      if (closed || out!.closed) return false;
      out!.write(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
      return true;
    },
    until: (ok, ms, what) => waitUntil(ok, ms, what, 10),
    untilClosed: (ms) => waitUntil(() => closed, ms, "the server to close the connection", 10),
    stopReading() {
      socket.pause();
    },
    resumeReading() {
      socket.resume();
    },
    close() {
      if (!closed) socket.terminate();
    },
    async [Symbol.asyncDispose]() {
      raw.close();
    },
  };
  if (opts.preface !== false) raw.send(clientPreface(opts.settings));
  return raw;
}
