/**
 * What a webhook's (or an admission hook's) URL must look like, and which
 * addresses are everyone's: the rules the admin API, the portal and the
 * flags check a URL by when it is given, and the delivery worker checks
 * its host's addresses by at each attempt (webhooks/destination.ts).
 */
import ipaddr from "ipaddr.js";

/** A URL's characters at most. */
export const MAX_URL_LENGTH = 2048;

/** Why a URL cannot be a webhook's, or undefined. Only its form: the addresses are looked at when it is used. */
export function urlProblem(text: string): string | undefined {
  if (text.length > MAX_URL_LENGTH) return `the URL is longer than ${MAX_URL_LENGTH} characters`;
  const url = URL.parse(text);
  if (!url) return "not a URL: give http(s)://host[:port]/path";
  if (url.protocol !== "http:" && url.protocol !== "https:") return "the URL must start with http:// or https://";
  if (url.username !== "" || url.password !== "") return "the URL must not carry a user or password (receivers verify the signature instead)";
  if (url.hash !== "") return "the URL must not have a #fragment";
  if (url.hostname === "") return "the URL has no host";
  return undefined;
}

/** Whether an address is one anyone on the internet has: not loopback, link-local, private, shared, multicast or reserved. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let addr = ipaddr.parse(address);
  if (addr.kind() === "ipv6" && (addr as ipaddr.IPv6).isIPv4MappedAddress()) addr = (addr as ipaddr.IPv6).toIPv4Address();
  return addr.range() === "unicast";
}

/** A URL's host without IPv6's brackets. */
export const bareHost = (hostname: string) => (hostname.startsWith("[") ? hostname.slice(1, -1) : hostname);

/** A name that is this machine whatever DNS says. */
export const isLocalName = (hostname: string) => /(^|\.)localhost\.?$/i.test(hostname);

/** At creation: a URL whose host is a literal address (or localhost) that will be refused, said at once rather than at each delivery. */
export function refusedAtOnce(url: URL, allowPrivate: boolean): string | undefined {
  if (allowPrivate) return undefined;
  const host = bareHost(url.hostname);
  if (isLocalName(host)) return `${host} is this machine: refused (the server's --webhook-allow-private allows it)`;
  if (ipaddr.isValid(host) && !isPublicAddress(host)) return `${host} is not a public address: refused (the server's --webhook-allow-private allows it)`;
  return undefined;
}
