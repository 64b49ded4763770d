/**
 * What a request's Host says about where it goes on this edge: read once
 * per visitor connection and Host value, not once per request (a browser's
 * kept-alive connection sends the same Host every time).
 */
import { isIP } from "node:net";
import { parseHost } from "../http/request-target.ts";

export interface HostRoute {
  /** The Host value as sent. */
  raw: string | undefined;
  /** Name and port, lower-cased (the X-Forwarded-Host and the pages say it). */
  hostHeader: string;
  /** The subdomain of the edge's domain it names (possibly with dots: no tunnel), or undefined: not under the domain. */
  name: string | undefined;
  /** Not under the domain, nor the domain itself, nor an address: a name that may be a tunnel's custom hostname. */
  custom: string | undefined;
  /** The domain itself (any port): the portal's, when it is on. */
  apex: boolean;
}

/** The route of `raw` under `domain`, or undefined when it is no valid host[:port]. */
export function hostRoute(raw: string | undefined, domain: string): HostRoute | undefined {
  const parsed = parseHost(raw);
  if (!parsed) return undefined;
  const host = parsed.hostname;
  const hostHeader = parsed.port === undefined ? host : `${host}:${parsed.port}`;
  const name = host.endsWith(`.${domain}`) ? host.slice(0, -domain.length - 1) : undefined;
  const custom = name === undefined && host !== domain && host.includes(".") && !isIP(host.replace(/^\[|\]$/g, "")) ? host : undefined;
  return { raw, hostHeader, name, custom, apex: host === domain };
}
