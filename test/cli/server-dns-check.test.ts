/**
 * `burrow server dns-check` as a program, against real DNS servers on
 * 127.0.0.1 (ephemeral ports): Debian's dnsmasq as the resolver
 * (--resolver), holding the records of each case, and burrow's own DNS-01
 * responder (--dns-port). dnsmasq forwards the zone `_acme-challenge.D` to
 * the responder (`--server=/zone/127.0.0.1#port`), as a recursive resolver
 * following the NS record would, and serves that NS record itself
 * (`--dns-rr`, type 2). dnsmasq comes from Debian's dnsmasq-base, installed
 * with apt-get where it is missing and that can be done; where it cannot,
 * these tests are skipped and say why.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { encode } from "dns-packet";
import type { Subprocess } from "bun";
import { ChallengeRecords } from "../../src/dns/challenge-records.ts";
import { probeDns } from "../../src/dns/probe.ts";
import { startDnsResponder, type DnsResponder } from "../../src/dns/responder.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { runBurrow, type Exited } from "../harness/run.ts";
import { waitUntil } from "../harness/wait.ts";

const D = "tunnels.example.test";
const ZONE = `_acme-challenge.${D}`;
const UNLIMITED = { perClientBurst: 10_000, perClientPerSecond: 10_000 };
const SLOW = 30_000;

function findDnsmasq(): string | undefined {
  const where = () => Bun.which("dnsmasq") ?? ["/usr/sbin/dnsmasq", "/usr/bin/dnsmasq"].find((p) => existsSync(p));
  return where() ?? (aptInstall(["dnsmasq-base"], "dns-check tests: no dnsmasq") ? where() : undefined);
}
const DNSMASQ = findDnsmasq();
if (!DNSMASQ) console.error("dns-check tests: dnsmasq not found, and Debian's dnsmasq-base cannot be installed here (needs apt-get as root or with sudo): skipped");

/** The NS record's data, `D.` in DNS wire format, as --dns-rr takes it: hex. */
const NS_DATA = encode({ questions: [{ name: D, type: "NS", class: "IN" }] }).subarray(12, -4).toString("hex");

let responder: DnsResponder;
/** A port nothing listens on, UDP or TCP: a responder started and stopped. */
let deadPort: number;
const running: Subprocess[] = [];

beforeAll(async () => {
  if (!DNSMASQ) return;
  responder = await startDnsResponder({ host: "127.0.0.1", port: 0, zone: ZONE, records: new ChallengeRecords(), limits: UNLIMITED, log: () => {} });
  const dead = await startDnsResponder({ host: "127.0.0.1", port: 0, zone: ZONE, records: new ChallengeRecords(), log: () => {} });
  deadPort = dead.udpPort;
  dead.stop();
});
afterAll(async () => {
  responder?.stop();
  for (const p of running) p.kill();
  await Promise.all(running.map((p) => p.exited));
});

/** The records of each case, as dnsmasq flags. */
const records = {
  /** D and every name below it -> 127.0.0.1; nothing else exists under D (--local). */
  wildcard: [`--local=/${D}/`, `--address=/${D}/127.0.0.1`],
  /** D alone -> 127.0.0.1. */
  apexOnly: [`--local=/${D}/`, `--host-record=${D},127.0.0.1`],
  /** `_acme-challenge.D NS D`, and the zone's questions forwarded to the server at `port`. */
  delegation: (port: number) => [`--dns-rr=${ZONE},2,${NS_DATA}`, `--server=/${ZONE}/127.0.0.1#${port}`],
};

/** A dnsmasq answering on a free port of 127.0.0.1 with `flags`; returns its port once it answers. */
async function dnsmasq(flags: string[]): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const free = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0 });
    const port = free.port;
    free.close();
    const proc = Bun.spawn(
      [DNSMASQ!, "--no-daemon", "--conf-file=/dev/null", "--pid-file=", "--no-resolv", "--no-hosts", "--bind-interfaces", "--listen-address=127.0.0.1", `--port=${port}`, "--cache-size=0", ...flags],
      { stdin: "ignore", stdout: "ignore", stderr: "pipe" },
    );
    running.push(proc);
    let exited = false;
    proc.exited.then(() => (exited = true));
    const answers = async () => exited || (await probeDns("127.0.0.1", port, { name: D, type: "SOA", recursive: true }, "udp", 200)).kind === "answer";
    await waitUntil(answers, 10_000, `dnsmasq answering on 127.0.0.1:${port}`);
    if (!exited) return port;
    const why = await new Response(proc.stderr).text();
    if (attempt >= 3) throw new Error(`dnsmasq did not start: ${why}`);
  }
}

