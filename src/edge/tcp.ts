/**
 * The doors of raw visitor connections (edge/judgement/pipeline.ts): a tcp
 * tunnel's public port, where each accepted connection is a visit, and a
 * tls tunnel's, once its hello named it (tls-tunnels.ts). The name is the
 * port's tunnel (a pool's member in turn) or the hello's; the door reaches
 * its own kind; the access step asks the tunnel's IP rules; forward takes
 * a place in the visitors' budget for raw connections and opens a stream
 * of the kind to the agent, relayed with backpressure both ways. A refused
 * connection is closed before it costs a stream.
 */
import type { Socket, SocketHandler } from "bun";
import { canonicalAddress } from "../http/addresses.ts";
import { limitedLog } from "../log.ts";
import { KINDS, type TunnelKind } from "../protocol/kinds.ts";
import type { OpenMeta, RelayedMeta } from "../protocol/messages.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import { ja4 } from "../tls/ja4.ts";
import { SocketRelay } from "../sockets/socket-stream.ts";
import type { SocketBudget } from "../sockets/socket-budget.ts";
import { stays, type LiveVisit } from "./judgement/live-visits.ts";
import { kindsThrough } from "./kinds/doors.ts";
import { judge, Refusal, type Door, type Visit } from "./judgement/pipeline.ts";
import { connectFacts, judgeConnect, type ConnectionSubject } from "./traffic-policy/connect.ts";
import { judgedSince, type PolicySubject } from "./traffic-policy/live-rejudge.ts";
import { nodeRegion } from "./traffic-policy/node-region.ts";
import type { TunnelPolicy } from "./traffic-policy/tunnel-policy.ts";
import type { Tunnel } from "./registry.ts";

/** A raw connection on its way through the steps; what forward made of it. Once carried, it stays: judged again when its tunnel's rules narrow (judgement/live-visits.ts). */
export interface ConnectionVisit extends Visit, LiveVisit {
  readonly socket: Socket<any>;
  /** The door it came through, and when (its on_tcp_connect facts: judged again by them when its tunnel's policies change). */
  readonly door: "tcp" | "tls";
  readonly openedAt: number;
  /** The tunnel its port or hello named (step 1's answer, read when the connection came). */
  readonly named: Tunnel;
  /** A tls tunnel's visitor: the name its hello asked for, as it wrote it. */
  readonly serverName?: string;
  /** A tls tunnel's visitor: its hello, with the pieces of its JA4 (`conn.tls.ja4_fingerprint`). */
  readonly hello?: ClientHello;
  /** The address that holds a place in the budget, until the socket closes. */
  counted?: string;
  /** Bytes passed on from the visitor to the agent, and from the agent to the visitor, so far (`conn.bytes_in`, `conn.bytes_out`): 0 until it is carried. */
  bytesIn: number;
  bytesOut: number;
  relay?: SocketRelay;
  /** The tunnel it went to. */
  tunnel?: Tunnel;
  over: boolean;
  /** What came while the tunnel's policy judged it (its socket paused), for the relay once it is carried. */
  early?: Uint8Array[];
  /** It became a stream to the agent (at once, or after its policy's on_tcp_connect). */
  carried?(v: ConnectionVisit): void;
}

/** What a connection may send while its on_tcp_connect runs, by default (--policy-connect-max-bytes; its socket is paused meanwhile: this is a bound, not a buffer one fills). */
export const MAX_EARLY_BYTES = 64 * 1024;

const overLimit = limitedLog(10);
const refusedByRules = limitedLog(10);
const notJudged = limitedLog(10);

/** The door of raw connections: "tcp" (a public tcp port) or "tls" (a ClientHello's name); each carried on its tunnel kind's stream. */
export class ConnectionDoor implements Door<ConnectionVisit> {
  /** The kinds whose edge units say their visitors come through this door. */
  private readonly kinds: ReadonlySet<TunnelKind>;
  /** A connection meets its tunnel's IP flags in on_tcp_connect (request()). */
  readonly addressInPolicy = true;

