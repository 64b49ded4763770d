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
 * which no internal service's is. The traffic policies' http-request
 * action goes by the same rules, under its own flag
 * (--policy-http-request-allow-private).
 */
import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";
import { bareHost, isLocalName, isPublicAddress } from "../validate/webhook-url.ts";

/**
 * What the URL's host refers to now: an address to send to, or why not.
 * A refused address is named (it is the admin's or user's own URL), the
 * URL's path and query never (they may hold a receiver's token).
 */
export async function resolveDestination(url: URL, allowPrivate: boolean, flag = "--webhook-allow-private"): Promise<{ address: string; addresses: string[] } | { problem: string; refused: boolean }> {
  const host = bareHost(url.hostname);
  if (!allowPrivate && isLocalName(host)) return { problem: `${host} is this machine: refused (${flag} allows it)`, refused: true };
  let addresses: string[];
  if (ipaddr.isValid(host)) addresses = [host];
  else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })).map((a) => a.address);
    } catch (err) {
      return { problem: `${host} does not resolve (${(err as { code?: string }).code ?? "lookup failed"})`, refused: false };
    }
  }
  if (addresses.length === 0) return { problem: `${host} has no address`, refused: false };
  if (!allowPrivate) {
    const refused = addresses.find((a) => !isPublicAddress(a));
    if (refused !== undefined) return { problem: `${host} is ${refused}, not a public address: refused (${flag} allows it)`, refused: true };
  }
  return { address: addresses[0]!, addresses };
}
