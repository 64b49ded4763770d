/**
 * tcp: a public TCP port (from the tcp port space), each visitor connection
 * a "tcp" stream of its bytes to the agent; IP rules only, since nothing of
 * a TCP stream says who the visitor is. It can be private, and pooled.
 */
import * as v from "valibot";
import { TunnelPolicyText, PoolBalance, PrivateRequest, RequestedPort, TcpAccess } from "./request-parts.ts";
import type { KindUnit } from "./unit.ts";

export const TCP = {
  name: "tcp",
  facts: { stream: "tcp", carries: "bytes", reachedBy: "port", portSpace: "tcp", canBePrivate: true, access: "ip", metricsLabel: "tcp" },
  request: v.object({
    protocol: v.literal("tcp"),
    port: RequestedPort,
    access: v.optional(TcpAccess),
    /** Its own traffic policy's text (TunnelPolicyText): on_tcp_connect only. */
    policy: TunnelPolicyText,
    /** No public port: reached through `burrow connect` (PrivateRequest). */
    private: v.optional(PrivateRequest),
    /** Share the port with the user's other agents that ask for it with `pool`: connections are spread. */
    pool: v.optional(v.boolean()),
    balance: PoolBalance,
  }),
  display: {
    synopsis: "tcp PORT|HOST:PORT",
    summary: "expose a local TCP service at <domain>:<port>",
    heading: "TCP Connections",
    traffic: "Connections",
    link: false,
    connectVerb: "connect to",
    address: (at) => `${at.host}:${at.port}`,
  },
} as const satisfies KindUnit<"tcp">;
