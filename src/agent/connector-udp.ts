/**
 * `burrow connect owner/name` to a private udp tunnel: a UDP port on this
 * machine. Each local sender (address and port) is a flow: one "udp" stream
 * through the server to the owner's agent, its datagrams DATAGRAM frames
 * both ways, and the service's replies sent back to that sender from this
 * port. As the edge does for a public udp port (edge/udp-flows.ts), a flow
 * ends when it has been idle for a while, and the oldest idle one makes
 * room past a cap; a datagram that cannot go on is dropped, never queued.
 */
import type { Stream } from "../protocol/mux.ts";
import { runtime } from "../runtime/current.ts";
import type { BoundUdp } from "../runtime/types.ts";

/** A flow with no datagram either way for this long ends (as the server's --udp-idle default). */
export const CONNECTOR_FLOW_IDLE_MS = 60_000;
/** Flows at once; past it the least recently active ends first. */
export const CONNECTOR_MAX_FLOWS = 256;

interface Flow {
  readonly address: string;
  readonly port: number;
  readonly stream: Stream;
  lastSeen: number;
}

export interface UdpConnectorPort {
  host: string;
  port: number;
  stop(): void;
}

/**
 * `bind` on the port asked for; without one, on `preferred` (the owner's
 * service port) when it is free here, else any free one. Both of the
 * connector's local sides choose their port so.
 */
export async function onLocalPort<T>(bind: (port: number) => Promise<T>, port?: number, preferred?: number): Promise<T> {
  if (port !== undefined) return bind(port);
  try {
    return await bind(preferred ?? 0);
  } catch {
    return bind(0); // the owner's port is taken here: any free one, printed
  }
}

/**
 * Listens on `host`:`port` (0: any), or on `preferred` when free and no
 * port was asked for; `open` gives each new local sender its flow's stream
 * (undefined while not connected: its datagram is dropped).
 */
export async function listenForUdpConnector(opts: {
  host: string;
  port?: number;
  preferred?: number;
  open(remote: string): Stream | undefined;
  idleMs?: number;
  maxFlows?: number;
}): Promise<UdpConnectorPort> {
  const idleMs = opts.idleMs ?? CONNECTOR_FLOW_IDLE_MS;
  const maxFlows = opts.maxFlows ?? CONNECTOR_MAX_FLOWS;
  // by "address:port", least recently active first (re-inserted on activity)
  const flows = new Map<string, Flow>();
  let socket: BoundUdp;

  const endFlow = (key: string, flow: Flow) => {
    if (flows.get(key) === flow) flows.delete(key);
    flow.stream.end();
  };
  const flowFor = (key: string, address: string, port: number): Flow | undefined => {
    const known = flows.get(key);
    if (known) {
      flows.delete(key);
      flows.set(key, known);
      return known;
    }
    if (flows.size >= maxFlows) {
      const [oldestKey, oldest] = flows.entries().next().value!;
      endFlow(oldestKey, oldest);
    }
    const stream = opts.open(key);
    if (!stream) return undefined;
    const flow: Flow = { address, port, stream, lastSeen: Date.now() };
    stream.onDatagram = (reply) => {
      flow.lastSeen = Date.now();
      socket.send(reply, flow.port, flow.address);
    };
    stream.onEnd = () => endFlow(key, flow);
    stream.whenReset(() => {
      if (flows.get(key) === flow) flows.delete(key);
    });
    flows.set(key, flow);
    return flow;
  };
  const data = (datagram: Uint8Array, port: number, address: string) => {
    const key = address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
    const flow = flowFor(key, address, port);
    if (!flow) return;
    flow.lastSeen = Date.now();
    flow.stream.sendDatagram(datagram);
  };
  const bind = (port: number) => runtime.bindUdp(opts.host, port, data);
  socket = await onLocalPort(bind, opts.port, opts.preferred);
  const sweeper = setInterval(
    () => {
      const before = Date.now() - idleMs;
      for (const [key, flow] of [...flows]) if (flow.lastSeen <= before) endFlow(key, flow);
    },
    Math.min(idleMs, 5_000),
  );
  sweeper.unref?.();
  return {
    host: opts.host,
    port: socket.port,
    stop() {
      clearInterval(sweeper);
      for (const [key, flow] of [...flows]) endFlow(key, flow);
      socket.close();
    },
  };
}
