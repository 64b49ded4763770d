/**
 * The inspector's cost on the agent's own request path, without the network
 * or the edge: `bun bench/tools/inspector-path.ts` (run by hand). Requests
 * for 1 KiB go from an in-memory edge mux to the agent's serveStream (its
 * HTTP client, a local Bun.serve), 50 at a time, in blocks with the capture
 * store on and off, alternating; the figure is the process's CPU time per
 * request (user + system), which other work on a busy machine disturbs
 * less than wall time. Medians of BLOCKS blocks each.
 *
 *   ROUNDS=30 PER_BLOCK=2000 bun bench/tools/inspector-path.ts
 */
import { CaptureStore } from "../../src/agent/inspector/store.ts";
import type { RequestTaps } from "../../src/agent/inspector/tap.ts";
import type { AgentOutput, TunnelView } from "../../src/agent/output.ts";
import { serveStream } from "../../src/agent/serve-stream.ts";
import { readOpenMeta } from "../../src/protocol/messages.ts";
import { Mux } from "../../src/protocol/mux.ts";

const ROUNDS = Number(process.env.ROUNDS ?? 30);
const PER_BLOCK = Number(process.env.PER_BLOCK ?? 2000);
const CONCURRENCY = 50;

const body = new Uint8Array(1024).fill(0x61);
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(body) });
const tunnel: TunnelView = { name: "http", id: "t1", protocol: "http", url: "http://x.localhost", local: "local", target: { host: "127.0.0.1", port: upstream.port! }, inspect: true };
const quiet: AgentOutput = { ready() {}, request() {}, connection() {}, reconnecting() {}, refused() {} };
const store = new CaptureStore(1000);
let taps: RequestTaps | undefined;

// an edge and an agent mux joined in memory, messages copied and delivered on a microtask
const deliver = (to: () => Mux, m: Uint8Array) => {
  const copy = m.slice();
  queueMicrotask(() => to().receive(copy));
  return "sent" as const;
};
const agent: Mux = new Mux({ role: "agent", send: (m) => deliver(() => edge, m), onStream: (s) => serveStream(s, readOpenMeta(s.meta)!, tunnel, quiet, taps) });
const edge: Mux = new Mux({ role: "edge", send: (m) => deliver(() => agent, m) });

const head = "GET /1k.bin HTTP/1.1\r\nHost: x.localhost\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n";
const one = () =>
  new Promise<void>((resolve) => {
    const s = edge.open({ tunnel: "t1", kind: "h1", remote: "203.0.113.1:5", head }, true);
    s.onData = (c) => s.consumed(c.byteLength);
    s.onEnd = () => resolve();
    s.whenReset(() => resolve());
  });

/** CPU µs per request over `n` requests. */
async function block(n: number): Promise<number> {
  let left = n;
  const before = process.cpuUsage();
  await Promise.all(Array.from({ length: CONCURRENCY }, async () => {
    while (left-- > 0) await one();
  }));
  const used = process.cpuUsage(before);
  return (used.user + used.system) / n;
}

await block(5000); // warm-up: JIT, the connection pool
const runs = { on: [] as number[], off: [] as number[] };
for (let round = 0; round < ROUNDS; round++) {
  for (const which of round % 2 ? (["on", "off"] as const) : (["off", "on"] as const)) {
    taps = which === "on" ? store : undefined;
    Bun.gc(true);
    runs[which].push(await block(PER_BLOCK));
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const on = median(runs.on);
const off = median(runs.off);
console.log(`CPU per request, ${ROUNDS} rounds of ${PER_BLOCK}: inspector on ${on.toFixed(1)} µs, off ${off.toFixed(1)} µs, on/off ${(on / off).toFixed(3)}x (${store.size} kept)`);
upstream.stop(true);
process.exit(0);
