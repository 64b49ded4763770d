/**
 * on_tcp_connect: a visitor's connection judged by the tunnel's policy
 * layers, the operator's first, before anything of it reaches the agent:
 * for a tcp or tls tunnel at accept (tcp.ts ConnectionDoor, and a tls
 * connection relayed from another node), for an http tunnel with the
 * first request a connection makes to it (http-door.ts). A rule that
 * closes it (deny, restrict-ips, rate-limit) closes it unanswered.
 */
import type { PolicyInput, Verdict } from "../../policy/index.ts";
import type { ClientHello } from "../../tls/client-hello.ts";
import { ja4 } from "../../tls/ja4.ts";
import { Refusal } from "../judgement/pipeline.ts";
import type { Tunnel } from "../registry.ts";
import { serverIpOf, tlsOf, tunnelFacts, type ConnectionEnds } from "./http-request.ts";
import { LayeredRun, policyAnswer } from "./layered-run.ts";
import { nodeRegion } from "./node-region.ts";
import type { TunnelPolicy } from "./tunnel-policy.ts";

export interface ConnectionSubject {
  client: string;
  clientPort: number;
  serverPort: number;
  /** The connection as the edge holds it: `conn.server_ip` and `conn.tls.*`, read only when a rule asks. */
  ends?: ConnectionEnds;
  /** The name or address the visitor reached, and how. */
  host: string;
  protocol: "http" | "https" | "tcp" | "tls";
  openedAt?: number;
  /** The region of the node the visitor came in at, when it is not this node's (a connection or request relayed from another node). */
  region?: string;
  /** A tls tunnel's visitor: the name its ClientHello asked for (the edge routes by it, and passes the handshake on undecrypted). */
  serverName?: string;
  /** A tls tunnel's visitor: its ClientHello (its JA4 made when a rule reads it), or the JA4 another node made of it. */
  hello?: ClientHello | string;
}

export function connectFacts(t: Tunnel, s: ConnectionSubject): PolicyInput {
  const now = Date.now();
  const port = s.protocol === "http" || s.protocol === "https" ? "" : `:${s.serverPort}`;
  return {
    conn: {
      clientIp: s.client,
      clientPort: s.clientPort,
      serverPort: s.serverPort,
      openedAt: s.openedAt ?? now,
      get serverIp() {
        return serverIpOf(s.ends);
      },
      // the connection's counts when a rule reads them (a tcp or tls visitor's: 0 until it is carried)
      get bytesIn() {
        return s.ends?.bytesIn ?? 0;
      },
      get bytesOut() {
        return s.ends?.bytesOut ?? 0;
      },
      serverRegion: s.region ?? nodeRegion(),
      // where the edge terminated the TLS (an https visitor); a tls tunnel's passes on undecrypted: only what its hello said is known
      get tls() {
        if (s.protocol === "https") return tlsOf(s.ends);
        if (s.serverName === undefined) return undefined;
        const hello = s.hello;
        return { version: "", cipherSuite: "", sni: s.serverName, negotiatedAlpn: "", sessionResumed: false, get ja4() { return typeof hello === "object" ? ja4(hello) : hello; } };
      },
    },
    endpoint: { host: s.host, port: s.serverPort, protocol: s.protocol, url: `${s.protocol}://${s.host}${port}` },
    tunnel: tunnelFacts(t),
    now,
  };
}

/** Closes it (a Refusal POLICY without an answer), or lets it on (undefined): at once when no action waits. */
export function judgeConnect(policy: TunnelPolicy, facts: PolicyInput): Refusal | undefined | Promise<Refusal | undefined> {
  const verdict = new LayeredRun(facts).through("on_tcp_connect", policy.layers);
  return verdict instanceof Promise ? verdict.then(connectRefusal) : connectRefusal(verdict);
}

function connectRefusal(verdict: Verdict): Refusal | undefined {
  if (verdict.kind === "continue") return undefined;
  // the tunnel's IP flags refuse as they always have (the door closes the connection, its log names the IP rules)
  if (verdict.code === "ADDRESS_REFUSED") return ADDRESS_REFUSED;
  return new Refusal("access", "POLICY", `rule ${verdict.rule}, ${verdict.action}`, verdict.kind === "respond" ? policyAnswer(verdict.response) : undefined);
}

const ADDRESS_REFUSED = new Refusal("access", "ADDRESS_REFUSED");
