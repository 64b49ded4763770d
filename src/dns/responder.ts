/**
 * A tiny authoritative DNS server for one zone, `_acme-challenge.<domain>`,
 * so that burrow can prove to an ACME CA (Let's Encrypt) that it controls
 * `<domain>` and `*.<domain>` by the DNS-01 challenge, which a wildcard
 * certificate requires, without an API key for anyone's DNS provider.
 *
 * The one DNS record the operator adds, once, in the zone that holds
 * `<domain>` (here example.com, for tunnels.example.com):
 *
 *   _acme-challenge.tunnels.example.com.  NS  tunnels.example.com.
 *
 * It delegates the name the CA looks up for both `tunnels.example.com` and
 * `*.tunnels.example.com` (RFC 8555 7.1.3 and 8.4: a wildcard is validated
 * as its base name) to the host name whose A/AAAA records already point at
 * the server, where burrow answers DNS on port 53, UDP and TCP (both must be
 * open to the internet: the CA's resolvers ask from many places, and switch
 * to TCP for a truncated answer). Why a delegation and not a CNAME:
 * - A CNAME (`_acme-challenge.tunnels.example.com CNAME x.<something>`)
 *   only moves the question to another name, which some server must be
 *   authoritative for; for burrow to be that server, that other name needs
 *   a delegation to it all the same. Two records instead of one.
 * - The NS record's target needs no glue: `tunnels.example.com` sits in the
 *   parent zone, outside the delegated one, and resolves as it already does.
 * - It hands burrow that one name and the names below it, nothing else of
 *   example.com: whoever controls the server can prove control of
 *   `tunnels.example.com` and `*.tunnels.example.com` (names its
 *   certificate covers anyway), and of no other name; no other answer of
 *   example.com changes.
 * Where example.com is signed with DNSSEC, the delegation is simply an
 * unsigned one (no DS record): validating resolvers, Let's Encrypt's among
 * them, take its answers as insecure, which DNS-01 allows. (Providers whose
 * web panels refuse an NS record below the zone's apex leave only the CNAME
 * way, with a delegation elsewhere: not served here.)
 *
 * What is answered, and what refused, is answer.ts's; TCP's framing and
 * limits are tcp.ts's. Here: both sockets, the answer rate (SourceRate,
 * core/source-rate.ts) and the log. Over UDP a query from a client over its answer rate, or over
 * the rate of all clients together, gets nothing. Client faults (a
 * malformed query, a refused connection) go to a log limited to
 * FAULT_LOG_PER_MINUTE lines; queries themselves are not logged.
 */
import type { Socket, TCPSocketListener, udp } from "bun";
import { AppError } from "../core/errors.ts";
import { SocketBudget } from "../sockets/socket-budget.ts";
import { limitedLog } from "../log.ts";
import type { TxtRecords } from "./challenge-records.ts";
import { answerQuery, type Zone } from "./answer.ts";
import { inZone, isHostName, normalizeName } from "./names.ts";
import { SourceRate } from "../core/source-rate.ts";
import { tcpHandlers, type Connection, type DnsCounters, type ResponderContext } from "./tcp.ts";
import { BIND_TRIES, DEFAULT_DNS_LIMITS, FAULT_LOG_PER_MINUTE, MAX_QUERY_BYTES, type DnsLimits } from "./wire.ts";

export interface DnsResponderOptions {
  host: string;
  /** UDP and TCP on this port; 0: a free port, the same number for both. */
  port: number;
  /** The delegated zone: `_acme-challenge.<domain>`. */
  zone: string;
  /** The server's host name, as the NS record names it; default: the zone's name less its first label (`<domain>`). */
  nameserver?: string;
  records: TxtRecords;
  /** Where client faults go; default a log limited to FAULT_LOG_PER_MINUTE lines a minute. */
  log?: (msg: string, fields: Record<string, unknown>) => void;
  limits?: Partial<DnsLimits>;
}

export interface DnsResponder {
  udpPort: number;
  tcpPort: number;
  /** What was answered and refused so far (tests, metrics). */
  readonly counters: Readonly<DnsCounters>;
  /** TCP connections open now. */
  readonly tcpOpen: number;
  /** Closes both sockets and every TCP connection. */
  stop(): void;
  [Symbol.dispose](): void;
}

