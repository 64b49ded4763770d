/**
 * What a tcp tunnel's visitor sends while its on_tcp_connect waits is held
 * for the relay up to the door's bound (--policy-connect-max-bytes, 64 KiB
 * by default), then the connection is cut. A listener of tcp.ts on a real
 * loopback port, node's net client as the visitor, the judgement held by a
 * rate-limit store that answers when the test says. The visitor's socket
 * is paused while it is judged, so only what was read before the pause
 * reaches the door: the test hands the listener's data handler such a
 * read, on the real socket, as the runtime would.
 */
import type { Socket } from "bun";
import { expect, test } from "bun:test";
import { connect as tcpConnect } from "node:net";
import type { Tunnel } from "../../src/edge/registry.ts";
import { tcpHandlers } from "../../src/edge/tcp.ts";
import { TunnelPolicy } from "../../src/edge/traffic-policy/tunnel-policy.ts";
import { defaultServices, loadPolicy } from "../../src/policy/index.ts";
import type { RateLimitStore, RateLimitVerdict } from "../../src/policy/rate-limit-store.ts";
import { Mux, type Stream } from "../../src/protocol/mux.ts";

/** A liveness bound, far above what a loaded machine takes. */
const WITHIN_MS = 20_000;

/** A rate-limit store whose count waits until `released`: the judgement that asks it is in flight meanwhile. */
class LateStore implements RateLimitStore {
  readonly asked = Promise.withResolvers<void>();
  readonly released = Promise.withResolvers<void>();
  hit(): Promise<RateLimitVerdict> {
    this.asked.resolve();
    return this.released.promise.then(() => ({ limited: false, retryAfterMs: 0, remaining: 99 }));
  }
}

const COUNTED = { on_tcp_connect: [{ actions: [{ type: "rate-limit", config: { name: "conn", algorithm: "sliding_window", capacity: 100, rate: "60s", bucket_key: ["conn.client_ip"] } }] }] };

/**
 * A tcp tunnel's port whose visitor sends `bytes` while its on_tcp_connect
 * waits, then is let on: whether it was cut, and what its agent got.
 */
async function sentWhileJudged(bytes: number, maxEarlyBytes?: number): Promise<{ cut: boolean; received: number }> {
  const store = new LateStore();
  const policy = loadPolicy(JSON.stringify(COUNTED), { source: "test", services: defaultServices({ rateLimits: store }) });
  if (Array.isArray(policy)) throw new Error(policy[0]!.message);
  const t = { id: 1, subdomain: "held", protocol: "tcp", username: "u", relayed: false, policy: TunnelPolicy.of([], policy), inFlight: 0, countIn: () => {}, countOut: () => {} } as unknown as Tunnel;
  const toAgent: Stream[] = [];
  let agentSide: Mux;
  const deliver = (message: Uint8Array, to: () => Mux) => {
    const copy = message.slice();
    setImmediate(() => to().receive(copy));
    return "sent" as const;
  };
  const agentLink = new Mux({ role: "edge", send: (m) => deliver(m, () => agentSide) });
  agentSide = new Mux({ role: "agent", send: (m) => deliver(m, () => agentLink), onStream: (s) => void toAgent.push(s) });
  (t as { agent?: unknown }).agent = { openStream: (meta: unknown) => agentLink.open(meta) };
  const handlers = tcpHandlers(() => t, undefined, undefined, maxEarlyBytes);
  let visitor: Socket<unknown> | undefined;
  const port = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    socket: { ...handlers, open: (s) => ((visitor = s as Socket<unknown>), handlers.open!(s)) } as typeof handlers,
  });
  const socket = tcpConnect(port.port, "127.0.0.1");
  socket.on("error", () => {});
  let cut = false;
  const closed = new Promise<void>((resolve) => socket.on("close", () => ((cut = true), resolve())));
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await store.asked.promise;
    // one read of `bytes` that came before the socket was paused
    handlers.data!(visitor as never, Buffer.alloc(bytes, 0x61));
    const limit = new Promise<void>((resolve) => (timer = setTimeout(resolve, WITHIN_MS)));
    if (maxEarlyBytes !== undefined && bytes > maxEarlyBytes) {
      // cut once what came passes the bound, while the judgement still waits
      await Promise.race([closed, limit]);
      return { cut, received: 0 };
    }
    store.released.resolve();
    let received = 0;
    for (let turn = 0; turn < 100_000 && toAgent.length === 0; turn++) await new Promise((resolve) => setImmediate(resolve));
    const stream = toAgent[0];
    if (!stream) throw new Error("the visit was not carried to the agent");
    const all = new Promise<void>((resolve) => {
      stream.onData = (chunk) => {
        received += chunk.byteLength;
        stream.consumed(chunk.byteLength);
        if (received >= bytes) resolve();
      };
    });
    await Promise.race([all, closed, limit]);
    return { cut, received };
  } finally {
    clearTimeout(timer);
    socket.destroy();
    port.stop(true);
    agentLink.close();
    agentSide.close();
  }
}

test("by default 40 KiB sent while on_tcp_connect waits is held and passed on whole", async () => {
  expect(await sentWhileJudged(40 * 1024)).toEqual({ cut: false, received: 40 * 1024 });
}, 60_000);

test("--policy-connect-max-bytes 4096: the same 40 KiB cuts the connection before it is judged; 2 KiB is held and passed on", async () => {
  expect((await sentWhileJudged(40 * 1024, 4096)).cut).toBe(true);
  expect(await sentWhileJudged(2048, 4096)).toEqual({ cut: false, received: 2048 });
}, 60_000);
