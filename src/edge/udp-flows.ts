/**
 * A udp tunnel's public port: its UDP socket and its flows. A flow is one
 * visitor address and port; it is one "udp" stream to the agent, carrying
 * that visitor's datagrams one DATAGRAM frame each, and the service's
 * replies back the same way, sent from this port to that visitor. The agent
 * keeps a socket of its own per flow, so replies find their visitor.
 *
 * Every datagram from a visitor passes the judgement's steps, this port
 * being its door (judgement/pipeline.ts): the port's tunnel, its kind, the
 * tunnel's IP rules (asked per datagram, so a rule changed live applies at
 * once); then, forwarding it, the rate per source (shared by every udp
 * tunnel of the edge: one bucket per source, so a forged flood cannot make
 * a tunnel a reflector), then its flow (made if it has none, the oldest idle flow ending first past
 * --udp-flows). A datagram that fails any of them, or that the agent's link
 * is too congested to take, is dropped and counted: never queued, never
 * held behind other streams' bytes.
 *
 * A flow ends when nothing passed either way for --udp-idle, when the agent
 * ends it (its service cannot be reached), and with the tunnel.
 */
import type { udp } from "bun";
import { canonicalAddress } from "../http/addresses.ts";
import { limitedLog } from "../log.ts";
import type { UdpCounters, UdpDrop } from "../metrics/udp-counters.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import type { SourceRate } from "../core/source-rate.ts";
import { judge, Refusal, type Door, type Visit } from "./judgement/pipeline.ts";
import { kindsThrough } from "./kinds/doors.ts";
import type { Tunnel } from "./registry.ts";

export interface UdpFlowRules {
  /** A flow with no datagram either way for this long ends (--udp-idle). */
  idleMs: number;
  /** Flows one tunnel holds at most (--udp-flows). */
  maxFlows: number;
  /** Datagrams per source, over every udp tunnel (--udp-rate); none: no cap. */
  rate?: SourceRate;
  counters: UdpCounters;
}

interface Flow {
  /** "ip:port" as the socket gave it: the flow's key and OPEN's `remote`. */
  readonly key: string;
  readonly address: string;
  readonly port: number;
  /** The canonical address the IP rules are asked about. */
  readonly client: string;
  /** The source's key in the rate's buckets (an IPv6 address by its /64). */
  readonly source: string;
  readonly stream: Stream;
  lastSeen: number;
}

const refusedByRules = limitedLog(10);
const EMPTY = new Uint8Array(0);
const UNKNOWN_NAME = new Refusal("name", "UNKNOWN_NAME");
const WRONG_KIND = new Refusal("admission", "WRONG_KIND");
/** The kinds whose visitors come through this door (their edge units say so). */
const REACHED = kindsThrough("udp");

/** A datagram on its way through the steps. */
interface DatagramVisit extends Visit {
  client: string;
  data: Uint8Array;
  address: string;
  port: number;
  /** "address:port": its flow's key. */
  key: string;
  flow?: Flow;
}

export class UdpTunnelPort implements Door<DatagramVisit> {
  readonly name = "udp";
  private tunnel?: Tunnel;
  /** By key, least recently active first: Map order is re-made on activity, so the oldest idle is first. */
  private readonly flows = new Map<string, Flow>();
  private sweeper?: ReturnType<typeof setInterval>;
  private closed = false;

  constructor(
    private readonly socket: udp.Socket<"buffer">,
    private readonly rules: UdpFlowRules,
  ) {}

  get port(): number {
    return this.socket.port;
  }

  /** The tunnel this port is now; its removal (or a draining server) closes the port. */
  adopt(t: Tunnel): Tunnel {
    this.tunnel = t;
    t.onRemoved = () => this.close();
    t.stopAccepting = () => this.close();
    return t;
  }

  /** Closes the port if no tunnel adopted it (a HELLO refused after it was bound). */
  closeUnadopted(): void {
    if (!this.tunnel) this.close();
  }

  /** Flows open now. */
  get flowCount(): number {
    return this.flows.size;
  }

  /** A visitor's datagram (the socket's data handler): through the judgement's steps, this port being its door. */
  received(data: Uint8Array, port: number, address: string): void {
    if (!this.tunnel || this.closed) return;
    const key = `${address}:${port}`;
    const flow = this.flows.get(key);
    // one visit object per port, filled for each datagram: the steps answer at once for a datagram
    const v = this.visit;
    v.data = data;
    v.address = address;
    v.port = port;
    v.key = key;
    v.flow = flow;
    v.client = flow?.client ?? canonicalAddress(address);
    void judge(this, v);
    v.data = EMPTY;
    v.flow = undefined;
  }

