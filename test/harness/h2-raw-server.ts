/**
 * A hand-made HTTP/2 server on a raw TCP listener, for the tests of the
 * agent's HTTP/2 client (--upstream-protocol h2c): it checks the client's
 * preface, reads the frames and header blocks the client sends
 * (test/harness/h2-frames.ts), and writes whatever frames a test makes, so
 * a test can be a service that misbehaves in exactly one way. It sends its
 * SETTINGS as a connection opens (or not, or an HTTP/1.1 answer instead)
 * and hands each request head to the test as it comes.
 */
import type { Socket, TCPSocketListener } from "bun";
import { PendingWrites } from "../../src/sockets/pending-writes.ts";
import { PREFACE, ServerFrames, settings, type Frame } from "./h2-frames.ts";
import { waitUntil } from "./wait.ts";

export interface RawServerConn {
  /** What the client sent, after its preface: frames and decoded header blocks. */
  readonly sent: ServerFrames;
  /** The client's preface was HTTP/2's. */
  prefaceOk: boolean;
  closed: boolean;
  send(...chunks: Uint8Array[]): void;
  /** Ends the connection (FIN), or drops it (`cut`). */
  close(cut?: boolean): void;
}

export interface RawServerOptions {
  /** The server's SETTINGS, sent as a connection opens; "none": nothing is sent; other text: those bytes instead (an HTTP/1.1 answer). */
  settings?: [number, number][] | "none" | string;
  /** A request head came (a HEADERS block on a new stream), or a trailer section. */
  onHead?: (conn: RawServerConn, head: { stream: number; fields: [string, string][]; endStream: boolean }) => void;
  /** Any frame came (after the head's own handling). */
  onFrame?: (conn: RawServerConn, frame: Frame) => void;
}

export interface RawH2Server extends AsyncDisposable {
  port: number;
  /** Every connection accepted, in order. */
  conns: RawServerConn[];
  until(ok: () => boolean, ms: number, what: string): Promise<void>;
  stop(): void;
}

interface State {
  conn: RawServerConn;
  out: PendingWrites;
  preface: number;
  heads: number;
  frames: number;
}

export function rawH2Server(opts: RawServerOptions = {}): RawH2Server {
  const conns: RawServerConn[] = [];
  const listener: TCPSocketListener<State> = Bun.listen<State>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket: Socket<State>) {
        const out = new PendingWrites(socket);
        const conn: RawServerConn = {
          sent: new ServerFrames(),
          prefaceOk: false,
          closed: false,
          send: (...chunks) => {
            if (!conn.closed) out.write(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
          },
          close: (cut = false) => {
            if (conn.closed) return;
            conn.closed = true;
            if (cut) socket.terminate();
            else socket.end();
          },
        };
        socket.data = { conn, out, preface: 0, heads: 0, frames: 0 };
        conns.push(conn);
        const first = opts.settings ?? [];
        if (first === "none") return;
        conn.send(typeof first === "string" ? Buffer.from(first, "latin1") : settings(first));
      },
      data(socket, bytes) {
        const state = socket.data;
        let at = 0;
        if (state.preface < PREFACE.byteLength) {
          const n = Math.min(PREFACE.byteLength - state.preface, bytes.byteLength);
          if (!Buffer.from(bytes.subarray(0, n)).equals(Buffer.from(PREFACE.subarray(state.preface, state.preface + n)))) return state.conn.close(true);
          state.preface += n;
          state.conn.prefaceOk = state.preface === PREFACE.byteLength;
          at = n;
        }
        if (at < bytes.byteLength) state.conn.sent.push(bytes.subarray(at));
        const { sent } = state.conn;
        for (; state.heads < sent.heads.length; state.heads++) opts.onHead?.(state.conn, sent.heads[state.heads]!);
        for (; state.frames < sent.frames.length; state.frames++) opts.onFrame?.(state.conn, sent.frames[state.frames]!);
      },
      drain(socket) {
        socket.data?.out.flush();
      },
      close(socket) {
        if (socket.data) socket.data.conn.closed = true;
      },
      error(socket) {
        if (socket.data) socket.data.conn.closed = true;
      },
    },
  });
  const server: RawH2Server = {
    port: listener.port,
    conns,
    until: (ok, ms, what) => waitUntil(ok, ms, what, 10),
    stop: () => listener.stop(true),
    async [Symbol.asyncDispose]() {
      listener.stop(true);
    },
  };
  return server;
}