function dnsCheck(resolverPort: number, dnsPort: number, extra: string[] = []): Promise<Exited> {
  const args = ["server", "dns-check", "--domain", D, "--public-ip", "127.0.0.1", "--resolver", `127.0.0.1:${resolverPort}`, "--dns-port", String(dnsPort), "--timeout", "1"];
  return runBurrow([...args, ...extra]);
}

/** The line of one check: `<status>  <check>  <text>`. */
function line(out: Exited, check: string): string {
  const found = out.stdout.split("\n").find((l) => new RegExp(`^(ok|FAIL|warn) +${check} `).test(l));
  if (!found) throw new Error(`no ${check} line in:\n${out.stdout}\n${out.stderr}`);
  return found;
}

describe.skipIf(!DNSMASQ)("burrow server dns-check against dnsmasq and burrow's responder", () => {
  test(
    "every record right and the responder answering: five ok lines, exit code 0",
    async () => {
      const resolver = await dnsmasq([...records.wildcard, ...records.delegation(responder.udpPort)]);
      const out = await dnsCheck(resolver, responder.udpPort);
      expect(out.stderr).toBe("");
      expect(line(out, "domain")).toStartWith(`ok    domain      ${D} -> 127.0.0.1 (this server)`);
      expect(line(out, "wildcard")).toMatch(new RegExp(`^ok +wildcard +burrow-check-[0-9a-f]{10}\\.${D.replaceAll(".", "\\.")} -> 127\\.0\\.0\\.1 \\(this server\\)$`));
      expect(line(out, "delegation")).toBe(`ok    delegation  ${ZONE} NS ${D}; ${D} -> 127.0.0.1 (this server)`);
      expect(line(out, "responder")).toBe(`ok    responder   127.0.0.1:${responder.udpPort}: burrow's SOA for ${ZONE}, authoritative, over UDP and TCP`);
      expect(line(out, "resolution")).toStartWith("ok    resolution  TXT");
      expect(out.stdout).toContain("this server: 127.0.0.1 (--public-ip)");
      expect(out.code).toBe(0);
    },
    SLOW,
  );

  test(
    "--hostname: a custom hostname pointing here is ok, one pointing elsewhere fails with the record to make, a wildcard is asked at a random name under it",
    async () => {
      const resolver = await dnsmasq([
        ...records.wildcard,
        ...records.delegation(responder.udpPort),
        "--local=/acme.test/",
        "--address=/demo.acme.test/127.0.0.1",
        "--address=/elsewhere.acme.test/192.0.2.9",
        "--address=/dev.acme.test/127.0.0.1",
      ]);
      const out = await dnsCheck(resolver, responder.udpPort, ["--hostname", "Demo.Acme.test", "--hostname", "elsewhere.acme.test", "--hostname", "*.dev.acme.test"]);
      const lines = out.stdout.split("\n").filter((l) => / hostname /.test(l));
      expect(lines[0]).toBe("ok    hostname    demo.acme.test -> 127.0.0.1 (this server)");
      expect(lines[1]).toBe("FAIL  hostname    elsewhere.acme.test -> 192.0.2.9, not this server (127.0.0.1); point elsewhere.acme.test at it: `elsewhere.acme.test A 127.0.0.1`");
      expect(lines[2]).toMatch(/^ok +hostname +burrow-check-[0-9a-f]{10}\.dev\.acme\.test -> 127\.0\.0\.1 \(this server\)$/);
      expect(out.code).toBe(1);
    },
    SLOW,
  );

  test(
    "no wildcard record: the random name fails with the record to create, exit code 1",
    async () => {
      const resolver = await dnsmasq([...records.apexOnly, ...records.delegation(responder.udpPort)]);
      const out = await dnsCheck(resolver, responder.udpPort);
      expect(line(out, "domain")).toStartWith("ok ");
      expect(line(out, "wildcard")).toMatch(/^FAIL +wildcard +burrow-check-[0-9a-f]+\.tunnels\.example\.test: no A\/AAAA record \(no such record\); create `\*\.tunnels\.example\.test A 127\.0\.0\.1`$/);
      expect(line(out, "delegation")).toStartWith("ok ");
      expect(line(out, "responder")).toStartWith("ok ");
      expect(out.code).toBe(1);
    },
    SLOW,
  );

  test(
    "no NS record: the delegation fails with the record to create; the responder is still asked at this server's address",
    async () => {
      const resolver = await dnsmasq(records.wildcard);
      const out = await dnsCheck(resolver, responder.udpPort);
      expect(line(out, "domain")).toStartWith("ok ");
      expect(line(out, "wildcard")).toStartWith("ok ");
      expect(line(out, "delegation")).toBe(
        `FAIL  delegation  NS ${ZONE}: no such record; create \`${ZONE}. NS ${D}.\` in the zone that holds ${D}, at its DNS provider (burrow server init --acme-email prints it)`,
      );
      expect(line(out, "responder")).toEndWith("(no NS target to follow: asked this server's own address)");
      expect(line(out, "responder")).toStartWith("ok ");
      expect(out.code).toBe(1);
    },
    SLOW,
  );

  test(
    "burrow's DNS not running: nothing answers on the DNS port, with what to look at; the resolver's SERVFAIL is a warning",
    async () => {
      const resolver = await dnsmasq([...records.wildcard, ...records.delegation(deadPort)]);
      const out = await dnsCheck(resolver, deadPort);
      expect(line(out, "delegation")).toStartWith("ok ");
      const responderLine = line(out, "responder");
      expect(responderLine).toStartWith(`FAIL  responder   nothing answers DNS on 127.0.0.1:${deadPort} (UDP/TCP:`);
      expect(responderLine).toContain(`is \`burrow server --acme-email ...\` running with --dns-port ${deadPort}, and is port ${deadPort} open in the firewall (UDP and TCP)?`);
      expect(line(out, "resolution")).toMatch(/^warn +resolution +TXT _acme-challenge\.tunnels\.example\.test through the resolver: /);
      expect(out.code).toBe(1);
    },
    SLOW,
  );

  test(
    "another DNS server on the DNS port: said to be something else, with its answer",
    async () => {
      const resolver = await dnsmasq(records.wildcard);
      const out = await dnsCheck(resolver, resolver);
      expect(line(out, "responder")).toStartWith(`FAIL  responder   something else answers DNS on 127.0.0.1:${resolver}:`);
      expect(line(out, "responder")).toContain("another DNS server holds the port");
      expect(out.code).toBe(1);
    },
    SLOW,
  );
});

