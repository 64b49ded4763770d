/**
 * The dns-check evaluator on hand-made facts: every way a record or the
 * responder can be wrong gives a FAIL (or warn) line saying what to do,
 * and the exit code follows the FAILs only. The same lookups on real
 * servers are in test/cli/server-dns-check.test.ts.
 */
import { describe, expect, test } from "bun:test";
import { checkDns, exitCodeOf, isBurrowSoa, renderCheckLine, type AddressLookup, type CheckLine, type DnsFacts, type Lookup } from "../../src/dns/check.ts";
import type { ProbeAnswer } from "../../src/dns/probe.ts";
import { parseDnsCheck } from "../../src/cli/server-dns-check-flags.ts";
import { parseHostPort } from "../../src/dns/resolver-address.ts";
import { UsageError } from "../../src/usage-error.ts";

const D = "tunnels.example.com";
const ZONE = `_acme-challenge.${D}`;
const IP = "198.51.100.7";
const IP6 = "2001:db8::7";
const BURROW_SOA = { mname: D, rname: `hostmaster.${D}`, serial: 1, refresh: 3600, retry: 600, expire: 86_400, minimum: 0 };

const values = (...v: string[]): Lookup => ({ ok: true, values: v });
const error = (code: string): Lookup => ({ ok: false, code });
const at = (v4: Lookup, v6: Lookup = error("ENODATA")): AddressLookup => ({ v4, v6 });
const burrow: ProbeAnswer = { kind: "answer", rcode: "NOERROR", authoritative: true, answers: 1, soa: [BURROW_SOA] };
const silent = (why: string): ProbeAnswer => ({ kind: "silent", error: why });

/** Everything right: the domain, the wildcard and the NS target at IP, the responder answering there. */
function facts(change: Partial<DnsFacts> = {}): DnsFacts {
  return {
    domain: D,
    server: { v4: [IP], v6: [] },
    serverSource: "given",
    dnsPort: 53,
    apex: at(values(IP)),
    wildcard: { name: `burrow-check-0123456789.${D}`, lookup: at(values(IP)) },
    ns: values(D),
    nsTargets: [{ name: D, lookup: at(values(IP)) }],
    probedFrom: "ns",
    probes: [{ address: IP, udp: burrow, tcp: burrow }],
    txt: { kind: "answer", rcode: "NOERROR", authoritative: false, answers: 0, soa: [] },
    ...change,
  };
}

function lineOf(lines: CheckLine[], check: string): CheckLine {
  return lines.find((l) => l.check === check)!;
}

