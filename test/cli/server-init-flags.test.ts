/**
 * `burrow server init` without a machine: its flags through the server's
 * own checks, the public addresses (given or guessed from interfaces), and
 * the DNS, firewall and next-step text.
 */
import { describe, expect, test } from "bun:test";
import type { NetworkInterfaceInfo } from "node:os";
import { dnsSection, firewallSection, nextSteps, shellWord } from "../../src/cli/server-init-report.ts";
import { guessPublicAddresses, parsePublicIps } from "../../src/dns/public-address.ts";
import { parseServerInit, type InitOptions } from "../../src/cli/server-init-flags.ts";
import { UsageError } from "../../src/usage-error.ts";

const options = (argv: string[]): InitOptions => {
  const parsed = parseServerInit(argv, "/home/ann");
  if (parsed.help) throw new Error("help");
  return parsed.options;
};

describe("flags", () => {
  test("defaults: the unit and env file in /etc, data in /var/lib/burrow, server flags kept as given", () => {
    const o = options(["--domain", "T.example.com", "--http-port=443", "--max-conns", "auto"]);
    expect(o.unitFile).toBe("/etc/systemd/system/burrow.service");
    expect(o.envFile).toBe("/etc/burrow/burrow.env");
    expect(o.stateDirectory).toBe("burrow");
    expect(o.config.dataDir).toBe("/var/lib/burrow");
    expect(o.config.domain).toBe("t.example.com");
    expect(o.serverArgs).toEqual(["--domain", "T.example.com", "--http-port", "443", "--max-conns", "auto"]);
    expect(o.binary).toBeUndefined();
    expect(o.publicIps).toBeUndefined();
    expect([o.force, o.print]).toEqual([false, false]);
  });

  test("paths are made absolute; --data-dir below /var/lib names the state directory", () => {
    const o = options(["--domain", "t.example.com", "--unit-file", "u/b.service", "--env-file", "e.env", "--binary", "bin/burrow", "--data-dir", "/var/lib/tunnels/"]);
    expect([o.unitFile, o.envFile, o.binary]).toEqual(["/home/ann/u/b.service", "/home/ann/e.env", "/home/ann/bin/burrow"]);
    expect(o.stateDirectory).toBe("tunnels");
    expect(o.serverArgs).toEqual(["--domain", "t.example.com"]);
  });

  const mistakes: [string, string[], string][] = [
    ["no --domain", [], "needs --domain"],
    ["an unknown flag", ["--domain", "t.example.com", "--colour", "red"], "unknown flag --colour"],
    ["a bad server value, in the server's words", ["--domain", "t.example.com", "--tcp-ports", "9-1"], "--tcp-ports must be a range"],
    ["a bad domain", ["--domain", "not a domain"], "--domain must be a DNS name"],
    ["a data dir the sandbox would not let it write", ["--domain", "t.example.com", "--data-dir", "/srv/burrow"], "below /var/lib"],
    ["a data dir that climbs out", ["--domain", "t.example.com", "--data-dir", "/var/lib/../etc"], "below /var/lib"],
    ["a unit file systemd would not load", ["--domain", "t.example.com", "--unit-file", "/tmp/burrow.unit"], ".service"],
    ["a binary systemd would refuse", ["--domain", "t.example.com", "--binary", '/opt/a"b/burrow'], "--binary must not contain quotes"],
    ["a bad --public-ip", ["--domain", "t.example.com", "--public-ip", "203.0.113"], "--public-ip must be an IPv4 or IPv6 address"],
    ["a CIDR as --public-ip", ["--domain", "t.example.com", "--public-ip", "203.0.113.0/24"], "--public-ip"],
    ["a stray argument", ["--domain", "t.example.com", "now"], "unexpected argument 'now'"],
    ["a flag without its value", ["--domain"], "needs a value"],
  ];
  for (const [name, argv, message] of mistakes) {
    test(`${name} is a usage error: ${message}`, () => {
      expect(() => parseServerInit(argv, "/home/ann")).toThrow(UsageError);
      expect(() => parseServerInit(argv, "/home/ann")).toThrow(message);
    });
  }

  test("the environment's BURROW_<FLAG> is not read: the service would not see it", () => {
    const before = process.env.BURROW_HTTP_PORT;
    process.env.BURROW_HTTP_PORT = "nonsense";
    try {
      expect(options(["--domain", "t.example.com"]).config.httpPort).toBe(8080);
    } finally {
      if (before === undefined) delete process.env.BURROW_HTTP_PORT;
      else process.env.BURROW_HTTP_PORT = before;
    }
  });
});

