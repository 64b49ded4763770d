/**
 * One HTTP/1.1 exchange over a bare socket, bytes exactly as written: for
 * requests that fetch() refuses to send (bad Host headers, broken request
 * lines). Resolves when the server closes the connection, or after
 * `timeoutMs` with what came so far (`closed: false`).
 */
import { connect, type Socket } from "node:net";

export interface RawReply {
  /** 0 when nothing that looks like a status line came back. */
  status: number;
  head: string;
  body: string;
  closed: boolean;
}

function reply(chunks: Buffer[], closed: boolean): RawReply {
  const all = Buffer.concat(chunks).toString("latin1");
  const split = all.indexOf("\r\n\r\n");
  const head = split < 0 ? all : all.slice(0, split);
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
  return { status, head, body: split < 0 ? "" : all.slice(split + 4), closed };
}

export function rawHttp(port: number, text: string | Uint8Array, timeoutMs = 5_000, host = "127.0.0.1"): Promise<RawReply> {
  return oneReply(port, host, timeoutMs, (sock) => sock.write(text));
}

/**
 * Several requests on as many connections, written in one turn once every
 * connection is open, so the server reads them together (a burst no
 * client's connection setup spreads out); their replies, in order.
 */
export async function rawHttpAtOnce(port: number, texts: string[], timeoutMs = 10_000, host = "127.0.0.1"): Promise<RawReply[]> {
  const open = Promise.withResolvers<void>();
  let left = texts.length;
  return Promise.all(
    texts.map((text) =>
      oneReply(port, host, timeoutMs, (sock) => {
        if (--left === 0) open.resolve();
        void open.promise.then(() => sock.write(text));
      }),
    ),
  );
}

/** One connection: `opened` once it is open (it writes the request); the reply, up to the close or the timeout. */
function oneReply(port: number, host: string, timeoutMs: number, opened: (sock: Socket) => void): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const sock = connect(port, host, () => opened(sock));
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve(reply(chunks, closed));
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    sock.on("data", (d: Buffer) => chunks.push(d));
    sock.on("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNRESET" ? finish(true) : (clearTimeout(timer), reject(err))));
    sock.on("close", () => finish(true));
  });
}
