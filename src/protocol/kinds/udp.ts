/**
 * udp: a public UDP port (its own port space, not tcp's). Each visitor
 * address and port is a flow, one "udp" stream whose datagrams travel whole
 * in DATAGRAM frames, outside the streams' credit; IP rules only. It can
 * be private.
 */
import * as v from "valibot";
import { PrivateRequest, RequestedPort, TcpAccess } from "./request-parts.ts";
import type { KindUnit } from "./unit.ts";

export const UDP = {
  name: "udp",
  facts: { stream: "udp", carries: "datagrams", reachedBy: "port", portSpace: "udp", canBePrivate: true, access: "ip", metricsLabel: "udp" },
  /** A public UDP port (its own port space, not tcp's): each visitor address's datagrams a flow to the local service; IP rules only. */
  request: v.object({
    protocol: v.literal("udp"),
    port: RequestedPort,
    access: v.optional(TcpAccess),
    /** No public port: reached through `burrow connect` (PrivateRequest). */
    private: v.optional(PrivateRequest),
  }),
  display: {
    synopsis: "udp PORT|HOST:PORT",
    summary: "expose a local UDP service at udp://<domain>:<port>",
    heading: "UDP Flows",
    traffic: "Flows",
    link: false,
    connectVerb: "send to",
    address: (at) => `udp://${at.host}:${at.port}`,
  },
} as const satisfies KindUnit<"udp">;
