/**
 * What `burrow server dns-check` concludes from what it looked up: one line
 * per check, `ok`, `FAIL` or `warn`, with what was found and, when
 * something is wrong, what to do. Pure: the lookups are done elsewhere
 * (cli/server-dns-check.ts) and handed in as facts, so that every way a
 * record can be wrong is tested without a DNS server.
 *
 * The checks, in the order an operator fixes things:
 * - domain: `D` has A/AAAA records, and they are this server's addresses;
 * - wildcard: a random name under `D` resolves the same (`*.D`);
 * - delegation: `_acme-challenge.D` has NS records, each naming a host that
 *   resolves to this server;
 * - responder: asked directly, over UDP and over TCP, on each NS target's
 *   address, burrow's DNS answers for the zone with its own SOA;
 * - resolution: a TXT question for `_acme-challenge.D` through the resolver
 *   (as the CA's resolvers ask) gets NOERROR: a warning only, since caches
 *   may still hold an older answer for a while.
 */
import ipaddr from "ipaddr.js";
import type { SoaData } from "dns-packet";
import type { PublicAddresses } from "./public-address.ts";
import type { ProbeAnswer } from "./probe.ts";
import { SOA_TIMERS } from "./wire.ts";

/** A lookup through the resolver: the values, or node:dns's error code (ENOTFOUND, ENODATA, ESERVFAIL, ETIMEOUT, ...). */
export type Lookup = { ok: true; values: string[] } | { ok: false; code: string };

export interface AddressLookup {
  v4: Lookup;
  v6: Lookup;
}

/** burrow's responder asked directly at one address. */
export interface ResponderProbe {
  address: string;
  udp: ProbeAnswer;
  tcp: ProbeAnswer;
}

export interface DnsFacts {
  domain: string;
  /** This server's public addresses, and whether they were given (--public-ip) or guessed. */
  server: PublicAddresses;
  serverSource: "given" | "guessed";
  /** The port burrow's responder is meant to listen on (--dns-port). */
  dnsPort: number;
  apex: AddressLookup;
  /** A random name below the domain, and its lookup. */
  wildcard: { name: string; lookup: AddressLookup };
  /** NS of `_acme-challenge.D`. */
  ns: Lookup;
  /** Each NS target's addresses. */
  nsTargets: { name: string; lookup: AddressLookup }[];
  /** Where the probes went: the NS targets' addresses, or (no target resolved) this server's. */
  probedFrom: "ns" | "server";
  probes: ResponderProbe[];
  /** TXT `_acme-challenge.D` through the resolver, asked for recursion. */
  txt: ProbeAnswer;
  /** Custom hostnames (--hostname): the record, the name looked up (a random one under a wildcard) and its lookup. */
  hostnames?: { record: string; name: string; lookup: AddressLookup }[];
}

export type CheckStatus = "ok" | "FAIL" | "warn";

export interface CheckLine {
  status: CheckStatus;
  /** domain, wildcard, delegation, responder, resolution. */
  check: string;
  /** What was found; on FAIL or warn, then what to do. */
  text: string;
}

export const challengeZone = (domain: string) => `_acme-challenge.${domain}`;

export function checkDns(f: DnsFacts): CheckLine[] {
  const hostnames = (f.hostnames ?? []).map((h) => addressLine("hostname", h.name, h.record, h.lookup, f));
  return [domainCheck(f), wildcardCheck(f), delegationCheck(f), responderCheck(f), resolutionCheck(f), ...hostnames];
}

/** 1 when a check failed, 0 otherwise (warnings included). */
export const exitCodeOf = (lines: CheckLine[]) => (lines.some((l) => l.status === "FAIL") ? 1 : 0);

export function renderCheckLine(line: CheckLine): string {
  return `${line.status.padEnd(4)}  ${line.check.padEnd(10)}  ${line.text}`;
}

function domainCheck(f: DnsFacts): CheckLine {
  return addressLine("domain", f.domain, f.domain, f.apex, f);
}

function wildcardCheck(f: DnsFacts): CheckLine {
  return addressLine("wildcard", f.wildcard.name, `*.${f.domain}`, f.wildcard.lookup, f);
}

