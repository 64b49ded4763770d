/** The agent's side of a tcp stream: a connection to the local service, relayed both ways. */
import { runtime } from "../runtime/current.ts";
import type { RuntimeSocket } from "../runtime/types.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { SocketRelay } from "../sockets/socket-stream.ts";
import { describeLocalError, type LocalTarget } from "./local-target.ts";

/**
 * `proxyHeader`: written to the local service before any visitor byte (--proxy-protocol).
 * `onClose`: when the connection is over, with its byte counts, and why the local service could not be reached if it could not.
 */
export async function serveTcpStream(
  stream: Stream,
  target: LocalTarget,
  proxyHeader: Uint8Array | undefined,
  onClose: (bytes: { in: number; out: number }, error?: string) => void,
): Promise<void> {
  const counts = { in: 0, out: 0 };
  let relay: SocketRelay | undefined;
  // the visitor may send (and even half-close) before the local connection is up: hold that
  // until the relay takes over; credit for it returns only once it is written, so it is bounded
  const early: Uint8Array[] = [];
  let earlyEnd = false;
  stream.onData = (chunk) => early.push(chunk);
  stream.onEnd = () => (earlyEnd = true);
  try {
    // the target's own way to the service (the SSH gateway's channel), else TCP from here
    await (target.dial ?? runtime).connect<undefined>({
      hostname: target.host,
      port: target.port,
      allowHalfOpen: true,
      socket: {
        open(socket: RuntimeSocket<undefined>) {
          if (stream.isClosed) return void socket.terminate(); // the visitor left while we connected
          // a new socket takes a header this small whole: it leaves before anything the relay writes
          if (proxyHeader && socket.write(proxyHeader) !== proxyHeader.byteLength) {
            socket.terminate();
            stream.reset(`${WireError.UPSTREAM_FAILED} the PROXY protocol header could not be written`);
            return;
          }
          relay = new SocketRelay(socket, stream, { fromSocket: (n) => (counts.out += n), toSocket: (n) => (counts.in += n) });
          stream.reply({});
          for (const chunk of early.splice(0)) stream.onData!(chunk);
          if (earlyEnd) stream.onEnd!();
        },
        data: (_s, data) => relay?.socketData(data),
        drain: () => relay?.socketDrain(),
        end: () => relay?.socketEnd(),
        close: (_s, error) => {
          relay?.socketClosed(error);
          onClose(counts);
        },
        error: (_s, error) => relay?.socketClosed(error ?? new Error("socket error")),
      },
    });
  } catch (err) {
    const why = describeLocalError(err);
    stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
    onClose(counts, why);
  }
}
