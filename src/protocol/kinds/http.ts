/**
 * http: a visitor's HTTP requests for a name (a subdomain or a custom
 * hostname), each an "h1" stream to the agent, with http's access rules
 * (basic auth, OIDC, header rules, IP rules). It can be private: then no
 * public name, reached through `burrow connect`.
 */
import * as v from "valibot";
import { HttpAccess, TunnelPolicyText, PoolBalance, PrivateRequest, RequestedName, UPGRADE_TOKEN } from "./request-parts.ts";
import { portSuffix, type KindUnit } from "./unit.ts";

export const HTTP = {
  name: "http",
  facts: { stream: "h1", carries: "bytes", reachedBy: "name", canBePrivate: true, access: "http", metricsLabel: "http" },
  request: v.object({
    protocol: v.literal("http"),
    subdomain: RequestedName,
    /** A custom hostname of the user's, verified (demo.acme.com): the tunnel is reached by it as well as by its subdomain. */
    hostname: RequestedName,
    skipWarning: v.optional(v.boolean()),
    /** Seconds the edge waits for the local service's answer, asked by the agent (the edge caps it). */
    responseTimeout: v.optional(v.pipe(v.number(), v.minValue(0.1), v.maxValue(86_400))),
    access: v.optional(HttpAccess),
    /** Its own traffic policy's text (TunnelPolicyText): on_http_request, on_http_response and on_event_stream_message, and on_tcp_connect. */
    policy: TunnelPolicyText,
    /** Share the name with the user's other agents that ask for it with `pool` (edge/pool.ts). */
    pool: v.optional(v.boolean()),
    /** How the pool spreads requests; the first member's choice holds for the pool. */
    balance: PoolBalance,
    /** No public name: reached through `burrow connect` (PrivateRequest), each request with the connector's X-Burrow-User. */
    private: v.optional(PrivateRequest),
    /**
     * Protocols besides websocket a request may switch to (Upgrade tokens,
     * such as h2c); any other Upgrade is taken off the request (http/upgrade.ts).
     * A server that predates it drops it: websocket only, the safe side.
     */
    allowUpgrade: v.optional(v.pipe(v.array(v.pipe(v.string(), v.regex(UPGRADE_TOKEN))), v.maxLength(16))),
  }),
  display: {
    synopsis: "http PORT|HOST:PORT",
    summary: "expose a local HTTP service at http://<name>.<domain>",
    heading: "HTTP Requests",
    traffic: "Requests",
    link: true,
    connectVerb: "open",
    address: (at) => `${at.web ?? "http"}://${at.host}${portSuffix(at.port)}`,
  },
} as const satisfies KindUnit<"http">;