export async function startDnsResponder(opts: DnsResponderOptions): Promise<DnsResponder> {
  const zone = zoneOf(opts);
  const limits = limitsOf(opts.limits);
  const counters: DnsCounters = { answered: 0, dropped: 0, limited: 0, refused: 0 };
  const ctx: ResponderContext = {
    zone,
    records: opts.records,
    rate: new SourceRate(limits),
    counters,
    fault: opts.log ?? limitedLog(FAULT_LOG_PER_MINUTE),
  };
  const budget = new SocketBudget({ perAddress: limits.tcpPerClient, total: limits.tcpTotal });
  const connections = new Set<Socket<Connection | undefined>>();
  const { udpSocket, tcp } = await bindBoth(opts.host, opts.port, udpHandler(ctx), (port) =>
    Bun.listen<Connection | undefined>({
      hostname: opts.host,
      port,
      exclusive: true, // a second responder on this port must fail, not share the queries
      data: undefined,
      socket: tcpHandlers(ctx, budget, { idleMs: limits.tcpIdleMs, maxUnsent: limits.tcpMaxUnsent }, connections),
    }),
  );
  let stopped = false;
  const stop = () => {
    if (stopped) return;
    stopped = true;
    udpSocket.close();
    tcp.stop(true);
    for (const socket of connections) socket.terminate();
  };
  return {
    udpPort: udpSocket.port,
    tcpPort: tcp.port,
    counters,
    get tcpOpen() {
      return connections.size;
    },
    stop,
    [Symbol.dispose]: stop,
  };
}

function udpHandler(ctx: ResponderContext): udp.SocketHandler<"buffer"> {
  return {
    data(socket, query, port, address, flags) {
      // larger than the receive buffer, or no port to answer to: nothing a resolver sends
      if (flags.truncated || port === 0) return;
      if (query.length > MAX_QUERY_BYTES) {
        ctx.counters.dropped++;
        ctx.fault("dns query dropped", { client: address, reason: `${query.length} bytes` });
        return;
      }
      if (!ctx.rate.take(address)) {
        ctx.counters.limited++;
        ctx.fault("dns client over the answer rate", { client: address });
        return;
      }
      const verdict = answerQuery(query, "udp", ctx.zone, ctx.records);
      if (verdict.kind === "drop") {
        ctx.counters.dropped++;
        ctx.fault("dns query dropped", { client: address, reason: verdict.reason });
        return;
      }
      ctx.counters.answered++;
      socket.send(verdict.bytes, port, address); // false (the kernel's buffer is full) is a lost datagram, as UDP allows
    },
    error(_socket, err) {
      ctx.fault("dns udp socket error", { err: err.message });
    },
  };
}

/**
 * UDP first, then TCP on the same number. With port 0 the UDP port is the
 * kernel's pick, which may be taken for TCP: then another, BIND_TRIES times.
 */
async function bindBoth(
  host: string,
  port: number,
  handler: udp.SocketHandler<"buffer">,
  listen: (port: number) => TCPSocketListener<Connection | undefined>,
): Promise<{ udpSocket: udp.Socket<"buffer">; tcp: TCPSocketListener<Connection | undefined> }> {
  for (let attempt = 1; ; attempt++) {
    let udpSocket: udp.Socket<"buffer">;
    try {
      udpSocket = await Bun.udpSocket({ hostname: host, port, socket: handler });
    } catch (err) {
      throw new AppError("PORT_UNAVAILABLE", `DNS: cannot listen on UDP ${host}:${port}: ${(err as Error).message}`);
    }
    try {
      return { udpSocket, tcp: listen(udpSocket.port) };
    } catch (err) {
      udpSocket.close();
      if (port !== 0 || attempt >= BIND_TRIES) {
        throw new AppError("PORT_UNAVAILABLE", `DNS: cannot listen on TCP ${host}:${udpSocket.port}: ${(err as Error).message}`);
      }
    }
  }
}

function zoneOf(opts: DnsResponderOptions): Zone {
  const name = normalizeName(opts.zone);
  if (!isHostName(name)) throw new Error(`DNS zone: not a DNS name: ${JSON.stringify(opts.zone)}`);
  const nameserver = normalizeName(opts.nameserver ?? name.slice(name.indexOf(".") + 1));
  if (!isHostName(nameserver) || !nameserver.includes(".") || inZone(nameserver, name)) {
    // a name server inside the zone would need glue records, which the parent zone would have to hold
    throw new Error(`DNS zone ${name}: the name server must be a host name outside it, got ${JSON.stringify(nameserver)}`);
  }
  return { name, nameserver, hostmaster: `hostmaster.${nameserver}` };
}

function limitsOf(given: Partial<DnsLimits> = {}): DnsLimits {
  const limits = { ...DEFAULT_DNS_LIMITS, ...given };
  for (const [key, value] of Object.entries(limits)) {
    if (!Number.isFinite(value) || value <= 0) throw new Error(`DNS limits: ${key} must be a positive number, got ${value}`);
  }
  return limits;
}
