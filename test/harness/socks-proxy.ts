/**
 * A minimal SOCKS5 proxy (no auth, CONNECT only) on 127.0.0.1, counting what
 * it carried, that resolves names of the test's own (`hosts`): for the one
 * test whose server's name no resolver knows (test/e2e/acme-https.test.ts).
 * Every other SOCKS test uses Debian's danted (test/harness/dante.ts).
 */
import { connect, createServer, type Server, type Socket } from "node:net";

export interface TestSocksProxy extends AsyncDisposable {
  url: string;
  /** "host:port" of every CONNECT it served. */
  connects: string[];
}

/** `hosts` maps names the proxy resolves itself (e.g. a test domain to 127.0.0.1). */
export async function startSocksProxy(opts: { hosts?: Record<string, string> } = {}): Promise<TestSocksProxy> {
  const connects: string[] = [];
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => client.destroy());
    let stage: "greeting" | "request" = "greeting";
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (stage === "greeting") {
        if (buf.length < 2 || buf.length < 2 + buf[1]!) return;
        buf = buf.subarray(2 + buf[1]!);
        client.write(Buffer.from([5, 0]));
        stage = "request";
      }
      if (buf.length < 5) return;
      const atyp = buf[3]!;
      const addrLen = atyp === 1 ? 4 : atyp === 4 ? 16 : 1 + buf[4]!;
      if (buf.length < 4 + addrLen + 2) return;
      const host =
        atyp === 1 ? [...buf.subarray(4, 8)].join(".") : atyp === 3 ? buf.subarray(5, 5 + buf[4]!).toString() : "::1";
      const port = buf.readUInt16BE(4 + addrLen);
      const rest = buf.subarray(4 + addrLen + 2);
      client.off("data", onData);
      client.pause();
      connects.push(`${host}:${port}`);
      const upstream = connect({ host: opts.hosts?.[host] ?? (host === "localhost" ? "127.0.0.1" : host), port }, () => {
        client.write(Buffer.from([5, 0, 0, 1, 0, 0, 0, 0, 0, 0]));
        if (rest.length) upstream.write(rest);
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
      sockets.add(upstream);
      upstream.on("close", () => sockets.delete(upstream));
      upstream.on("error", () => client.destroy());
    };
    client.on("data", onData);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  return {
    url: `socks5://127.0.0.1:${port}`,
    connects,
    async [Symbol.asyncDispose]() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
