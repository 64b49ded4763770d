/**
 * Client addresses, and which proxies may speak for them. Behind Caddy or
 * nginx every visitor arrives from the proxy's address, so the caps and
 * throttles that count per address would count the proxy. A proxy the
 * operator trusts (--trusted-proxies) says who the client was in
 * X-Forwarded-For; the client is the rightmost address in that chain that
 * is not itself a trusted proxy (what proxy-addr and nginx's real_ip do).
 * An untrusted peer's X-Forwarded-For is ignored: anyone can write one.
 *
 * CIDR parsing and matching is ipaddr.js's (well kept, used by Express's
 * proxy-addr), IPv4-mapped IPv6 addresses included.
 */
import ipaddr from "ipaddr.js";

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Dotted-quad as sockets report it (no leading zeros to read as octal). */
const PLAIN_IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** "10.0.0.0/8", "::1", "127.0.0.1": a single address is a /32 (or /128). */
export function isCidrOrAddress(text: string): boolean {
  return parseRange(text) !== undefined;
}

function parseRange(text: string): Range | undefined {
  try {
    if (text.includes("/")) return ipaddr.parseCIDR(text);
    const addr = ipaddr.parse(text);
    return [addr, addr.kind() === "ipv4" ? 32 : 128];
  } catch {
    return undefined;
  }
}

/** "::ffff:1.2.3.4" -> the IPv4 address, so one client is one key whichever socket family it came in on. */
function normalize(addr: ipaddr.IPv4 | ipaddr.IPv6): ipaddr.IPv4 | ipaddr.IPv6 {
  return addr.kind() === "ipv6" && (addr as ipaddr.IPv6).isIPv4MappedAddress() ? (addr as ipaddr.IPv6).toIPv4Address() : addr;
}

/** The canonical text of an address (the key caps and throttles count by), or the input when it is not one. */
export function canonicalAddress(text: string): string {
  // the common cases without a parse: every visitor's request comes through here
  if (PLAIN_IPV4.test(text)) return text;
  if (text.startsWith("::ffff:") && PLAIN_IPV4.test(text.slice(7))) return text.slice(7);
  try {
    return normalize(ipaddr.parse(text)).toString();
  } catch {
    return text;
  }
}

/**
 * A list of CIDRs (or single addresses), matched against an address of
 * either family: an IPv4-mapped range or address is its IPv4 self, so
 * "::ffff:10.0.0.0/104" and "10.0.0.0/8" are one rule and a visitor on a
 * dual-stack socket matches IPv4 rules.
 */
export class CidrList {
  private readonly ranges: Range[];

  constructor(cidrs: readonly string[]) {
    this.ranges = cidrs.map((c) => {
      const r = parseRange(c);
      if (!r) throw new Error(`not an address or CIDR: ${c}`);
      return [normalize(r[0]), r[0].kind() === "ipv6" && normalize(r[0]).kind() === "ipv4" ? r[1] - 96 : r[1]];
    });
  }

  get empty(): boolean {
    return this.ranges.length === 0;
  }

  /** Whether `address` (any text; what is not an address matches nothing) is in one of the ranges. */
  matches(address: string): boolean {
    if (this.ranges.length === 0) return false;
    let addr;
    try {
      addr = normalize(ipaddr.parse(address));
    } catch {
      return false;
    }
    return this.ranges.some(([range, bits]) => range.kind() === addr.kind() && addr.match(range, bits));
  }
}

export class TrustedProxies {
  private readonly ranges: CidrList;

  constructor(cidrs: string[]) {
    this.ranges = new CidrList(cidrs);
  }

  get empty(): boolean {
    return this.ranges.empty;
  }

  trusts(address: string): boolean {
    return this.ranges.matches(address);
  }

  /**
   * Who the client is: the peer itself, unless the peer is a trusted proxy;
   * then the rightmost address of X-Forwarded-For that is not trusted (or
   * the leftmost, when every hop is). Always canonical.
   */
  clientAddress(peer: string, forwardedFor: string | null): string {
    if (!forwardedFor || !this.trusts(peer)) return canonicalAddress(peer);
    const hops = forwardedFor.split(",").map((h) => h.trim()).filter((h) => h !== "");
    for (let i = hops.length - 1; i >= 0; i--) {
      const hop = hops[i]!;
      if (!ipaddr.isValid(hop)) return canonicalAddress(peer); // garbage in the chain: believe only the peer
      if (!this.trusts(hop) || i === 0) return canonicalAddress(hop);
    }
    return canonicalAddress(peer);
  }
}

/** IPv6 clients are counted by /64: one host is given a whole /64 and may send from any address in it. */
const IPV6_CLIENT_PREFIX_PARTS = 4;

/** The key a client is counted under by per-client limits (DNS answers, basic-auth guesses): its IPv4 address, or its IPv6 /64, since one host holds a whole /64. */
export function clientKey(address: string): string {
  const canonical = canonicalAddress(address);
  if (!canonical.includes(":")) return canonical;
  try {
    const parts = ipaddr.IPv6.parse(canonical).parts.slice(0, IPV6_CLIENT_PREFIX_PARTS);
    return `${parts.map((p) => p.toString(16)).join(":")}::/64`;
  } catch {
    return canonical;
  }
}