describe("checkDns", () => {
  test("everything right: five ok lines, exit code 0", () => {
    const lines = checkDns(facts());
    expect(lines.map((l) => `${l.status} ${l.check}`)).toEqual(["ok domain", "ok wildcard", "ok delegation", "ok responder", "ok resolution"]);
    expect(renderCheckLine(lines[0]!)).toBe(`ok    domain      ${D} -> ${IP} (this server)`);
    expect(exitCodeOf(lines)).toBe(0);
  });

  test("the domain has no record: FAIL with the records to create, for every address of the server", () => {
    const lines = checkDns(facts({ apex: at(error("ENOTFOUND"), error("ENOTFOUND")), server: { v4: [IP], v6: [IP6] } }));
    expect(lineOf(lines, "domain")).toEqual({
      status: "FAIL",
      check: "domain",
      text: `${D}: no A/AAAA record (no such record); create \`${D} A ${IP}\` and \`${D} AAAA ${IP6}\``,
    });
    expect(exitCodeOf(lines)).toBe(1);
  });

  test("the domain points elsewhere: FAIL naming both, and --public-ip when the server's address was guessed", () => {
    const line = lineOf(checkDns(facts({ apex: at(values("203.0.113.9")), serverSource: "guessed" })), "domain");
    expect(line.status).toBe("FAIL");
    expect(line.text).toContain(`${D} -> 203.0.113.9, not this server (${IP} (guessed from its interfaces; if the internet reaches it at another address, give that with --public-ip)`);
    expect(line.text).toContain(`point ${D} at it: \`${D} A ${IP}\``);
  });

  test("the domain has this server's address and another, or lacks its IPv6: warn, and the exit code stays 0", () => {
    const extra = lineOf(checkDns(facts({ apex: at(values(IP, "203.0.113.9")) })), "domain");
    expect(extra.status).toBe("warn");
    expect(extra.text).toContain("203.0.113.9 is not this server: visitors sent there miss burrow; remove it");
    const lines = checkDns(facts({ server: { v4: [IP], v6: [IP6] }, wildcard: { name: `x.${D}`, lookup: at(values(IP), values("2001:DB8:0::7")) } }));
    expect(lineOf(lines, "domain").text).toContain(`no record for ${IP6} of this server: add \`${D} AAAA ${IP6}\``);
    expect(lineOf(lines, "wildcard").status).toBe("ok"); // IPv6 compared in its canonical form
    expect(exitCodeOf(lines)).toBe(0);
  });

  test("this server's address unknown (behind NAT): the records are shown, not compared, with a warning", () => {
    const lines = checkDns(facts({ server: { v4: [], v6: [] }, serverSource: "guessed" }));
    expect(lineOf(lines, "domain").status).toBe("warn");
    expect(lineOf(lines, "domain").text).toContain("name it with --public-ip");
    expect(lineOf(lines, "delegation").status).toBe("warn");
  });

  test("no wildcard record: FAIL with the wildcard records to create", () => {
    const line = lineOf(checkDns(facts({ wildcard: { name: `burrow-check-1.${D}`, lookup: at(error("ENOTFOUND"), error("ENOTFOUND")) } })), "wildcard");
    expect(line).toEqual({ status: "FAIL", check: "wildcard", text: `burrow-check-1.${D}: no A/AAAA record (no such record); create \`*.${D} A ${IP}\`` });
  });

  test("the resolver times out: said so, not 'no such record'", () => {
    const line = lineOf(checkDns(facts({ wildcard: { name: `x.${D}`, lookup: at(error("ETIMEOUT"), error("ETIMEOUT")) } })), "wildcard");
    expect(line.text).toContain("(no answer from the resolver in time)");
  });

  test("no NS record: FAIL with the record to create and where", () => {
    for (const ns of [error("ENOTFOUND"), error("ENODATA"), values()]) {
      const line = lineOf(checkDns(facts({ ns, nsTargets: [], probedFrom: "server" })), "delegation");
      expect(line).toEqual({
        status: "FAIL",
        check: "delegation",
        text: `NS ${ZONE}: no such record; create \`${ZONE}. NS ${D}.\` in the zone that holds ${D}, at its DNS provider (burrow server init --acme-email prints it)`,
      });
    }
  });

  test("NS lookup SERVFAIL: FAIL pointing at the responder, as a delegation to a silent server looks like that", () => {
    const line = lineOf(checkDns(facts({ ns: error("ESERVFAIL"), nsTargets: [], probedFrom: "server" })), "delegation");
    expect(line.status).toBe("FAIL");
    expect(line.text).toContain("a delegation whose server does not answer looks like this (see responder)");
  });

  test("an NS target that does not resolve, or resolves elsewhere: FAIL, advising to name the domain", () => {
    const nowhere = lineOf(checkDns(facts({ ns: values("ns.elsewhere.net"), nsTargets: [{ name: "ns.elsewhere.net", lookup: at(error("ENOTFOUND")) }] })), "delegation");
    expect(nowhere.status).toBe("FAIL");
    expect(nowhere.text).toBe(`${ZONE} NS ns.elsewhere.net; ns.elsewhere.net has no A/AAAA record (no such record): the delegation leads nowhere; name ${D} instead`);
    const other = lineOf(
      checkDns(
        facts({
          ns: values(D, "ns1.provider.net"),
          nsTargets: [
            { name: D, lookup: at(values(IP)) },
            { name: "ns1.provider.net", lookup: at(values("203.0.113.53")) },
          ],
        }),
      ),
      "delegation",
    );
    expect(other.status).toBe("FAIL");
    expect(other.text).toContain(`ns1.provider.net -> 203.0.113.53, not this server (${IP}): the CA would ask another machine; name ${D} instead`);
  });

  test("nothing answers on the DNS port: FAIL asking whether burrow runs with --dns-port and the port is open", () => {
    const line = lineOf(checkDns(facts({ probes: [{ address: IP, udp: silent("no answer within 5 s"), tcp: silent("connection refused") }] })), "responder");
    expect(line).toEqual({
      status: "FAIL",
      check: "responder",
      text: `nothing answers DNS on ${IP}:53 (UDP/TCP: no answer within 5 s; connection refused): is \`burrow server --acme-email ...\` running with --dns-port 53, and is port 53 open in the firewall (UDP and TCP)?`,
    });
  });

  test("burrow answers over UDP only, or TCP only: FAIL naming the transport to open", () => {
    const udpOnly = lineOf(checkDns(facts({ probes: [{ address: IP6, udp: burrow, tcp: silent("no answer within 5 s") }] })), "responder");
    expect(udpOnly.status).toBe("FAIL");
    expect(udpOnly.text).toBe(`burrow answers on [${IP6}]:53 over UDP but not over TCP (no answer within 5 s): open port 53 for TCP too (the CA's resolvers use both)`);
    const tcpOnly = lineOf(checkDns(facts({ probes: [{ address: IP, udp: silent("no answer within 5 s"), tcp: burrow }] })), "responder");
    expect(tcpOnly.text).toContain("over TCP but not over UDP");
  });

  test("another DNS server on the port: FAIL saying it is something else, with what it answered", () => {
    const other: ProbeAnswer = { kind: "answer", rcode: "REFUSED", authoritative: false, answers: 0, soa: [] };
    const line = lineOf(checkDns(facts({ probes: [{ address: IP, udp: other, tcp: other }] })), "responder");
    expect(line.status).toBe("FAIL");
    expect(line.text).toStartWith(`something else answers DNS on ${IP}:53: REFUSED, not authoritative, no SOA, not burrow's SOA (${D} hostmaster.${D} 1)`);
    expect(line.text).toContain("another DNS server holds the port");
    // an authoritative server with its own SOA is not burrow either
    const bind: ProbeAnswer = { ...burrow, soa: [{ ...BURROW_SOA, mname: "ns1.provider.net", rname: "dns.provider.net", serial: 2026112301 }] };
    expect(lineOf(checkDns(facts({ probes: [{ address: IP, udp: bind, tcp: bind }] })), "responder").text).toContain("SOA ns1.provider.net dns.provider.net 2026112301");
  });

  test("no NS target and no known address: FAIL, nothing to ask", () => {
    const line = lineOf(checkDns(facts({ server: { v4: [], v6: [] }, ns: error("ENOTFOUND"), nsTargets: [], probedFrom: "server", probes: [] })), "responder");
    expect(line.status).toBe("FAIL");
    expect(line.text).toContain("no address to ask");
  });

  test("probed at the server's own address when no NS target resolved: said so", () => {
    const line = lineOf(checkDns(facts({ ns: error("ENOTFOUND"), nsTargets: [], probedFrom: "server" })), "responder");
    expect(line.status).toBe("ok");
    expect(line.text).toEndWith("(no NS target to follow: asked this server's own address)");
  });

  test("the resolver's NXDOMAIN, SERVFAIL, REFUSED or silence for the TXT: a warning with the likely cause; exit code unchanged", () => {
    const cases: [ProbeAnswer, string][] = [
      [{ kind: "answer", rcode: "NXDOMAIN", authoritative: false, answers: 0, soa: [] }, "the NS record is missing, or not yet seen"],
      [{ kind: "answer", rcode: "SERVFAIL", authoritative: false, answers: 0, soa: [] }, "burrow's DNS is not reached from outside"],
      [{ kind: "answer", rcode: "REFUSED", authoritative: false, answers: 0, soa: [] }, "pass another with --resolver"],
      [silent("no answer within 5 s"), "no answer (no answer within 5 s); the CA resolves the same way"],
    ];
    for (const [txt, advice] of cases) {
      const lines = checkDns(facts({ txt }));
      expect(lineOf(lines, "resolution").status).toBe("warn");
      expect(lineOf(lines, "resolution").text).toContain(advice);
      expect(exitCodeOf(lines)).toBe(0);
    }
    const pending = lineOf(checkDns(facts({ txt: { kind: "answer", rcode: "NOERROR", authoritative: false, answers: 2, soa: [] } })), "resolution");
    expect(pending).toEqual({ status: "ok", check: "resolution", text: `TXT ${ZONE} through the resolver: NOERROR, 2 record(s) (a challenge in progress)` });
  });

  test("burrow's SOA is told apart by its names and fixed timers, in any letter case, with or without the final dot", () => {
    expect(isBurrowSoa(BURROW_SOA, D)).toBe(true);
    expect(isBurrowSoa({ ...BURROW_SOA, mname: `TUNNELS.example.com.`, rname: `hostmaster.${D}.` }, D)).toBe(true);
    expect(isBurrowSoa({ ...BURROW_SOA, mname: "other.example.com" }, D)).toBe(false);
    expect(isBurrowSoa({ ...BURROW_SOA, serial: 2 }, D)).toBe(false);
  });
});

