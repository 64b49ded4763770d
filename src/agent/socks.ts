/**
 * SOCKS5 for the agent's connection. Bun's WebSocket client speaks only to
 * HTTP proxies, so for socks5:// the agent opens a local bridge on
 * 127.0.0.1: each connection to it is carried through the SOCKS proxy (the
 * `socks` package does the handshake) to the server, and the WebSocket
 * connects to the bridge while naming the real host (Host header, TLS SNI).
 */
import { createServer, type Server, type Socket } from "node:net";
import { SocksClient } from "socks";

export interface SocksBridge {
  /** host:port of the local end, to connect the WebSocket to. */
  address: string;
  close(): void;
}

export async function openSocksBridge(proxyUrl: string, target: { host: string; port: number }): Promise<SocksBridge> {
  const proxy = new URL(proxyUrl);
  const server: Server = createServer((local: Socket) => {
    local.pause();
    SocksClient.createConnection({
      proxy: {
        host: proxy.hostname.replace(/^\[|\]$/g, ""),
        port: Number(proxy.port || 1080),
        type: 5,
        userId: proxy.username ? decodeURIComponent(proxy.username) : undefined,
        password: proxy.password ? decodeURIComponent(proxy.password) : undefined,
      },
      command: "connect",
      destination: { host: target.host, port: target.port },
      timeout: 10_000,
    }).then(
      ({ socket: remote }) => {
        local.pipe(remote).on("error", () => local.destroy());
        remote.pipe(local).on("error", () => remote.destroy());
        local.on("error", () => remote.destroy());
        remote.on("error", () => local.destroy());
        local.resume();
      },
      () => local.destroy(),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve());
  });
  const { port } = server.address() as { port: number };
  return { address: `127.0.0.1:${port}`, close: () => server.close() };
}
