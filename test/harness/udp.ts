/** UDP helpers for tests: an echo service, and a client that sends and waits for what comes back. */
import type { udp } from "bun";

export interface UdpEcho {
  port: number;
  /** Datagrams received, with where from ("ip:port"). */
  received: { from: string; size: number }[];
  close(): void;
}

/** A UDP service on 127.0.0.1 that sends each datagram back to its sender, whole; `reply` may change what it answers. */
export async function startUdpEcho(reply: (data: Buffer, from: string) => Uint8Array | undefined = (d) => d): Promise<UdpEcho> {
  const received: UdpEcho["received"] = [];
  const socket = await Bun.udpSocket({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(s, data, port, address) {
        const from = `${address}:${port}`;
        received.push({ from, size: data.byteLength });
        const answer = reply(data, from);
        if (answer) s.send(answer, port, address);
      },
      error() {},
    },
  });
  return { port: socket.port, received, close: () => socket.close() };
}

export interface UdpClient {
  port: number;
  /** Datagrams that came back, in order. */
  got: Buffer[];
  /** False when it was not sent: the socket's buffer full, or an ICMP error came back (nothing listens there). */
  send(data: Uint8Array | string): boolean;
  /** Resolves once `n` datagrams in all have come back, or rejects after `ms`. */
  waitFor(n: number, ms?: number): Promise<Buffer[]>;
  close(): void;
}

/** A client socket connected to 127.0.0.1:`port` (or `host`), from `from` (e.g. 127.0.0.2: another source to the server) on `localPort` (0: any). */
export async function udpClient(port: number, opts: { host?: string; from?: string; localPort?: number } = {}): Promise<UdpClient> {
  const got: Buffer[] = [];
  let waiter: (() => void) | undefined;
  const host = opts.host ?? "127.0.0.1";
  const socket: udp.ConnectedSocket<"buffer"> = await Bun.udpSocket({
    hostname: opts.from ?? (host.includes(":") ? "::" : "127.0.0.1"),
    port: opts.localPort ?? 0,
    connect: { hostname: host, port },
    socket: {
      data(_s, data) {
        got.push(data);
        waiter?.();
      },
      error() {},
    },
  });
  return {
    port: socket.port,
    got,
    send(data) {
      try {
        return socket.send(data);
      } catch {
        return false; // ECONNREFUSED: the port said nothing listens there
      }
    },
    async waitFor(n, ms = 5_000) {
      const deadline = Date.now() + ms;
      while (got.length < n) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`${got.length} of ${n} datagrams came back within ${ms} ms`);
        await new Promise<void>((resolve) => {
          waiter = resolve;
          setTimeout(resolve, Math.min(left, 100));
        });
      }
      return got;
    },
    close: () => socket.close(),
  };
}

/**
 * A port free for both TCP and UDP on 127.0.0.1 right now, for a service
 * that listens on both with one number (dnsmasq, iperf3): a port free for
 * UDP alone may be another test's TCP port.
 */
export async function freeTcpAndUdpPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const tcp = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = tcp.port;
    try {
      const udp = await Bun.udpSocket({ hostname: "127.0.0.1", port });
      udp.close();
      return port;
    } catch {
      // taken for UDP: another
    } finally {
      tcp.stop(true);
    }
  }
  throw new Error("no port free for both TCP and UDP");
}