/** An A/AAAA check: the records `record` needs, as looked up at `name`. */
function addressLine(check: string, name: string, record: string, lookup: AddressLookup, f: DnsFacts): CheckLine {
  const found = foundAddresses(lookup);
  const create = recordsToCreate(record, f.server);
  if (found.length === 0) {
    return { status: "FAIL", check, text: `${name}: no A/AAAA record (${whyNone(lookup)}); create ${create}` };
  }
  const ours = serverAddresses(f.server);
  const shown = `${name} -> ${found.join(", ")}`;
  if (ours.length === 0) {
    return { status: "warn", check, text: `${shown}; this server's public address is unknown (none on its interfaces: behind NAT?), so not compared: name it with --public-ip` };
  }
  const matched = found.filter((a) => ours.includes(a));
  const missing = ours.filter((a) => !found.includes(a));
  const others = found.filter((a) => !ours.includes(a));
  if (matched.length === 0) {
    const guessed = f.serverSource === "guessed" ? ` (guessed from its interfaces; if the internet reaches it at another address, give that with --public-ip)` : "";
    return { status: "FAIL", check, text: `${shown}, not this server (${ours.join(", ")}${guessed}); point ${record} at it: ${create}` };
  }
  const notes: string[] = [];
  if (missing.length > 0) notes.push(`no record for ${missing.join(", ")} of this server: add ${recordsToCreate(record, split(missing))}`);
  if (others.length > 0) notes.push(`${others.join(", ")} is not this server: visitors sent there miss burrow; remove it`);
  if (notes.length > 0) return { status: "warn", check, text: `${shown}; ${notes.join("; ")}` };
  return { status: "ok", check, text: `${shown} (this server)` };
}

function delegationCheck(f: DnsFacts): CheckLine {
  const check = "delegation";
  const zone = challengeZone(f.domain);
  const create = `\`${zone}. NS ${f.domain}.\` in the zone that holds ${f.domain}, at its DNS provider (burrow server init --acme-email prints it)`;
  if (!f.ns.ok || f.ns.values.length === 0) {
    const code = f.ns.ok ? "ENODATA" : f.ns.code;
    if (code === "ESERVFAIL") {
      return {
        status: "FAIL",
        check,
        text: `NS ${zone}: the resolver failed (SERVFAIL): a delegation whose server does not answer looks like this (see responder); if there is no NS record yet, create ${create}`,
      };
    }
    return { status: "FAIL", check, text: `NS ${zone}: ${describeLookupError(code)}; create ${create}` };
  }
  const ours = serverAddresses(f.server);
  const parts: string[] = [];
  let status: CheckStatus = "ok";
  for (const target of f.nsTargets) {
    const found = foundAddresses(target.lookup);
    if (found.length === 0) {
      status = "FAIL";
      parts.push(`${target.name} has no A/AAAA record (${whyNone(target.lookup)}): the delegation leads nowhere; name ${f.domain} instead`);
    } else if (ours.length === 0) {
      if (status === "ok") status = "warn";
      parts.push(`${target.name} -> ${found.join(", ")} (this server's address is unknown: not compared; name it with --public-ip)`);
    } else if (!found.some((a) => ours.includes(a))) {
      status = "FAIL";
      parts.push(`${target.name} -> ${found.join(", ")}, not this server (${ours.join(", ")}): the CA would ask another machine; name ${f.domain} instead`);
    } else {
      parts.push(`${target.name} -> ${found.join(", ")} (this server)`);
    }
  }
  return { status, check, text: `${zone} NS ${f.ns.values.join(", ")}; ${parts.join("; ")}` };
}

function responderCheck(f: DnsFacts): CheckLine {
  const check = "responder";
  const zone = challengeZone(f.domain);
  if (f.probes.length === 0) {
    return { status: "FAIL", check, text: `no address to ask: no NS target of ${zone} resolved, and this server's address is unknown (give --public-ip)` };
  }
  const from = f.probedFrom === "server" ? ` (no NS target to follow: asked this server's own address)` : "";
  const parts: string[] = [];
  let failed = false;
  for (const probe of f.probes) {
    const at = `${hostPort(probe.address, f.dnsPort)}`;
    const udp = isBurrows(probe.udp, f.domain);
    const tcp = isBurrows(probe.tcp, f.domain);
    if (udp && tcp) {
      parts.push(`${at}: burrow's SOA for ${zone}, authoritative, over UDP and TCP`);
      continue;
    }
    failed = true;
    if (probe.udp.kind === "silent" && probe.tcp.kind === "silent") {
      parts.push(
        `nothing answers DNS on ${at} (UDP/TCP: ${probe.udp.error}; ${probe.tcp.error}): is \`burrow server --acme-email ...\` running with --dns-port ${f.dnsPort}, and is port ${f.dnsPort} open in the firewall (UDP and TCP)?`,
      );
    } else if (udp || tcp) {
      const [works, fails, answer] = udp ? ["UDP", "TCP", probe.tcp] : ["TCP", "UDP", probe.udp];
      parts.push(`burrow answers on ${at} over ${works} but not over ${fails} (${describeProbe(answer)}): open port ${f.dnsPort} for ${fails} too (the CA's resolvers use both)`);
    } else {
      const answer = probe.udp.kind === "answer" ? probe.udp : probe.tcp;
      parts.push(
        `something else answers DNS on ${at}: ${describeProbe(answer)}, not burrow's SOA (${expectedSoa(f.domain)}): another DNS server holds the port (systemd-resolved, dnsmasq, bind?), or a burrow started with another --domain; stop it, or point the NS record at this server`,
      );
    }
  }
  return { status: failed ? "FAIL" : "ok", check, text: parts.join("; ") + from };
}

