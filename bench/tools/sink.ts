/**
 * A counting TCP sink: listens on 127.0.0.1 (port from argv, 0 = any), reads
 * every connection to EOF, throws the bytes away and prints one JSON line
 * per connection: {"bytes", "firstAt", "endAt"} (ms since the epoch, with
 * sub-millisecond precision). Prints "sink listening port=N" first.
 *
 *   bun bench/tools/sink.ts [port]
 */
const now = () => performance.timeOrigin + performance.now();

interface Conn {
  bytes: number;
  openAt: number;
  firstAt: number;
  done: boolean;
}

function report(c: Conn): void {
  if (c.done) return;
  c.done = true;
  process.stdout.write(`${JSON.stringify({ bytes: c.bytes, openAt: c.openAt, firstAt: c.firstAt, endAt: now() })}\n`);
}

const listener = Bun.listen<Conn>({
  hostname: "127.0.0.1",
  port: Number(process.argv[2] ?? 0),
  socket: {
    open(s) {
      s.data = { bytes: 0, openAt: now(), firstAt: 0, done: false };
    },
    data(s, chunk) {
      if (s.data.bytes === 0) s.data.firstAt = now();
      s.data.bytes += chunk.byteLength;
    },
    end(s) {
      report(s.data);
      s.end();
    },
    close(s) {
      report(s.data);
    },
    error(s) {
      report(s.data);
    },
  },
});
process.stdout.write(`sink listening port=${listener.port}\n`);
process.on("SIGTERM", () => {
  listener.stop(true);
  process.exit(0);
});
