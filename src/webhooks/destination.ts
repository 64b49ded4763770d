/**
 * Where burrow may send a webhook (or ask an admission hook): the URL's
 * form, then the addresses its host has. Anyone who may make a webhook
 * (an admin, or a user on the portal) names a URL the server then POSTs
 * to from inside the operator's network: loopback, link-local (a cloud's
 * metadata service at 169.254.169.254), private and other non-public
 * addresses are refused unless the server runs with
 * --webhook-allow-private. The check is made on every address the name
 * has, at each attempt (a name can change what it points to); plain http
 * is then sent to the address that was checked, so a name that answers
 * differently a moment later (DNS rebinding) reaches nothing new. An https
 * URL is fetched by name: the certificate must be valid for that name,
 * which no internal service's is.
 */
import { lookup } from "node:dns/promises";
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

const bare = (hostname: string) => (hostname.startsWith("[") ? hostname.slice(1, -1) : hostname);

/** A name that is this machine whatever DNS says. */
const isLocalName = (hostname: string) => /(^|\.)localhost\.?$/i.test(hostname);

/**
 * What the URL's host refers to now: an address to send to, or why not.
 * A refused address is named (it is the admin's or user's own URL), the
 * URL's path and query never (they may hold a receiver's token).
 */
export async function resolveDestination(url: URL, allowPrivate: boolean): Promise<{ address: string } | { problem: string }> {
  const host = bare(url.hostname);
  if (!allowPrivate && isLocalName(host)) return { problem: `${host} is this machine: refused (--webhook-allow-private allows it)` };
  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch (err) {
      return { problem: `${host} does not resolve (${(err as { code?: string }).code ?? "lookup failed"})` };
    }
  }
  if (addresses.length === 0) return { problem: `${host} has no address` };
  if (!allowPrivate) {
    const refused = addresses.find((a) => !isPublicAddress(a));
    if (refused !== undefined) return { problem: `${host} is ${refused}, not a public address: refused (--webhook-allow-private allows it)` };
  }
  return { address: addresses[0]! };
}

/** At creation: a URL whose host is a literal address (or localhost) that will be refused, said at once rather than at each delivery. */
export function refusedAtOnce(url: URL, allowPrivate: boolean): string | undefined {
  if (allowPrivate) return undefined;
  const host = bare(url.hostname);
  if (isLocalName(host)) return `${host} is this machine: refused (the server's --webhook-allow-private allows it)`;
  if (ipaddr.isValid(host) && !isPublicAddress(host)) return `${host} is not a public address: refused (the server's --webhook-allow-private allows it)`;
  return undefined;
}
