/** The agent's side of a tcp stream: a connection to the local service, relayed both ways. */
import type { Socket } from "bun";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { SocketRelay } from "../relay/socket.ts";
import { describeLocalError, type LocalTarget } from "./http.ts";

export async function serveTcpStream(stream: Stream, target: LocalTarget, onClose: (bytes: { in: number; out: number }) => void): Promise<void> {
  const counts = { in: 0, out: 0 };
  let relay: SocketRelay | undefined;
  try {
    await Bun.connect<undefined>({
      hostname: target.host,
      port: target.port,
      allowHalfOpen: true,
      socket: {
        open(socket: Socket<undefined>) {
          relay = new SocketRelay(socket, stream, { fromSocket: (n) => (counts.out += n), toSocket: (n) => (counts.in += n) });
          stream.reply({});
        },
        data: (_s, data) => relay?.socketData(data),
        drain: () => relay?.socketDrain(),
        end: () => relay?.socketEnd(),
        close: () => {
          relay?.socketClosed();
          onClose(counts);
        },
        error: () => relay?.socketClosed(),
      },
    });
  } catch (err) {
    stream.reset(`${WireError.UPSTREAM_FAILED} ${describeLocalError(err)}`);
  }
}
