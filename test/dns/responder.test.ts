/**
 * The challenge responder on real sockets (127.0.0.1, ephemeral ports),
 * asked by real DNS clients: Node's resolver (c-ares, as `dns.promises`)
 * for the path an ACME validation takes, and BIND's dig for the flags, the
 * codes and TCP. dig comes from Debian's dnsutils, installed with apt-get
 * where it is missing and that can be done (root or sudo on Debian); where
 * it cannot, the dig tests are skipped and say why.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { promises as dns } from "node:dns";
import { ChallengeRecords } from "../../src/dns/challenge-records.ts";
import { startDnsResponder, type DnsResponder } from "../../src/dns/responder.ts";
import { AppError } from "../../src/core/errors.ts";
import { aptInstall } from "../harness/debian-packages.ts";

const ZONE = "_acme-challenge.tunnels.example.com";
const VALUES = ["LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0", "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA"];
const TTL_MS = 60_000;
const UNLIMITED = { perClientBurst: 10_000, perClientPerSecond: 10_000 };

const DIG = Bun.which("dig") ?? (aptInstall(["dnsutils"], "DNS responder tests: no dig") ? Bun.which("dig") : null);
if (!DIG) console.error("DNS responder tests: dig not found, and Debian's dnsutils cannot be installed here (needs apt-get as root or with sudo): the dig tests are skipped");

/** Faults the responder logged: none is expected from these well-behaved clients. */
const faults: string[] = [];
let clock = Date.now();
const records = new ChallengeRecords(TTL_MS, () => clock);
let responder: DnsResponder;

beforeAll(async () => {
  // every client here is 127.0.0.1, asking more than one resolver would: the answer rate is tested on its own
  responder = await startDnsResponder({ host: "127.0.0.1", port: 0, zone: ZONE, records, log: (msg) => faults.push(msg), limits: UNLIMITED });
  for (const v of VALUES) expect(records.add(ZONE, v)).toBeUndefined();
});
afterAll(() => responder?.stop());

function resolver(port: number): dns.Resolver {
  const r = new dns.Resolver({ timeout: 2_000, tries: 1 });
  r.setServers([`127.0.0.1:${port}`]);
  return r;
}

/** The error code a resolver's lookup fails with. */
async function failure(lookup: Promise<unknown>): Promise<string> {
  try {
    await lookup;
  } catch (err) {
    return String((err as { code?: string }).code);
  }
  throw new Error("the lookup succeeded");
}

describe("Node's resolver", () => {
  test("resolves the pending values as TXT records, whatever the letter case asked", async () => {
    const r = resolver(responder.udpPort);
    expect((await r.resolveTxt(ZONE)).map((chunks) => chunks.join("")).sort()).toEqual([...VALUES].sort());
    expect((await r.resolveTxt(ZONE.toUpperCase())).length).toBe(2);
  });

  test("a value added, then removed, then another expired: each seen at once", async () => {
    const name = `_acme-challenge.other.${ZONE}`;
    // a fresh resolver for each lookup, as each of a CA's checks is: Bun's keeps a "no data"
    // answer for a while whatever its TTL (Node's asks again each time)
    const txt = () => resolver(responder.udpPort).resolveTxt(name);
    const nodata = /ENODATA|ENOTFOUND/; // Node says ENODATA, Bun ENOTFOUND
    expect(await failure(txt())).toMatch(nodata);
    records.add(name, "added");
    expect(await txt()).toEqual([["added"]]);
    records.remove(name, "added");
    expect(await failure(txt())).toMatch(nodata);
    records.add(name, "expires");
    expect(await txt()).toEqual([["expires"]]);
    clock += TTL_MS;
    expect(await failure(txt())).toMatch(nodata);
    clock -= TTL_MS; // the zone's own values were added at the old time: keep them
    expect((await resolver(responder.udpPort).resolveTxt(ZONE)).length).toBe(2);
  });

  test("the zone's SOA and NS; a name outside the zone is refused", async () => {
    const r = resolver(responder.udpPort);
    expect(await r.resolveSoa(ZONE)).toMatchObject({ nsname: "tunnels.example.com", minttl: 0 });
    expect(await r.resolveNs(ZONE)).toEqual(["tunnels.example.com"]);
    expect(await failure(r.resolveTxt("example.com"))).toBe("EREFUSED");
    expect(await failure(r.resolve4("tunnels.example.com"))).toBe("EREFUSED");
  });
});

