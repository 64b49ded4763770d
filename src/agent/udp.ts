/**
 * The agent's side of a udp flow: a UDP socket of its own, connected to the
 * local service, so the service's replies come back to this socket alone
 * and go back on this flow to its visitor. Datagrams travel whole both ways
 * (one DATAGRAM frame each); none is queued: the few that arrive while the
 * socket is being made wait in a small bounded list, and past it (or when
 * the link is congested) they are dropped and counted, as the network
 * would drop them.
 *
 * The edge ends the flow (FLOW_ENDED) when it is idle; the socket closes
 * with it. An ICMP error from the service (nothing listening) does not end
 * the flow, which is UDP's way: it is kept to say on close.
 */
import { runtime } from "../runtime/current.ts";
import type { ConnectedUdp, UdpHandlers } from "../runtime/types.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { describeLocalError, type LocalTarget } from "./local-target.ts";

/** Datagrams held while the flow's socket is being made; past this they are dropped. */
const EARLY_DATAGRAMS = 64;

/** What a flow carried, for the output when it ends. */
export interface FlowCounts {
  datagramsIn: number;
  datagramsOut: number;
  bytesIn: number;
  bytesOut: number;
  /** Datagrams dropped either way: the link congested, or too many before the socket was made. */
  dropped: number;
}

/** Returns the flow's counts, which grow as it carries datagrams. */
export function serveUdpFlow(stream: Stream, target: LocalTarget, onClose: (counts: FlowCounts, error?: string) => void): Readonly<FlowCounts> {
  const counts: FlowCounts = { datagramsIn: 0, datagramsOut: 0, bytesIn: 0, bytesOut: 0, dropped: 0 };
  let socket: ConnectedUdp | undefined;
  let early: Uint8Array[] | undefined = [];
  let lastError: string | undefined;
  let over = false;
  const finish = () => {
    if (over) return;
    over = true;
    early = undefined;
    socket?.close();
    onClose(counts, lastError);
  };
  const toService = (datagram: Uint8Array) => {
    let sent: boolean;
    try {
      sent = socket!.send(datagram);
    } catch (err) {
      // a connected socket that had an ICMP error back throws it on the next send (ECONNREFUSED): the datagram is lost, the flow goes on
      lastError = describeLocalError(err);
      sent = false;
    }
    if (!sent) return void counts.dropped++;
    counts.datagramsIn++;
    counts.bytesIn += datagram.byteLength;
  };
  stream.onDatagram = (datagram) => {
    if (socket) return toService(datagram);
    // a view valid only during the call: the few kept until the socket is made are copies
    if (early && early.length < EARLY_DATAGRAMS) early.push(datagram.slice());
    else counts.dropped++;
  };
  stream.onEnd = () => {
    stream.end();
    finish();
  };
  stream.whenReset(finish);
  connectTo(target, {
    data: (datagram) => {
      if (!stream.sendDatagram(datagram)) return void counts.dropped++;
      counts.datagramsOut++;
      counts.bytesOut += datagram.byteLength;
    },
    // an ICMP error from the service's side (nothing listening): it must never throw
    error: (err) => {
      lastError = err ? describeLocalError(err) : "an ICMP error came back (nothing listening there?)";
    },
  }).then(
    (made) => {
      if (over) return made.close();
      socket = made;
      for (const datagram of early!.splice(0)) toService(datagram);
      early = undefined;
    },
    (err) => {
      lastError = describeLocalError(err);
      stream.reset(`${WireError.UPSTREAM_FAILED} ${lastError}`);
      finish();
    },
  );
  return counts;
}

/**
 * A UDP socket connected to the local service: bound on any port of the
 * family the service's address is of (an IPv6 service needs an IPv6
 * socket; a name is tried as IPv4 first, as Bun resolves it, then IPv6).
 */
async function connectTo(target: LocalTarget, handlers: UdpHandlers): Promise<ConnectedUdp> {
  if (target.host.includes(":")) return runtime.connectUdp(target.host, target.port, true, handlers);
  try {
    return await runtime.connectUdp(target.host, target.port, false, handlers);
  } catch (err) {
    if ((err as { code?: string }).code !== "EAFNOSUPPORT") throw err;
    return runtime.connectUdp(target.host, target.port, true, handlers);
  }
}
