/**
 * A TCP source: connects to HOST:PORT, writes BYTES (from one 1 MiB buffer of
 * random bytes, so nothing on the path can compress it), half-closes, and
 * prints {"bytes", "startAt", "writtenAt"} (ms since the epoch) as one JSON
 * line ("start <ms>" first, when it begins). The receiving sink's endAt
 * minus startAt is the transfer time.
 *
 *   bun bench/tools/source.ts HOST PORT BYTES
 */
const now = () => performance.timeOrigin + performance.now();
const [host = "127.0.0.1", portArg, bytesArg] = process.argv.slice(2);
const total = Number(bytesArg);
if (!portArg || !Number.isFinite(total) || total <= 0) {
  console.error("usage: source.ts HOST PORT BYTES");
  process.exit(2);
}
const CHUNK = 1024 * 1024;
const buf = new Uint8Array(CHUNK);
crypto.getRandomValues(buf.subarray(0, 65536));
for (let i = 65536; i < CHUNK; i += 65536) buf.copyWithin(i, 0, 65536);

const startAt = now();
process.stdout.write(`start ${startAt}\n`);
let sent = 0;
let offset = 0; // offset into buf of the pending partial chunk

await new Promise<void>((resolve, reject) => {
  const pump = (s: Bun.Socket<undefined>) => {
    while (sent < total) {
      const want = Math.min(CHUNK - offset, total - sent);
      const n = s.write(buf.subarray(offset, offset + want));
      if (n < 0) return reject(new Error("socket closed while writing"));
      sent += n;
      offset = (offset + n) % CHUNK;
      if (n < want) return; // wait for drain
    }
    s.end();
    resolve();
  };
  Bun.connect<undefined>({
    hostname: host,
    port: Number(portArg),
    socket: {
      open: pump,
      drain: pump,
      data() {},
      close() {
        if (sent < total) reject(new Error(`closed after ${sent} of ${total} bytes`));
      },
      error(_s, err) {
        reject(err);
      },
      connectError(_s, err) {
        reject(err);
      },
    },
  }).catch(reject);
});
process.stdout.write(`${JSON.stringify({ bytes: sent, startAt, writtenAt: now() })}\n`);