describe("mistakes on the command line", () => {
  test.each([
    [[], "burrow: server dns-check needs --domain, the server's domain, e.g. --domain tunnels.example.com"],
    [["--domain", "not a domain"], "burrow: --domain must be a DNS name such as tunnels.example.com (got 'not a domain')"],
    [["--domain", D, "--resolver", "localhost:53"], "burrow: --resolver must be an IP address with an optional port, e.g. 127.0.0.1:5353 or [::1]:5353 (got 'localhost:53')"],
    [["--domain", D, "--dns-port", "0"], "burrow: --dns-port must be a port number from 1 to 65535 (got '0')"],
    [["--domain", D, "--timeout", "0"], "burrow: --timeout must be a number of seconds above 0, at most 60 (got '0')"],
    [["--domain", D, "--public-ip", "example.com"], "burrow: --public-ip must be an IPv4 or IPv6 address (got 'example.com')"],
  ])("%p: one burrow: line, exit code 2", async (args, message) => {
    const out = await runBurrow(["server", "dns-check", ...args]);
    expect(out.stderr.trim()).toBe(message);
    expect(out.stdout).toBe("");
    expect(out.code).toBe(2);
  });

  test("--help prints the flags, exit code 0", async () => {
    const out = await runBurrow(["server", "dns-check", "--help"]);
    expect(out.stdout).toContain("Usage: burrow server dns-check --domain D [flags]");
    expect(out.code).toBe(0);
  });
});