interface Dig {
  status: string;
  flags: string[];
  question: string[];
  answer: string[];
  authority: string[];
  output: string;
}

/** Runs dig against the responder (never spawnSync: the responder answers on this process's event loop). */
async function dig(port: number, ...args: string[]): Promise<Dig> {
  const proc = Bun.spawn([DIG!, "@127.0.0.1", "-p", String(port), "+time=2", "+tries=1", ...args], { stdout: "pipe", stderr: "pipe" });
  const killer = setTimeout(() => proc.kill(), 15_000);
  const [output, errors] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  clearTimeout(killer);
  const sections: Record<string, string[]> = { QUESTION: [], ANSWER: [], AUTHORITY: [] };
  let current: string[] | undefined;
  for (const line of output.split("\n")) {
    const heading = /^;; (\w+) SECTION:/.exec(line);
    if (heading) current = sections[heading[1]!];
    else if (line.trim() === "") current = undefined;
    else current?.push(line.replace(/^;/, "").trim().split(/\s+/).join(" "));
  }
  const header = /status: (\w+)/.exec(output);
  const flags = /;; flags:([^;]*);/.exec(output);
  return {
    status: header?.[1] ?? `none (${(output + errors).trim()})`,
    flags: flags?.[1]!.trim().split(/\s+/) ?? [],
    question: sections.QUESTION!,
    answer: sections.ANSWER!,
    authority: sections.AUTHORITY!,
    output,
  };
}

