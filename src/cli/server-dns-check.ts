/**
 * `burrow server dns-check --domain D`: looks up, from the server itself,
 * the DNS records docs/production.md and `burrow server init` ask for, asks burrow's own
 * DNS responder directly, and prints one line per check (dns/check.ts
 * decides what each finding means). Exit code 0 when the records and the
 * responder are right, 1 when something must be fixed, 2 for a mistake on
 * the command line.
 *
 * Lookups go through the system's resolvers (node:dns), or `--resolver`:
 * what a visitor's or the CA's resolver would see, modulo caches. The
 * responder is asked with dns-packet over UDP and TCP, straight at each
 * address the NS record leads to, so that a port closed for one transport
 * shows.
 */
import { randomBytes } from "node:crypto";
import { Resolver } from "node:dns/promises";
import { networkInterfaces } from "node:os";
import { challengeZone, checkDns, exitCodeOf, renderCheckLine, type AddressLookup, type Lookup, type ResponderProbe } from "../dns/check.ts";
import { probeDns, type ProbeQuestion } from "../dns/probe.ts";
import { DNS_CHECK_DOC, parseDnsCheck } from "./server-dns-check-flags.ts";
import { hostPort, parseHostPort } from "../dns/resolver-address.ts";
import { guessPublicAddresses } from "../dns/public-address.ts";
import { helpText } from "./usage.ts";

export async function serverDnsCheckCommand(argv: string[]): Promise<number> {
  const parsed = parseDnsCheck(argv);
  if (parsed.help) {
    process.stdout.write(helpText(DNS_CHECK_DOC));
    return 0;
  }
  const o = parsed.options;
  const server = o.publicIps ?? guessPublicAddresses(networkInterfaces());
  const resolver = new Resolver({ timeout: o.timeoutMs, tries: 1 });
  if (o.resolver) resolver.setServers([hostPort(o.resolver.host, o.resolver.port)]);
  const resolverAddress = o.resolver ?? systemResolver(resolver.getServers());

  const ours = [...server.v4, ...server.v6];
  const source = o.publicIps ? "given" : "guessed";
  const header = [
    `Checking the DNS records of ${o.domain} through ${resolverAddress ? hostPort(resolverAddress.host, resolverAddress.port) : "the system's resolver"}`,
    ours.length > 0
      ? `  this server: ${ours.join(", ")} (${source === "given" ? "--public-ip" : "guessed from its network interfaces; name them with --public-ip"})`
      : "  this server: no public address on its interfaces (behind NAT?): name it with --public-ip",
  ];
  process.stdout.write(header.join("\n") + "\n");

  const zone = challengeZone(o.domain);
  const wildcardName = `burrow-check-${randomBytes(5).toString("hex")}.${o.domain}`;
  const [apex, wildcard, ns] = await Promise.all([addresses(resolver, o.domain), addresses(resolver, wildcardName), lookup(() => resolver.resolveNs(zone))]);
  const targetNames = ns.ok ? [...new Set(ns.values.map((n) => n.toLowerCase().replace(/\.$/, "")))] : [];
  const nsTargets = await Promise.all(targetNames.map(async (name) => ({ name, lookup: await addresses(resolver, name) })));
  const targetAddresses = [...new Set(nsTargets.flatMap((t) => found(t.lookup)))];
  const probedFrom = targetAddresses.length > 0 ? "ns" : "server";
  const probeAddresses = probedFrom === "ns" ? targetAddresses : ours;
  const soa: ProbeQuestion = { name: zone, type: "SOA", recursive: false };
  const txtQuestion: ProbeQuestion = { name: zone, type: "TXT", recursive: true };
  const [probes, txt] = await Promise.all([
    Promise.all(
      probeAddresses.map(async (address): Promise<ResponderProbe> => {
        const [udp, tcp] = await Promise.all([probeDns(address, o.dnsPort, soa, "udp", o.timeoutMs), probeDns(address, o.dnsPort, soa, "tcp", o.timeoutMs)]);
        return { address, udp, tcp };
      }),
    ),
    resolverAddress
      ? probeDns(resolverAddress.host, resolverAddress.port, txtQuestion, "udp", o.timeoutMs)
      : Promise.resolve({ kind: "silent" as const, error: "no resolver address known to ask directly" }),
  ]);

  // a wildcard hostname is looked up at a random name under it, as *.D is
  const hostnames = await Promise.all(
    o.hostnames.map(async (record) => {
      const name = record.startsWith("*.") ? `burrow-check-${randomBytes(5).toString("hex")}${record.slice(1)}` : record;
      return { record, name, lookup: await addresses(resolver, name) };
    }),
  );
  const lines = checkDns({ domain: o.domain, server, serverSource: source, dnsPort: o.dnsPort, apex, wildcard: { name: wildcardName, lookup: wildcard }, ns, nsTargets, probedFrom, probes, txt, hostnames });
  process.stdout.write(lines.map(renderCheckLine).join("\n") + "\n");
  return exitCodeOf(lines);
}

async function lookup(query: () => Promise<string[]>): Promise<Lookup> {
  try {
    return { ok: true, values: await query() };
  } catch (err) {
    return { ok: false, code: String((err as { code?: string }).code ?? (err as Error).message) };
  }
}

async function addresses(resolver: Resolver, name: string): Promise<AddressLookup> {
  const [v4, v6] = await Promise.all([lookup(() => resolver.resolve4(name)), lookup(() => resolver.resolve6(name))]);
  return { v4, v6 };
}

const found = (l: AddressLookup) => [...(l.v4.ok ? l.v4.values : []), ...(l.v6.ok ? l.v6.values : [])];

/** The first of the system's resolvers, as node:dns lists them (`1.2.3.4`, `1.2.3.4:5353`, `::1`, `[::1]:5353`). */
function systemResolver(servers: string[]): { host: string; port: number } | undefined {
  for (const server of servers) {
    try {
      return parseHostPort(server, "resolver");
    } catch {
      // not an address we can ask directly: try the next
    }
  }
  return undefined;
}


