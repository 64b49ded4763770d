/** Real TLS ClientHellos for tests: what a client sends first, captured on a plain socket before any handshake can happen. */

/** Listens on a plain socket and resolves with the first TLS record a client sends (its hello, in one record). */
export async function captureHello(connect: (port: number) => void | Promise<void>): Promise<Uint8Array> {
  const got = Promise.withResolvers<Uint8Array>();
  let bytes = new Uint8Array(0);
  const listener = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(socket, chunk) {
        bytes = Buffer.concat([bytes, chunk]);
        if (bytes.length >= 5 && bytes.length >= 5 + ((bytes[3]! << 8) | bytes[4]!)) {
          got.resolve(bytes);
          socket.terminate();
        }
      },
    },
  });
  const timer = setTimeout(() => got.reject(new Error("no hello within 5 s")), 5_000);
  try {
    await connect(listener.port);
    return await got.promise;
  } finally {
    clearTimeout(timer);
    listener.stop(true);
  }
}