describe.skipIf(!DIG)("dig", () => {
  test("TXT over UDP and over TCP: NOERROR, authoritative, no recursion available, the values", async () => {
    for (const transport of ["+notcp", "+tcp"]) {
      const d = await dig(responder.udpPort, transport, "+norecurse", ZONE, "TXT");
      expect(d.status).toBe("NOERROR");
      expect(d.flags).toContain("aa");
      expect(d.flags).not.toContain("ra");
      expect(d.flags).not.toContain("rd");
      expect(d.answer.sort()).toEqual(VALUES.map((v) => `${ZONE}. 0 IN TXT "${v}"`).sort());
    }
  });

  test("recursion asked for a name outside the zone: REFUSED, not authoritative, RA never set (no open resolver)", async () => {
    for (const args of [["example.com", "A"], ["+tcp", "example.com", "A"], ["tunnels.example.com", "TXT"], [".", "NS"]]) {
      const d = await dig(responder.udpPort, "+recurse", ...args);
      expect(d.status).toBe("REFUSED");
      expect(d.flags).toContain("rd");
      expect(d.flags).not.toContain("ra");
      expect(d.flags).not.toContain("aa");
      expect(d.answer).toEqual([]);
    }
  });

  test("a type without data, and a name below the zone: NOERROR with the SOA in authority, not NXDOMAIN", async () => {
    for (const [name, type] of [[ZONE, "A"], [`nothing.${ZONE}`, "TXT"], [`a.b.${ZONE}`, "AAAA"]]) {
      const d = await dig(responder.udpPort, name!, type!);
      expect(d.status).toBe("NOERROR");
      expect(d.flags).toContain("aa");
      expect(d.answer).toEqual([]);
      expect(d.authority).toEqual([`${ZONE}. 0 IN SOA tunnels.example.com. hostmaster.tunnels.example.com. 1 3600 600 86400 0`]);
    }
  });

  test("SOA, NS and ANY of the zone's name", async () => {
    expect((await dig(responder.udpPort, ZONE, "NS")).answer).toEqual([`${ZONE}. 60 IN NS tunnels.example.com.`]);
    expect((await dig(responder.udpPort, ZONE, "SOA")).answer).toHaveLength(1);
    expect((await dig(responder.udpPort, "+tcp", ZONE, "ANY")).answer).toHaveLength(2);
  });

  test("the letter case of the question comes back as asked (0x20)", async () => {
    const asked = "_aCmE-cHaLlEnGe.TUNNELS.example.CoM";
    const d = await dig(responder.udpPort, asked, "TXT");
    expect(d.question).toEqual([`${asked}. IN TXT`]);
    expect(d.answer.map((l) => l.split(" ")[0])).toEqual([`${asked}.`, `${asked}.`]);
  });

  test("another opcode: NOTIMP; EDNS version 1: BADVERS; class CHAOS and zone transfers: REFUSED", async () => {
    expect((await dig(responder.udpPort, "+opcode=status", ZONE, "TXT")).status).toBe("NOTIMP");
    expect((await dig(responder.udpPort, "+edns=1", "+noednsnegotiation", ZONE, "TXT")).status).toBe("BADVERS");
    expect((await dig(responder.udpPort, "version.bind", "CH", "TXT")).status).toBe("REFUSED");
    const axfr = await dig(responder.udpPort, ZONE, "AXFR");
    expect(axfr.output).toMatch(/Transfer failed/);
    expect(axfr.answer).toEqual([]);
  });

  test("an answer over 512 bytes without EDNS is truncated over UDP, and dig gets it whole over TCP", async () => {
    const long = `_acme-challenge.${"a".repeat(60)}.${"b".repeat(60)}.example.com`;
    const many = new ChallengeRecords();
    for (const d of "1234") many.add(long, d.repeat(64));
    using big = await startDnsResponder({ host: "127.0.0.1", port: 0, zone: long, records: many, log: (msg) => faults.push(msg), limits: UNLIMITED });
    const cut = await dig(big.udpPort, "+noedns", "+ignore", long, "TXT");
    expect(cut.status).toBe("NOERROR");
    expect(cut.flags).toContain("tc");
    expect(cut.answer).toEqual([]);
    const retried = await dig(big.udpPort, "+noedns", long, "TXT");
    expect(retried.output).toMatch(/Truncated, retrying in TCP mode/);
    expect(retried.answer).toHaveLength(4);
    // with EDNS (dig offers 1232) it fits in one datagram
    const edns = await dig(big.udpPort, long, "TXT");
    expect(edns.flags).not.toContain("tc");
    expect(edns.answer).toHaveLength(4);
  });

  test("well-behaved clients caused no fault", () => {
    expect(faults).toEqual([]);
  });
});

describe("ports", () => {
  test("with port 0, UDP and TCP share one free port number; a second responder on it fails with PORT_UNAVAILABLE", async () => {
    expect(responder.tcpPort).toBe(responder.udpPort);
    let error: unknown;
    try {
      (await startDnsResponder({ host: "127.0.0.1", port: responder.udpPort, zone: ZONE, records })).stop();
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("PORT_UNAVAILABLE");
  });

  test("a fixed port serves UDP and TCP on that port, and stop() frees it", async () => {
    const first = await startDnsResponder({ host: "127.0.0.1", port: 0, zone: ZONE, records });
    const port = first.udpPort;
    first.stop();
    using fixed = await startDnsResponder({ host: "127.0.0.1", port, zone: ZONE, records });
    expect([fixed.udpPort, fixed.tcpPort]).toEqual([port, port]);
    expect((await resolver(port).resolveTxt(ZONE)).length).toBe(2);
  });

  test("a zone that is not a DNS name, or a name server inside the zone, is refused at start", async () => {
    await expect(startDnsResponder({ host: "127.0.0.1", port: 0, zone: "not a name", records })).rejects.toThrow("not a DNS name");
    await expect(startDnsResponder({ host: "127.0.0.1", port: 0, zone: ZONE, nameserver: `ns.${ZONE}`, records })).rejects.toThrow("outside it");
    await expect(startDnsResponder({ host: "127.0.0.1", port: 0, zone: ZONE, records, limits: { tcpTotal: 0 } })).rejects.toThrow("tcpTotal");
  });
});
