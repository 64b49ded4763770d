/**
 * An SSH channel as the agent's code sees a socket (runtime/types.ts
 * RuntimeSocket): the SSH gateway serves a `-R` tunnel's streams with the
 * agent's own code (its HTTP/1.1 client with its pool, its tcp relay),
 * whose "local service" is behind the client's `ssh -R`: each connection to
 * it is a `forwarded-tcpip` channel the gateway opens to the client
 * (channelDialer).
 *
 * A channel is a Node stream, which buffers what it is given; the agent's
 * code expects Bun's unbuffered writes. So, as the Node runtime does
 * (runtime/node.ts), a write takes a whole chunk while the channel is under
 * its high-water mark and nothing once it is over it, until 'drain': a
 * client whose window never opens stops its stream, whose credit then stops
 * the visitor, and what the gateway holds for it is bounded.
 *
 * A channel the gateway opens may bring the client's first bytes in the
 * same read as its confirmation (a service that speaks first: an HTTP/2
 * service's SETTINGS), before the code that asked for the connection has
 * it; Bun gives a socket's data only after its connect resolved. So such
 * a channel is held (paused) until then: its bytes, EOF and close wait in
 * the channel, under its window.
 */
import type { Connection, ServerChannel } from "ssh2";
import type { Dialer } from "../agent/local-target.ts";
import type { ConnectOptions, RuntimeSocket, SocketHandlers } from "../runtime/types.ts";

const EMPTY = Buffer.alloc(0);

class ChannelSocket<T> implements RuntimeSocket<T> {
  /** Over the high-water mark: writes take nothing until 'drain'. */
  private full = false;
  /** Held until the code that asked for it has it (start()). */
  private held = false;
  /** Paused by its user (credit), which start() keeps. */
  private paused = false;

  constructor(
    readonly channel: ServerChannel,
    public data: T,
    readonly remoteAddress: string,
  ) {}

  write(bytes: Uint8Array | string): number {
    const channel = this.channel;
    if (channel.destroyed || !channel.writable) return -1;
    if (this.full) return 0;
    // a Node stream keeps what it is given, and callers reuse their buffers
    const chunk = typeof bytes === "string" ? Buffer.from(bytes, "latin1") : Buffer.from(bytes);
    if (!channel.write(chunk)) this.full = true;
    return chunk.byteLength;
  }

  drained(): boolean {
    const was = this.full;
    this.full = false;
    return was;
  }

  end(): void {
    this.channel.end();
  }

  /**
   * Our side is done, the client's may still send: EOF alone, after what is
   * queued. (ssh2's end() on a server channel sends CLOSE right after its
   * EOF, which would cut off the service's answer to a visitor that
   * half-closed.)
   */
  shutdown(): void {
    const channel = this.channel;
    if (channel.destroyed || !channel.writable) return;
    channel.write(EMPTY, () => channel.eof());
  }

  terminate(): void {
    this.channel.destroy();
  }

  pause(): void {
    this.paused = true;
    this.channel.pause();
  }

  resume(): void {
    this.paused = false;
    if (!this.held) this.channel.resume();
  }

  /** Holds its events in the channel until start(). */
  hold(): void {
    this.held = true;
    this.channel.pause();
  }

  start(): void {
    this.held = false;
    if (!this.paused) this.channel.resume();
  }

  setNoDelay(): boolean {
    return true;
  }

  ref(): void {}
  unref(): void {}
}

/** `channel`'s bytes, drains, FIN and close given to Bun-shaped handlers, once each; with `held`, only once start() is called. */
function channelSocketOf<T>(channel: ServerChannel, data: T, remote: string, h: SocketHandlers<T>, held: boolean): ChannelSocket<T> {
  const socket = new ChannelSocket<T>(channel, data, remote);
  // paused before the first 'data' listener, which would otherwise set the channel flowing
  if (held) socket.hold();
  let closed = false;
  const close = (error?: Error) => {
    if (closed) return;
    closed = true;
    h.close?.(socket, error);
  };
  channel.on("data", (chunk: Buffer) => h.data?.(socket, chunk));
  channel.on("drain", () => {
    if (socket.drained()) h.drain?.(socket);
  });
  channel.on("end", () => h.end?.(socket));
  channel.on("close", () => close());
  channel.on("error", (err: Error) => close(err));
  return socket;
}

/** `channel`'s bytes, drains, FIN and close given to Bun-shaped handlers, once each. */
export function channelSocket<T>(channel: ServerChannel, data: T, remote: string, h: SocketHandlers<T>): RuntimeSocket<T> {
  return channelSocketOf(channel, data, remote, h, false);
}

/**
 * The way to a `-R` tunnel's service: each connection a `forwarded-tcpip`
 * channel to the client, naming the forward as the client knows it (the
 * address it asked for, and its port: for a `-R 0:...` the one it was
 * told, read at each connection), so that its ssh connects it to the
 * forward's own target. `key` sets the forward's connections apart in the
 * agent's keep-alive pool.
 */
export function channelDialer(client: Connection, key: string, forward: { readonly bindAddr: string; readonly port: number }, originator: { address: string; port: number }): Dialer {
  return {
    key,
    connect<T>(options: ConnectOptions<T>): Promise<RuntimeSocket<T>> {
      return new Promise((resolve, reject) => {
        try {
          client.forwardOut(forward.bindAddr, forward.port, originator.address, originator.port, (err, channel) => {
            if (err) return reject(Object.assign(new Error(`the ssh client did not open the forward: ${err.message}`), { code: "ECONNREFUSED" }));
            const socket = channelSocketOf(channel, options.data as T, originator.address, options.socket, true);
            resolve(socket);
            options.socket.open?.(socket);
            // after the microtasks that hand the socket to its caller (an await, a then)
            setImmediate(() => socket.start());
          });
        } catch (err) {
          reject(err);
        }
      });
    },
  };
}