  constructor(
    readonly name: "tcp" | "tls",
    private readonly budget: SocketBudget | undefined,
    /** What a visitor may send while its on_tcp_connect runs (heldEarly). */
    readonly maxEarlyBytes = MAX_EARLY_BYTES,
  ) {
    this.kinds = kindsThrough(name);
  }

  find(v: ConnectionVisit): Tunnel {
    return v.named;
  }

  reaches(t: Tunnel): true | Refusal {
    return this.kinds.has(t.protocol) ? true : WRONG_KIND;
  }

  /**
   * The tunnel's on_tcp_connect rules, when it has some (traffic-policy/connect.ts,
   * its IP flags among them): at once when none waits; else the socket waits,
   * paused, for their verdict.
   */
  request(v: ConnectionVisit, t: Tunnel): undefined | Refusal | Promise<undefined | Refusal> {
    const policy = t.policy;
    if (!policy?.connect || t.relayed) return undefined;
    const { socket } = v;
    const judged = judgeConnect(policy, connectFacts(t, connectionSubject(v, t)));
    if (!(judged instanceof Promise)) return judged;
    socket.pause();
    return judged.finally(() => {
      if (!v.over) socket.resume();
    });
  }

  /** `judgedWith`: the layers its on_tcp_connect was judged by (read when its judgement began: judgement/pipeline.ts). */
  forward(v: ConnectionVisit, t: Tunnel, judgedWith: TunnelPolicy | undefined): void {
    const { socket, client } = v;
    if (v.over) return; // it closed while its policy judged it
    const kind = this.name;
    if (this.budget && !this.budget.admit(client)) {
      overLimit(`${kind} visitor connection refused`, { client });
      socket.terminate();
      return;
    }
    v.counted = client;
    v.tunnel = t;
    const meta: OpenMeta = {
      tunnel: t.id,
      kind: KINDS[t.protocol].stream,
      remote: `${socket.remoteAddress}:${socket.remotePort ?? 0}`,
      local: `${socket.localAddress}:${socket.localPort}`,
    };
    // another node's tunnel: the name the visitor's TLS asked for goes with it, for the rules that node runs
    if (t.relayed && v.serverName !== undefined) {
      (meta as RelayedMeta).sni = v.serverName;
      if (v.hello) (meta as RelayedMeta).ja4 = ja4(v.hello);
    }
    // its counts are 0 until it is carried: only the region goes with it
    if (t.relayed && nodeRegion() !== "") (meta as RelayedMeta).region = nodeRegion();
    const stream = t.agent?.openStream(meta);
    if (!stream) {
      socket.end(); // no agent (reconnecting) or it cannot take another stream
      return;
    }
    v.relay = new SocketRelay(socket, stream, {
      fromSocket: (n) => {
        v.bytesIn += n;
        t.countIn(n);
      },
      toSocket: (n) => {
        v.bytesOut += n;
        t.countOut(n);
      },
    });
    stays(t, v);
    v.carried?.(v);
    // its layers changed while its judgement waited: those of now judge it, before what it sent meanwhile goes on
    judgedSince(t, v, judgedWith);
    const early = v.early;
    v.early = undefined;
    if (early && !v.over) for (const bytes of early) v.relay.socketData(bytes);
  }

  refuse(v: ConnectionVisit, r: Refusal): void {
    if (r.code === "ADDRESS_REFUSED" || r.code === "POLICY") {
      const t = v.named;
      const why = r.code === "POLICY" ? `its traffic policy (${r.message})` : "the tunnel's IP rules";
      refusedByRules(`${this.name} visitor refused by ${why}`, { client: v.client, ...(this.name === "tcp" ? { port: v.socket.localPort } : { tunnel: t.subdomain }) });
    }
    v.socket.terminate();
  }
}

const WRONG_KIND = new Refusal("admission", "WRONG_KIND");

/**
 * A raw visitor connection through `door`'s steps: the visit, with what
 * forward made of it (no relay when it was refused or could not be
 * carried); undefined when the socket has no address (a visitor that reset
 * before open ran: no rule could admit it).
 */
