/** The agent's runtime on Bun: Bun's own sockets, WebSocket and UDP (runtime/types.ts). */
import type { AgentRuntime, ConnectOptions, ListenOptions, RuntimeSocket } from "./types.ts";

export const bunRuntime: AgentRuntime = {
  name: "bun",
  connect: <T>(options: ConnectOptions<T>) => Bun.connect<T>(bunConnectOptions(options) as unknown as Parameters<typeof Bun.connect<T>>[0]) as unknown as Promise<RuntimeSocket<T>>,
  webSocket: (url, options) => new WebSocket(url, options as Bun.WebSocketOptions) as unknown as ReturnType<AgentRuntime["webSocket"]>,
  async connectUdp(host, port, ipv6, handlers) {
    const socket = {
      data: (_s: unknown, datagram: Uint8Array) => handlers.data(datagram),
      // Bun may call this without an error; it must never throw
      error: (_s: unknown, err?: Error) => handlers.error(err ?? undefined),
    };
    const connect = { hostname: host, port };
    return ipv6 ? Bun.udpSocket({ hostname: "::", port: 0, binaryType: "buffer", connect, socket }) : Bun.udpSocket({ port: 0, binaryType: "buffer", connect, socket });
  },
  sleep: (ms) => Bun.sleep(ms),
  async serve(options) {
    const server = Bun.serve({ hostname: options.hostname, port: options.port, reusePort: false, development: false, fetch: options.fetch });
    return { port: server.port!, stop: () => void server.stop(true) };
  },
  async listen<T>(options: ListenOptions<T>) {
    const listener = Bun.listen<T>({ hostname: options.hostname, port: options.port, socket: options.socket as unknown as Bun.SocketHandler<T> });
    return { port: listener.port, stop: () => listener.stop(true) };
  },
  async bindUdp(hostname, port, data) {
    const socket = await Bun.udpSocket({ hostname, port, binaryType: "buffer", socket: { data: (_s, datagram, fromPort, fromAddress) => data(datagram, fromPort, fromAddress) } });
    return { port: socket.port, send: (datagram, toPort, toAddress) => socket.send(datagram, toPort, toAddress), close: () => socket.close() };
  },
};

/** Bun.connect's options: ALPN's protocols in its wire form (each name after its length), as Bun takes them. */
function bunConnectOptions<T>(options: ConnectOptions<T>): unknown {
  const alpn = options.tls?.alpn;
  if (!alpn) return options;
  const { alpn: _, ...tls } = options.tls!;
  const wire = Buffer.concat(alpn.map((name) => Buffer.concat([Buffer.from([name.length]), Buffer.from(name, "latin1")])));
  return { ...options, tls: { ...tls, ALPNProtocols: wire } };
}
