/**
 * `burrow server dns-check` flags. --domain goes through the server's own
 * check, so that a domain this passes is one the server takes.
 */
import { parseHostPort } from "../dns/resolver-address.ts";
import { parseFlags, type FlagTable } from "../config/flags.ts";
import { parsePublicIps, type PublicAddresses } from "../dns/public-address.ts";
import { parseServerConfig } from "../config/server.ts";
import { UsageError } from "../usage-error.ts";
import { normalizeHostname } from "../validate/hostname.ts";
import type { CommandDoc } from "./usage.ts";

/** The longest wait per query that --timeout takes, in seconds. */
const MAX_TIMEOUT_S = 60;

const DNS_CHECK_FLAGS = {
  domain: { type: "string", arg: "D", required: true, help: "the server's domain", details: "Checked as the server checks it." },
  "public-ip": {
    type: "string",
    arg: "IP",
    multiple: true,
    defaultText: "guessed from this machine's interfaces",
    help: "this server's public address, IPv4 or IPv6, or a comma list",
    details: "Without it, guessed from the interfaces as `server init` does, and it says so.",
  },
  resolver: {
    type: "string",
    arg: "HOST:PORT",
    defaultText: "the system's, e.g. from /etc/resolv.conf",
    help: "the resolver to look names up with",
    details: "`127.0.0.1:5353`, `[::1]:5353`; port 53 when left out.",
  },
  hostname: {
    type: "string",
    arg: "H",
    multiple: true,
    help: "also check that a custom hostname points here (repeat for more)",
    details: "A user's own name, such as demo.acme.com; for a wildcard, *.dev.acme.com, a random name under it is looked up.",
  },
  "dns-port": { type: "string", arg: "N", default: "53", help: "where burrow's DNS listens (--dns-port of the server)" },
  timeout: { type: "string", arg: "S", default: "5", help: "seconds to wait for each answer", details: `Above 0, at most ${MAX_TIMEOUT_S}.` },
} as const satisfies FlagTable;

export const DNS_CHECK_DOC: CommandDoc = {
  name: "server dns-check",
  usage: ["burrow server dns-check --domain D [flags]"],
  about: `Run on the server, checks the DNS records burrow server init asks for, and
says what is wrong: D and a random name under *.D resolve to this server;
_acme-challenge.D is delegated (NS) to a name that resolves to this server;
burrow's DNS answers there for that zone, over UDP and TCP; and a TXT lookup
of _acme-challenge.D through the resolver gets NOERROR, as the CA's will.
With --hostname H, H resolves to this server too. Each check prints one
line: ok, FAIL (with what to do) or warn.
Exit code 0 when nothing failed (warnings included), 1 otherwise.`,
  flags: DNS_CHECK_FLAGS,
};

export interface DnsCheckOptions {
  domain: string;
  /** --public-ip; undefined: guessed from the interfaces. */
  publicIps?: PublicAddresses;
  /** --resolver as [host, port]; undefined: the system's resolvers. */
  resolver?: { host: string; port: number };
  dnsPort: number;
  timeoutMs: number;
  /** --hostname: custom hostnames to check too, in their kept form. */
  hostnames: string[];
}

export type ParsedDnsCheck = { help: true } | { help: false; options: DnsCheckOptions };

/** Reads `burrow server dns-check` flags (argv after "dns-check"); throws UsageError with a one-line message. */
export function parseDnsCheck(argv: string[]): ParsedDnsCheck {
  const { values, positionals } = parseFlags(argv, DNS_CHECK_FLAGS, {});
  if (values.help) return { help: true };
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  if (typeof values.domain !== "string") throw new UsageError("server dns-check needs --domain, the server's domain, e.g. --domain tunnels.example.com");
  // the server's own check of --domain, so that what passes here is what the server takes
  const server = parseServerConfig(["--domain", values.domain], {});
  if (server.help) return { help: true };
  const ips = (values["public-ip"] as string[] | undefined) ?? [];
  const dnsPortText = typeof values["dns-port"] === "string" ? values["dns-port"] : DNS_CHECK_FLAGS["dns-port"].default;
  const dnsPort = Number(dnsPortText);
  if (!/^[0-9]{1,5}$/.test(dnsPortText) || dnsPort < 1 || dnsPort > 65535) {
    throw new UsageError(`--dns-port must be a port number from 1 to 65535 (got '${dnsPortText}')`);
  }
  const timeoutText = typeof values.timeout === "string" ? values.timeout : DNS_CHECK_FLAGS.timeout.default;
  const timeout = Number(timeoutText);
  if (!/^[0-9]+(\.[0-9]+)?$/.test(timeoutText) || timeout <= 0 || timeout > MAX_TIMEOUT_S) {
    throw new UsageError(`--timeout must be a number of seconds above 0, at most ${MAX_TIMEOUT_S} (got '${timeoutText}')`);
  }
  return {
    help: false,
    options: {
      domain: server.config.domain,
      publicIps: ips.length > 0 ? parsePublicIps(ips) : undefined,
      resolver: typeof values.resolver === "string" ? parseHostPort(values.resolver, "--resolver") : undefined,
      dnsPort,
      timeoutMs: Math.round(timeout * 1000),
      hostnames: ((values.hostname as string[] | undefined) ?? []).map((raw) => {
        const checked = normalizeHostname(raw);
        if ("problem" in checked) throw new UsageError(`--hostname ${checked.problem} (got '${raw.replace(/[^\x20-\x7e]/g, "?").slice(0, 80)}')`);
        return checked.hostname;
      }),
    },
  };
}
