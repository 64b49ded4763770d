/**
 * What `burrow server init` tells the operator after the files: the DNS
 * records, the ports to open, the commands to run. Pure text from the
 * settings, so each case is tested without a machine to set up.
 */
import { basename, dirname } from "node:path";
import ipaddr from "ipaddr.js";
import type { ServerConfig } from "../config/server.ts";
import { dnsRecords, type PublicAddresses } from "../dns/public-address.ts";
import { directPortAllowed } from "../edge/direct.ts";

/** Where the addresses in the DNS records came from. */
export type AddressSource = "given" | "guessed";

export function dnsSection(domain: string, addresses: PublicAddresses, source: AddressSource, acme?: ServerConfig["acme"]): string[] {
  const none = addresses.v4.length === 0 && addresses.v6.length === 0;
  const shown = none ? { v4: ["<this server's public IPv4 address>"], v6: [] } : addresses;
  const records = dnsRecords(domain, shown);
  const width = Math.max(...records.map((r) => r.name.length));
  const lines = ["DNS records to create at your DNS provider (the domain and every name below it):"];
  for (const r of records) lines.push(`  ${r.name.padEnd(width)}  ${r.type.padEnd(4)}  ${r.value}`);
  if (acme?.dnsPort !== undefined) {
    const name = `_acme-challenge.${domain}`;
    lines.push(`  ${name.padEnd(width)}  NS    ${domain}`);
    lines.push("  The NS record hands the wildcard certificate's DNS-01 check to burrow (port 53, UDP and TCP).");
  }
  if (none) {
    lines.push("  No interface of this machine has a public address (behind NAT?): your provider shows the server's;", "  --public-ip IP puts it here.");
  } else if (source === "guessed") {
    lines.push("  Guessed from this machine's network interfaces: check them, or name them with --public-ip.");
  }
  return lines;
}

const isLoopback = (host: string) => host === "localhost" || (ipaddr.isValid(host) && ipaddr.parse(host).range() === "loopback");

/** The TCP ports the internet must reach, with what each is for; and what to keep closed. */
export function firewallSection(config: ServerConfig): string[] {
  const lines: string[] = [];
  if (isLoopback(config.host)) {
    lines.push(
      `Firewall: burrow's public listeners are on ${config.host} (--host), behind your proxy:`,
      "  open the proxy's ports (80 and 443), none of burrow's.",
    );
  } else {
    const open: [string, string][] = config.acme
      ? [
          [String(config.acme.httpsPort), "HTTPS: visitors, and agents' WebSocket"],
          [String(config.httpPort), "plain HTTP: the CA's HTTP-01 checks, and redirects to HTTPS"],
        ]
      : [[String(config.httpPort), "the public port: visitors, and agents' WebSocket"]];
    if (directPortAllowed(config) && config.agentPort !== 0) {
      open.push([String(config.agentPort), "agents' direct port (optional: where it is closed, agents stay on their WebSocket)"]);
    }
    if (config.ssh && config.ssh.port !== 0) open.push([String(config.ssh.port), "the SSH gateway: tunnels with plain ssh -R and -L"]);
    const { first, last } = config.tcpPorts;
    open.push([first === last ? String(first) : `${first}-${last}`, "TCP tunnels"]);
    const width = Math.max(...open.map(([p]) => p.length));
    lines.push("Firewall: open these TCP ports to the internet:");
    for (const [port, what] of open) lines.push(`  ${port.padEnd(width)}  ${what}`);
    lines.push(`  e.g. ${open.map(([p]) => `ufw allow ${p.replace("-", ":")}/tcp`).join(" && ")}`);
    if (config.acme?.dnsPort !== undefined) {
      lines.push(`  and ${config.acme.dnsPort} over UDP and TCP: burrow's answers to the CA's DNS-01 checks (e.g. ufw allow ${config.acme.dnsPort})`);
    }
    if (config.udpPorts) {
      const { first: u1, last: u2 } = config.udpPorts;
      const range = u1 === u2 ? String(u1) : `${u1}-${u2}`;
      lines.push(`  and ${range} over UDP: udp tunnels (e.g. ufw allow ${range.replace("-", ":")}/udp)`);
    }
    if (directPortAllowed(config) && config.agentPort === 0) {
      lines.push("  The agents' direct port changes at every start (--agent-port 0): give it a number to open it.");
    }
  }
  if (config.ssh) {
    // the host keys are made at the first start, in the data dir, owned by the service's user
    lines.push(
      "SSH gateway: its host keys are made at its first start; their fingerprints are in the log",
      "  ('ssh gateway listening ... fingerprint_ed25519=SHA256:...') and on the portal (GET /_burrow/api/ssh):",
      "  give them to your users to check at their first ssh.",
    );
  }
  if (isLoopback(config.adminHost)) {
    lines.push(
      `Keep ${config.adminPort} closed: the admin API listens on ${config.adminHost} only. From your machine:`,
      `  ssh -N -L ${config.adminPort}:127.0.0.1:${config.adminPort} you@server, then http://localhost:${config.adminPort}`,
    );
  } else {
    lines.push(`The admin API (${config.adminPort}) listens on ${config.adminHost} in plain HTTP: open it only to addresses you trust.`);
  }
  return lines;
}

/** A word to paste into a POSIX shell: bare when that is safe, else in single quotes. */
export const shellWord = (word: string) => (/^[A-Za-z0-9_@%+=:,./-]+$/.test(word) ? word : `'${word.replaceAll("'", "'\\''")}'`);

/** Directories systemd loads units from by name; a unit elsewhere is enabled by its path. */
const UNIT_DIRS = ["/etc/systemd/system", "/run/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"];

export function nextSteps(unitFile: string): string[] {
  const name = basename(unitFile, ".service");
  const target = UNIT_DIRS.includes(dirname(unitFile)) ? name : shellWord(unitFile);
  return [
    "Next:",
    `  systemctl daemon-reload && systemctl enable --now ${target}`,
    `  journalctl -u ${shellWord(name)} -f      its log; 'admin api listening' when it is up`,
    `  systemctl status ${shellWord(name)}`,
  ];
}

/** The generated password, shown this once. */
export function passwordSection(username: string, password: string, envFile: string): string[] {
  return [
    `First admin: '${username}', password: ${password}`,
    `  Shown only this once (it is in ${envFile}, mode 0600). The server sets it when it first starts`,
    "  with an empty database: sign in to the admin panel, change it, then delete its line from that file.",
  ];
}
