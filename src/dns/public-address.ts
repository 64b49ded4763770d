/**
 * The server's public addresses, for the DNS records `burrow server init`
 * prints: the ones given with --public-ip, else a guess from this machine's
 * interfaces. No outside service is asked: on a VPS the public address is
 * usually on an interface, and behind NAT a guess from outside would name
 * the NAT, which the operator knows better.
 */
import ipaddr from "ipaddr.js";
import type { NetworkInterfaceInfo } from "node:os";
import { UsageError } from "../usage-error.ts";

export interface PublicAddresses {
  v4: string[];
  v6: string[];
}

/** --public-ip values, each one address or a comma-separated list of them. */
export function parsePublicIps(values: string[]): PublicAddresses {
  const out: PublicAddresses = { v4: [], v6: [] };
  for (const item of values.flatMap((v) => v.split(",")).map((s) => s.trim()).filter((s) => s !== "")) {
    // four-part decimal only: ipaddr.js would also take 0x7f.1 or 2130706433, which no one means here
    const plain = ipaddr.IPv4.isValidFourPartDecimal(item) || (ipaddr.IPv6.isValid(item) && !item.includes("%"));
    if (!plain) throw new UsageError(`--public-ip must be an IPv4 or IPv6 address (got '${item}')`);
    const addr = ipaddr.parse(item);
    const list = addr.kind() === "ipv4" ? out.v4 : out.v6;
    const text = addr.kind() === "ipv4" ? addr.toString() : (addr as ipaddr.IPv6).toRFC5952String();
    if (!list.includes(text)) list.push(text);
  }
  return out;
}

/**
 * Addresses on this machine's interfaces that the internet could reach:
 * global unicast only (no loopback, private, link-local, unique-local,
 * carrier-grade NAT or documentation ranges).
 */
export function guessPublicAddresses(interfaces: NodeJS.Dict<NetworkInterfaceInfo[]>): PublicAddresses {
  const out: PublicAddresses = { v4: [], v6: [] };
  for (const info of Object.values(interfaces).flatMap((list) => list ?? [])) {
    if (info.internal || !ipaddr.isValid(info.address)) continue;
    const addr = ipaddr.parse(info.address);
    if (addr.range() !== "unicast") continue;
    const list = addr.kind() === "ipv4" ? out.v4 : out.v6;
    const text = addr.kind() === "ipv4" ? addr.toString() : (addr as ipaddr.IPv6).toRFC5952String();
    if (!list.includes(text)) list.push(text);
  }
  return out;
}

/** The records to create: the domain and its wildcard, to each address. */
export function dnsRecords(domain: string, addresses: PublicAddresses): { name: string; type: "A" | "AAAA"; value: string }[] {
  const records: { name: string; type: "A" | "AAAA"; value: string }[] = [];
  for (const name of [domain, `*.${domain}`]) {
    for (const value of addresses.v4) records.push({ name, type: "A", value });
    for (const value of addresses.v6) records.push({ name, type: "AAAA", value });
  }
  return records;
}
