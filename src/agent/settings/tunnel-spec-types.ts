/**
 * The shape of one tunnel spec (tunnel-spec.ts holds its rules): its
 * options with their values parsed, and what the agent runs for it. Apart
 * from the rules so that each kind's unit (agent/kinds/), which the rules
 * ask for a request, can name them without importing the rules back.
 */
import type { LocalTarget } from "../http.ts";
import type { PathRoute } from "../routes.ts";
import type { TunnelKind } from "../../protocol/kinds.ts";
import type { HttpAccess, TunnelRequest } from "../../protocol/messages.ts";
import type { UpstreamH2Values } from "./upstream-h2.ts";

/** The options with their values parsed (tunnel-options.ts); an option not given is undefined. The HTTP/2 client's limits toward the service are upstream-h2.ts's. */
export interface TunnelSpec extends UpstreamH2Values {
  kind: TunnelKind;
  target: LocalTarget;
  subdomain?: string;
  hostname?: string;
  remotePort?: number;
  pool?: boolean;
  poolBalance?: "round-robin" | "least-requests";
  healthCheck?: string;
  /** Seconds. */
  healthInterval?: number;
  private?: boolean;
  name?: string;
  share?: string[];
  hostHeader?: string;
  /** How the agent speaks to the service: HTTP/1.1 (the default), HTTP/2 with prior knowledge, HTTP/2 over TLS. */
  upstreamProtocol?: "http1" | "h2c" | "h2";
  routes?: PathRoute[];
  allowUpgrade?: string[];
  skipWarning?: boolean;
  responseTimeout?: number;
  inspect?: boolean;
  proxyProtocol?: boolean;
  basicAuth?: { user: string; password: string }[];
  allowCidr?: string[];
  denyCidr?: string[];
  requestHeaderAdd?: [string, string][];
  requestHeaderRemove?: string[];
  responseHeaderAdd?: [string, string][];
  oidc?: NonNullable<HttpAccess["oidc"]>;
  /** Its own traffic policy: the document's text, YAML or JSON (docs/policy.md), checked by the front-end and compiled by the edge. */
  policy?: string;
}

/** What the agent runs for one tunnel: the HELLO's request, where its local service is, and its extras. */
export interface SpecTunnel {
  request: TunnelRequest;
  target: LocalTarget;
  inspect: boolean;
  /** A pool member's health check. */
  health?: { check: string; intervalMs: number };
}