describe("public addresses", () => {
  test("--public-ip: repeated or comma-separated, IPv4 and IPv6, without duplicates", () => {
    expect(parsePublicIps(["203.0.113.7, 2001:DB8:0:0::7", "198.51.100.1", "203.0.113.7"])).toEqual({
      v4: ["203.0.113.7", "198.51.100.1"],
      v6: ["2001:db8::7"],
    });
    expect(() => parsePublicIps(["2130706433"])).toThrow("--public-ip");
  });

  const nic = (address: string, internal = false): NetworkInterfaceInfo =>
    ({ address, internal, family: address.includes(":") ? "IPv6" : "IPv4", netmask: "", mac: "", cidr: null }) as NetworkInterfaceInfo;

  test("a guess keeps global addresses only: no loopback, private, link-local, unique-local, CGNAT or documentation", () => {
    const guessed = guessPublicAddresses({
      lo: [nic("127.0.0.1", true), nic("::1", true)],
      eth0: [nic("95.216.10.20"), nic("10.0.0.5"), nic("2a01:4f8:c0c:1234::1"), nic("fe80::1"), nic("fd00::5")],
      wg0: [nic("192.168.1.2"), nic("100.64.0.9"), nic("172.16.3.4"), nic("203.0.113.7"), nic("2001:db8::1")],
    });
    expect(guessed).toEqual({ v4: ["95.216.10.20"], v6: ["2a01:4f8:c0c:1234::1"] });
  });

  test("the records: A (and AAAA) for the domain and its wildcard; guessed ones say so", () => {
    const lines = dnsSection("t.example.com", { v4: ["203.0.113.7"], v6: ["2a01:4f8::1"] }, "guessed");
    const records = lines.filter((l) => /\s(A|AAAA)\s/.test(l)).map((l) => l.trim().split(/\s+/));
    expect(records).toEqual([
      ["t.example.com", "A", "203.0.113.7"],
      ["t.example.com", "AAAA", "2a01:4f8::1"],
      ["*.t.example.com", "A", "203.0.113.7"],
      ["*.t.example.com", "AAAA", "2a01:4f8::1"],
    ]);
    expect(lines.join("\n")).toContain("Guessed");
    expect(dnsSection("t.example.com", { v4: ["203.0.113.7"], v6: [] }, "given").join("\n")).not.toContain("Guessed");
  });

  test("with no public address found, the records say what to put there and how to give it", () => {
    const text = dnsSection("t.example.com", { v4: [], v6: [] }, "guessed").join("\n");
    expect(text).toContain("*.t.example.com  A     <this server's public IPv4 address>");
    expect(text).toContain("--public-ip");
  });
});

describe("ports to open", () => {
  const firewall = (argv: string[]) => firewallSection(options(["--domain", "t.example.com", ...argv]).config).join("\n");

  test("the public port, the direct agent port and the TCP range; the admin port stays closed", () => {
    const text = firewall([]);
    expect(text).toContain("ufw allow 8080/tcp && ufw allow 4042/tcp && ufw allow 20000:29999/tcp");
    expect(text).toContain("Keep 4041 closed");
  });

  test("the UDP range over UDP, as its own line; none with --udp-ports off", () => {
    expect(firewall([])).toContain("and 20000-29999 over UDP: udp tunnels (e.g. ufw allow 20000:29999/udp)");
    expect(firewall(["--udp-ports", "30000-30099"])).toContain("ufw allow 30000:30099/udp");
    expect(firewall(["--udp-ports", "off"])).not.toContain("/udp");
  });

  test("no direct port when it is off, or behind an https proxy without a certificate of its own", () => {
    expect(firewall(["--agent-port", "off"])).not.toContain("4042");
    expect(firewall(["--public-url", "https://t.example.com"])).not.toContain("4042");
  });

  test("public listeners on loopback: the proxy's ports, none of burrow's", () => {
    const text = firewall(["--host", "127.0.0.1", "--public-url", "https://t.example.com"]);
    expect(text).toContain("80 and 443");
    expect(text).not.toContain("ufw");
  });

  test("an admin API open to the network is named, with a warning", () => {
    expect(firewall(["--admin-host", "0.0.0.0"])).toContain("plain HTTP");
  });
});

test("next steps: enable by name in /etc/systemd/system, by quoted path elsewhere", () => {
  expect(nextSteps("/etc/systemd/system/burrow.service")).toContain("  systemctl daemon-reload && systemctl enable --now burrow");
  expect(nextSteps("/tmp/my units/b.service")).toContain("  systemctl daemon-reload && systemctl enable --now '/tmp/my units/b.service'");
  expect(shellWord("it's")).toBe("'it'\\''s'");
});