export function judgeConnection(door: ConnectionDoor, socket: Socket<any>, named: Tunnel, carried?: (v: ConnectionVisit) => void, serverName?: string, hello?: ClientHello): ConnectionVisit | undefined {
  if (typeof socket.remoteAddress !== "string") {
    socket.terminate();
    return undefined;
  }
  const v: ConnectionVisit = { socket, door: door.name, openedAt: Date.now(), named, serverName, hello, client: canonicalAddress(socket.remoteAddress), bytesIn: 0, bytesOut: 0, over: false, end: endConnection, judgedBy: judgedConnection, carried };
  // each step answers at once for a raw connection, but a traffic policy's on_tcp_connect
  const judged = judge(door, v);
  if (judged) judged.catch((err) => {
    notJudged("visitor connection not judged", { err: String(err) });
    socket.terminate();
  });
  return v;
}

/** Bytes of a visit being judged: held for its relay (bounded: its door's maxEarlyBytes); past the bound, it is cut. */
export function heldEarly(v: ConnectionVisit, bytes: Uint8Array, max: number): void {
  if (v.over) return;
  const early = (v.early ??= []);
  early.push(Buffer.from(bytes));
  if (early.reduce((n, b) => n + b.byteLength, 0) > max) v.socket.terminate();
}

/** What on_tcp_connect reads of a connection to `t`. */
function connectionSubject(v: ConnectionVisit, t: Tunnel): ConnectionSubject {
  const { socket } = v;
  return { client: v.client, clientPort: socket.remotePort ?? 0, serverPort: socket.localPort, ends: v, host: t.publicHost ?? t.hostname ?? t.subdomain ?? socket.localAddress, protocol: v.door, openedAt: v.openedAt, serverName: v.serverName, hello: v.hello };
}

/** What its tunnel's policies judge it by again when they change (ConnectionVisit.judgedBy). */
function judgedConnection(this: ConnectionVisit): PolicySubject | undefined {
  return this.tunnel ? { connect: connectionSubject(this, this.tunnel) } : undefined;
}

/** Its rules no longer let it through: the connection is cut (ConnectionVisit.end). */
function endConnection(this: ConnectionVisit): void {
  this.over = true;
  this.socket.terminate();
}

/** The connection closed: its place in the budget goes back, and it is no longer live. `budget`: its door's. */
export function connectionClosed(v: ConnectionVisit, budget: SocketBudget | undefined): void {
  if (v.counted !== undefined) budget?.release(v.counted);
  v.counted = undefined;
  v.over = true;
  v.tunnel?.liveVisits?.delete(v);
}

interface VisitorSocket {
  visit?: ConnectionVisit;
  /** A pool member carrying it: its connections in flight go down when it closes. */
  member?: Tunnel;
}

/** A tcp tunnel's listener. `tunnel`: the port's tunnel (a pool's member in turn). `opened`: a connection became a stream to the agent (the metrics count it). `maxEarlyBytes`: --policy-connect-max-bytes. */
export function tcpHandlers(tunnel: () => Tunnel, budget?: SocketBudget, opened?: () => void, maxEarlyBytes?: number): SocketHandler<VisitorSocket> {
  const door = new ConnectionDoor("tcp", budget, maxEarlyBytes);
  return {
    open(socket: Socket<VisitorSocket>) {
      socket.data = {};
      socket.data.visit = judgeConnection(door, socket, tunnel(), (v) => {
        opened?.();
        if (v.tunnel!.pool) {
          v.tunnel!.inFlight++;
          socket.data.member = v.tunnel;
        }
      });
    },
    data: (socket, data) => {
      const v = socket.data?.visit;
      if (v?.relay) v.relay.socketData(data);
      else if (v) heldEarly(v, data, door.maxEarlyBytes);
    },
    drain: (socket) => socket.data?.visit?.relay?.socketDrain(),
    end: (socket) => socket.data?.visit?.relay?.socketEnd(),
    close: (socket, error) => {
      const v = socket.data?.visit;
      if (v) connectionClosed(v, budget);
      if (socket.data?.member) {
        socket.data.member.inFlight--;
        socket.data.member = undefined;
      }
      v?.relay?.socketClosed(error);
    },
    error: (socket, error) => socket.data?.visit?.relay?.socketClosed(error ?? new Error("socket error")),
  };
}
