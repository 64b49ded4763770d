/**
 * tls: visitors' TLS connections for a name, passed through by the
 * ClientHello's server name, undecrypted: each a "tls" stream (the hello
 * first), which the agent serves as a tcp one, to a service that
 * terminates TLS itself. IP rules only, as tcp. Its name is public (the
 * ClientHello's): it cannot be private. Its names are from the same ones
 * as http's.
 */
import * as v from "valibot";
import { TunnelPolicyText, RequestedName, TcpAccess } from "./request-parts.ts";
import { portSuffix, type KindUnit } from "./unit.ts";

export const TLS = {
  name: "tls",
  facts: { stream: "tls", carries: "bytes", reachedBy: "name", canBePrivate: false, access: "ip", metricsLabel: "tls" },
  /** Visitors' TLS connections for `subdomain`, passed through by the ClientHello's name, undecrypted; IP rules only, as tcp. */
  request: v.object({
    protocol: v.literal("tls"),
    subdomain: RequestedName,
    hostname: RequestedName,
    access: v.optional(TcpAccess),
    /** Its own traffic policy's text (TunnelPolicyText): on_tcp_connect only. */
    policy: TunnelPolicyText,
  }),
  display: {
    synopsis: "tls PORT|HOST:PORT",
    summary: "expose a local TLS service, passed through undecrypted, at tls://<name>.<domain>",
    heading: "TLS Connections",
    traffic: "Connections",
    link: false,
    connectVerb: "connect to",
    address: (at) => `tls://${at.host}${portSuffix(at.port)}`,
  },
} as const satisfies KindUnit<"tls">;