function resolutionCheck(f: DnsFacts): CheckLine {
  const check = "resolution";
  const q = `TXT ${challengeZone(f.domain)} through the resolver`;
  const txt = f.txt;
  if (txt.kind === "silent") return { status: "warn", check, text: `${q}: no answer (${txt.error}); the CA resolves the same way` };
  if (txt.rcode === "NOERROR") {
    const what = txt.answers > 0 ? `${txt.answers} record(s) (a challenge in progress)` : "no record now, as expected between orders";
    return { status: "ok", check, text: `${q}: NOERROR, ${what}` };
  }
  const why: Record<string, string> = {
    NXDOMAIN: "the name does not exist as far as the resolver knows: the NS record is missing, or not yet seen (caches keep the old answer up to its TTL)",
    SERVFAIL: "the resolver could not get an answer: the delegation exists but burrow's DNS is not reached from outside (port 53 closed?), or DNSSEC fails",
    REFUSED: "the resolver refused to recurse for this machine: pass another with --resolver",
  };
  return { status: "warn", check, text: `${q}: ${txt.rcode}: ${why[txt.rcode] ?? "not NOERROR"}; the CA resolves the same way, so issuance would fail` };
}

/** The SOA burrow's responder puts in its answers for the zone (answer.ts, responder.ts): its MNAME is the domain. */
export function isBurrowSoa(soa: SoaData, domain: string): boolean {
  const name = (n: string) => n.toLowerCase().replace(/\.$/, "");
  return (
    name(soa.mname) === domain &&
    name(soa.rname) === `hostmaster.${domain}` &&
    soa.serial === SOA_TIMERS.serial &&
    soa.refresh === SOA_TIMERS.refresh &&
    soa.retry === SOA_TIMERS.retry &&
    soa.expire === SOA_TIMERS.expire
  );
}

const expectedSoa = (domain: string) => `${domain} hostmaster.${domain} ${SOA_TIMERS.serial}`;

function isBurrows(answer: ProbeAnswer, domain: string): boolean {
  return answer.kind === "answer" && answer.rcode === "NOERROR" && answer.authoritative && answer.soa.some((s) => isBurrowSoa(s, domain));
}

function describeProbe(answer: ProbeAnswer): string {
  if (answer.kind === "silent") return answer.error;
  const soa = answer.soa[0];
  const soaText = soa ? `SOA ${soa.mname} ${soa.rname} ${soa.serial ?? ""}`.trim() : "no SOA";
  return `${answer.rcode}, ${answer.authoritative ? "authoritative" : "not authoritative"}, ${soaText}`;
}

function describeLookupError(code: string): string {
  switch (code) {
    case "ENOTFOUND":
    case "ENODATA":
      return "no such record";
    case "ESERVFAIL":
      return "the resolver failed (SERVFAIL)";
    case "ETIMEOUT":
      return "no answer from the resolver in time";
    case "EREFUSED":
      return "the resolver refused the question";
    case "ECONNREFUSED":
      return "the resolver is not reachable";
    default:
      return `lookup failed (${code})`;
  }
}

/** Why a name has no address: the A lookup's error says most (the AAAA one is often just "none"). */
function whyNone(lookup: AddressLookup): string {
  const code = !lookup.v4.ok ? lookup.v4.code : !lookup.v6.ok ? lookup.v6.code : "ENODATA";
  return describeLookupError(code);
}

function foundAddresses(lookup: AddressLookup): string[] {
  const values = [...(lookup.v4.ok ? lookup.v4.values : []), ...(lookup.v6.ok ? lookup.v6.values : [])];
  return [...new Set(values.map(canonical))];
}

function serverAddresses(server: PublicAddresses): string[] {
  return [...server.v4, ...server.v6].map(canonical);
}

function canonical(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const parsed = ipaddr.parse(address);
  return parsed.kind() === "ipv6" ? (parsed as ipaddr.IPv6).toRFC5952String() : parsed.toString();
}

function split(addresses: string[]): PublicAddresses {
  return { v4: addresses.filter((a) => !a.includes(":")), v6: addresses.filter((a) => a.includes(":")) };
}

/** `name A 192.0.2.1`, one per address, or a placeholder when the server's address is unknown. */
function recordsToCreate(name: string, server: PublicAddresses): string {
  const records = [...server.v4.map((a) => `${name} A ${a}`), ...server.v6.map((a) => `${name} AAAA ${a}`)];
  return records.length > 0 ? records.map((r) => `\`${r}\``).join(" and ") : `\`${name} A <this server's public IPv4 address>\``;
}

function hostPort(address: string, port: number): string {
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}
