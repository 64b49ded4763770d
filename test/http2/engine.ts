/**
 * An Http2ServerConnection driven by hand, for the state machine's tests:
 * raw bytes in through received(), what it writes read back as frames, the
 * socket's fullness chosen by the test, the streams it hands on kept.
 */
import { Http2ServerConnection } from "../../src/http2/connection.ts";
import { DEFAULT_H2_LIMITS, type Http2Limits } from "../../src/http2/limits.ts";
import type { H2Stream } from "../../src/http2/stream.ts";
import { clientPreface, ServerFrames } from "../harness/h2-frames.ts";

export interface Engine extends Disposable {
  conn: Http2ServerConnection;
  frames: ServerFrames;
  streams: H2Stream[];
  /** The socket said false (full) to writes while this is set. */
  full: boolean;
  closedBy: "close" | "terminate" | undefined;
  /** Feeds bytes as one read. */
  send(...chunks: Uint8Array[]): void;
  /** Lets writes made outside a read (at the end of the turn) out. */
  settle(): Promise<void>;
}

/** A connection with `limits`; `onRequest` sees each stream as it opens; `preface` sends the client preface and SETTINGS first. */
export function engine(opts: { limits?: Partial<Http2Limits>; onRequest?: (s: H2Stream) => void; preface?: boolean; settings?: [number, number][] } = {}): Engine {
  const frames = new ServerFrames();
  const e: Engine = {
    conn: undefined as unknown as Http2ServerConnection,
    frames,
    streams: [],
    full: false,
    closedBy: undefined,
    send: (...chunks) => e.conn.received(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks)),
    settle: () => new Promise((resolve) => setImmediate(resolve)),
    [Symbol.dispose]: () => e.conn.closed(),
  };
  e.conn = new Http2ServerConnection(
    {
      write: (bytes) => {
        frames.push(bytes.slice());
        return !e.full;
      },
      close: () => void (e.closedBy ??= "close"),
      terminate: () => void (e.closedBy ??= "terminate"),
      peer: { address: "192.0.2.7", port: 40000 },
    },
    { ...DEFAULT_H2_LIMITS, ...opts.limits },
    {
      request: (s) => {
        e.streams.push(s);
        opts.onRequest?.(s);
      },
    },
  );
  if (opts.preface !== false) e.send(clientPreface(opts.settings));
  return e;
}
