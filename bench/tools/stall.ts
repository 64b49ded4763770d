/**
 * A visitor that stops reading: connects to HOST:PORT, sends one GET for
 * PATH with the given Host header, reads the first bytes of the answer and
 * then never reads again, holding the connection open until SIGTERM.
 * Prints "stalled local_port=N bytes=B" once the response has started.
 *
 *   bun bench/tools/stall.ts HOST PORT HOSTHEADER PATH
 */
import { connect } from "node:net";

const [host = "127.0.0.1", port, hostHeader, path = "/"] = process.argv.slice(2);
if (!port || !hostHeader) {
  console.error("usage: stall.ts HOST PORT HOSTHEADER PATH");
  process.exit(2);
}
let bytes = 0;
const socket = connect({ host, port: Number(port) }, () => {
  socket.write(`GET ${path} HTTP/1.1\r\nHost: ${hostHeader}\r\nUser-Agent: burrow-bench-stall\r\nAccept: */*\r\n\r\n`);
});
socket.once("data", (chunk) => {
  bytes += chunk.length;
  socket.pause(); // from here on nothing is read: the kernel buffers fill, then the sender must stop
  console.log(`stalled local_port=${socket.localPort} bytes=${bytes}`);
});
socket.on("error", (err) => {
  console.log(`error ${err.message}`);
  process.exit(1);
});
socket.on("close", () => {
  console.log("closed");
  process.exit(1);
});
// a paused socket alone does not keep the process alive
const keepAlive = setInterval(() => {}, 1 << 30);
process.on("SIGTERM", () => {
  clearInterval(keepAlive);
  socket.destroy();
  process.exit(0);
});