  private readonly visit: DatagramVisit = { client: "", data: new Uint8Array(0), address: "", port: 0, key: "" };

  // -- the door (judgement/pipeline.ts): its name is the port's tunnel; the IP rules are asked per datagram, so a rule changed live applies at once

  find(): Tunnel | Refusal {
    return this.tunnel ?? UNKNOWN_NAME;
  }

  reaches(t: Tunnel): true | Refusal {
    return REACHED.has(t.protocol) ? true : WRONG_KIND;
  }

  /** The rate per source, then the datagram's flow (made if it has none), then the agent. */
  forward(v: DatagramVisit, t: Tunnel): void {
    let flow = v.flow;
    const rate = this.rules.rate;
    if (rate && !rate.takeFor(flow?.source ?? rate.keyOf(v.address))) return this.drop("rate");
    if (!flow) {
      flow = this.open(t, v.key, v.address, v.port, v.client, rate);
      if (!flow) return this.drop("no_agent");
    } else {
      this.touch(flow);
    }
    if (!flow.stream.sendDatagram(v.data)) return this.drop("congested");
    this.rules.counters.datagramsIn++;
    t.countIn(v.data.byteLength);
  }

  refuse(v: DatagramVisit, r: Refusal): void {
    if (r.code === "ADDRESS_REFUSED") {
      refusedByRules("udp datagram refused by the tunnel's IP rules", { client: v.client, port: this.port });
      if (v.flow) this.end(v.flow);
      return this.drop("rules");
    }
    this.drop("no_agent");
  }

  private open(t: Tunnel, key: string, address: string, port: number, client: string, rate: SourceRate | undefined): Flow | undefined {
    if (this.flows.size >= this.rules.maxFlows) {
      const oldest = this.flows.values().next().value;
      if (oldest) this.end(oldest);
    }
    const stream = t.agent?.openStream({ tunnel: t.id, kind: "udp", remote: key });
    if (!stream) return undefined; // no agent (reconnecting) or it cannot take another stream
    const flow: Flow = { key, address, port, client, source: rate ? rate.keyOf(address) : "", stream, lastSeen: performance.now() };
    this.flows.set(key, flow);
    this.rules.counters.flowsOpen++;
    this.rules.counters.flowsOpened++;
    stream.onDatagram = (reply) => this.reply(flow, reply);
    // the agent ends a flow it cannot serve (its service unreachable): the next datagram makes a new one
    stream.onEnd = () => this.end(flow);
    stream.whenReset(() => this.forget(flow));
    this.sweeper ??= setInterval(() => this.sweep(), sweepEvery(this.rules.idleMs));
    this.sweeper.unref?.();
    return flow;
  }

  /** The service's reply on a flow, sent to its visitor from this port. */
  private reply(flow: Flow, datagram: Uint8Array): void {
    if (this.closed) return;
    let sent: boolean;
    try {
      sent = this.socket.send(datagram, flow.port, flow.address);
    } catch {
      sent = false; // an ICMP error for an earlier datagram, thrown on this send: this one is lost as UDP loses
    }
    if (!sent) return this.drop("unsent");
    this.touch(flow);
    this.rules.counters.datagramsOut++;
    this.tunnel?.countOut(datagram.byteLength);
  }

  private touch(flow: Flow): void {
    flow.lastSeen = performance.now();
    this.flows.delete(flow.key);
    this.flows.set(flow.key, flow);
  }

  private drop(why: UdpDrop): void {
    this.rules.counters.drop(why);
  }

  /** Ends the flows idle too long: the oldest come first, so the sweep stops at the first that is not. */
  private sweep(): void {
    const idleSince = performance.now() - this.rules.idleMs;
    for (const flow of this.flows.values()) {
      if (flow.lastSeen > idleSince) break;
      this.end(flow);
    }
    if (this.flows.size === 0) this.stopSweeping();
  }

  private end(flow: Flow): void {
    flow.stream.reset(WireError.FLOW_ENDED);
    this.forget(flow);
  }

  private forget(flow: Flow): void {
    if (this.flows.get(flow.key) !== flow) return;
    this.flows.delete(flow.key);
    this.rules.counters.flowsOpen--;
  }

  private stopSweeping(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  /** The tunnel is gone (or the server drains): its flows end and the port is let go. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const flow of [...this.flows.values()]) this.end(flow);
    this.stopSweeping();
    this.socket.close();
  }
}

/** How often idle flows are looked for: a quarter of the idle time, between 100 ms and 1 s. */
function sweepEvery(idleMs: number): number {
  return Math.max(100, Math.min(1000, idleMs / 4));
}
