/**
 * A local service that trusts too much, as the h2c-smuggling class needs
 * one: it reads HTTP/1.1 heads off a raw socket and records each one as it
 * came (names' spelling and all), and it answers by path:
 *
 * - `/ws/chat...`: a bare `101 Switching Protocols` (no Sec-WebSocket-Accept,
 *   its Upgrade naming whatever the request asked, h2c when nothing), and
 *   then goes on reading what follows as more HTTP requests, as a server that
 *   switches optimistically does: whatever reaches it after the switch is
 *   served and recorded like any request;
 * - `/ws/refuse...`: 426 with a body, the connection kept (a service that
 *   will not switch), so what follows on the connection is the next request;
 * - `/h2c...` asked with `Upgrade: h2c`: a 101 that names h2c, and then an
 *   echo of every byte (a service that really switched);
 * - anything else: 200, the body "<name> <path>".
 *
 * Request bodies are not expected (the tests send GETs).
 */
export interface NaiveService {
  port: number;
  /** Every head read, as it came (request line and fields, without the blank line), in order. */
  heads: string[];
  /** The heads whose request line names `path`. */
  headsFor(path: string): string[];
  stop(): void;
}

interface Conn {
  buffered: Buffer;
  echo: boolean;
}

/** The value of `name` in a head (its first line of that name, any case), or undefined. */
export function fieldOf(head: string, name: string): string | undefined {
  for (const line of head.split("\r\n").slice(1)) {
    const colon = line.indexOf(":");
    if (colon > 0 && line.slice(0, colon).toLowerCase() === name.toLowerCase()) return line.slice(colon + 1).trim();
  }
  return undefined;
}

/** Every field line of a head whose name is one of burrow's in any spelling (X-Burrow-*, X_Burrow_*). */
export function burrowLines(head: string): string[] {
  return head.split("\r\n").slice(1).filter((l) => /^x[-_]burrow[-_]/i.test(l));
}

export function startNaiveService(name: string): NaiveService {
  const heads: string[] = [];
  const answer = (socket: { write(b: string): number }, head: string, conn: Conn): void => {
    const path = head.split(" ")[1] ?? "/";
    const upgrade = fieldOf(head, "upgrade");
    if (path.startsWith("/ws/chat")) {
      socket.write(`HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${upgrade ?? "h2c"}\r\n\r\n`);
      return;
    }
    if (path.startsWith("/ws/refuse")) {
      socket.write("HTTP/1.1 426 Upgrade Required\r\nContent-Length: 11\r\n\r\nnot here :(");
      return;
    }
    if (path.startsWith("/h2c") && upgrade?.toLowerCase() === "h2c") {
      socket.write("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: h2c\r\n\r\n");
      conn.echo = true;
      return;
    }
    const body = `${name} ${path}`;
    socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  };
  const server = Bun.listen<Conn>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(socket) {
        socket.data = { buffered: Buffer.alloc(0), echo: false };
      },
      data(socket, bytes) {
        const conn = socket.data;
        if (conn.echo) return void socket.write(bytes);
        conn.buffered = Buffer.concat([conn.buffered, bytes]);
        for (let end = conn.buffered.indexOf("\r\n\r\n"); end >= 0 && !conn.echo; end = conn.buffered.indexOf("\r\n\r\n")) {
          const head = conn.buffered.subarray(0, end).toString("latin1");
          conn.buffered = conn.buffered.subarray(end + 4);
          heads.push(head);
          answer(socket, head, conn);
        }
        if (conn.echo && conn.buffered.byteLength > 0) {
          socket.write(conn.buffered);
          conn.buffered = Buffer.alloc(0);
        }
      },
    },
  });
  return {
    port: server.port,
    heads,
    headsFor: (path) => heads.filter((h) => h.split(" ")[1] === path),
    stop: () => server.stop(true),
  };
}
