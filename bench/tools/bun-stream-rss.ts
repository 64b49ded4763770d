/**
 * How much Bun's own RSS grows while Bun.serve streams 1 GiB in 64 KiB
 * chunks, and while a Bun.listen socket only counts 1 GiB it receives, with
 * no tunnel at all: the floor under burrow's "RSS growth while 1 GiB crosses
 * one tunnel". Each chunk of a tunnelled body is a fresh buffer (it came off
 * a socket), so the "fresh" figure is the one to compare.
 *
 *   bun bench/tools/bun-stream-rss.ts
 *
 * Runs a child per mode (a Bun.serve on 127.0.0.1), downloads 1 GiB from it
 * with fetch, samples the child's VmRSS every 50 ms, prints the growth.
 */
import { readFileSync } from "node:fs";

const GiB = 1024 ** 3;
const CHUNK = 64 * 1024;

if (process.argv[2] === "serve") {
  const fresh = process.argv[3] === "fresh";
  const reused = new Uint8Array(CHUNK);
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch() {
      let sent = 0;
      return new Response(
        new ReadableStream(
          {
            pull(c) {
              if (sent >= GiB) return c.close();
              c.enqueue(fresh ? new Uint8Array(CHUNK) : reused);
              sent += CHUNK;
            },
          },
          { highWaterMark: 0 },
        ),
      );
    },
  });
  console.log(`port=${server.port}`);
} else if (process.argv[2] === "count") {
  // a TCP receiver that only counts: every read is a fresh buffer handed to JS
  let reads = 0;
  let big = 0;
  const listener = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      data(_s, chunk) {
        reads++;
        if (chunk.byteLength >= 256 * 1024) big++;
      },
      close() {
        console.log(`reads=${reads} big=${big}`);
      },
    },
  });
  console.log(`port=${listener.port}`);
} else {
  const rss = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]) / 1024;
  for (const mode of ["fresh", "reused", "count"]) {
    const child = Bun.spawn([process.execPath, import.meta.path, ...(mode === "count" ? ["count"] : ["serve", mode])], { stdout: "pipe" });
    const reader = child.stdout.getReader();
    const { value } = await reader.read();
    const port = Number(/port=(\d+)/.exec(new TextDecoder().decode(value))![1]);
    await Bun.sleep(300);
    const base = rss(child.pid);
    let max = base;
    const sampler = setInterval(() => (max = Math.max(max, rss(child.pid))), 50);
    if (mode === "count") {
      await pushInto(port);
      const { value: tail } = await reader.read();
      clearInterval(sampler);
      child.kill();
      await child.exited;
      const reads = new TextDecoder().decode(tail).trim();
      console.log(`socket receiving 1 GiB (${reads}, big = reads of 256 KiB or more): RSS ${base.toFixed(1)} MiB, +${(max - base).toFixed(1)} MiB at most`);
      continue;
    }
    const res = await fetch(`http://127.0.0.1:${port}/`);
    let bytes = 0;
    for await (const chunk of res.body!) bytes += chunk.byteLength;
    clearInterval(sampler);
    child.kill();
    await child.exited;
    console.log(`Bun.serve streaming, ${mode.padEnd(6)} chunks: ${bytes === GiB ? "1 GiB" : `${bytes} bytes`}, RSS ${base.toFixed(1)} MiB, +${(max - base).toFixed(1)} MiB at most`);
  }
}

/** Writes 1 GiB of 64 KiB chunks to 127.0.0.1:port as fast as the socket takes them, then closes. */
function pushInto(port: number): Promise<void> {
  const chunk = new Uint8Array(CHUNK);
  let sent = 0;
  let offset = 0; // into the chunk the last partial write left off at
  return new Promise((resolve, reject) => {
    const pump = (s: Bun.Socket<undefined>) => {
      while (sent < GiB) {
        const n = s.write(chunk.subarray(offset));
        if (n <= 0) return;
        sent += n;
        offset = (offset + n) % CHUNK;
        if (offset !== 0) return; // partial: the kernel is full, wait for drain
      }
      s.end();
      resolve();
    };
    Bun.connect({ hostname: "127.0.0.1", port, socket: { open: pump, drain: pump, data() {}, error: (_s, e) => reject(e) } }).catch(reject);
  });
}