describe("parseDnsCheck", () => {
  test("defaults, and every flag", () => {
    expect(parseDnsCheck(["--domain", "Tunnels.Example.com"])).toEqual({
      help: false,
      options: { domain: D, publicIps: undefined, resolver: undefined, dnsPort: 53, timeoutMs: 5000, hostnames: [] },
    });
    const given = parseDnsCheck(["--domain", D, "--public-ip", `${IP},${IP6}`, "--resolver", "[::1]:5353", "--dns-port", "5300", "--timeout", "0.5", "--hostname", "Demo.Acme.com", "--hostname", "*.dev.acme.com"]);
    expect(given).toEqual({
      help: false,
      options: { domain: D, publicIps: { v4: [IP], v6: [IP6] }, resolver: { host: "::1", port: 5353 }, dnsPort: 5300, timeoutMs: 500, hostnames: ["demo.acme.com", "*.dev.acme.com"] },
    });
    expect(() => parseDnsCheck(["--domain", D, "--hostname", "not a name"])).toThrow("--hostname must be a DNS name");
  });

  test("resolver addresses, with and without a port", () => {
    expect(parseHostPort("127.0.0.1", "--resolver")).toEqual({ host: "127.0.0.1", port: 53 });
    expect(parseHostPort("127.0.0.1:5353", "--resolver")).toEqual({ host: "127.0.0.1", port: 5353 });
    expect(parseHostPort("::1", "--resolver")).toEqual({ host: "::1", port: 53 });
    for (const bad of ["dns.example.com", "127.0.0.1:99999", "[::1", "127.0.0.1:", ""]) expect(() => parseHostPort(bad, "--resolver")).toThrow(UsageError);
  });

  test("mistakes are UsageErrors", () => {
    for (const argv of [[], ["--domain", D, "extra"], ["--domain", D, "--dns-port", "x"], ["--domain", D, "--timeout", "61"], ["--domain", "a..b"]]) {
      expect(() => parseDnsCheck(argv)).toThrow(UsageError);
    }
  });
});
