/**
 * `burrow server dns-check` flags. --domain goes through the server's own
 * check, so that a domain this passes is one the server takes.
 */
import { isIP } from "node:net";
import { parseFlags } from "../config/flags.ts";
import { parsePublicIps, type PublicAddresses } from "../dns/public-address.ts";
import { parseServerConfig } from "../config/server.ts";
import { UsageError } from "../usage-error.ts";

export const DNS_CHECK_DEFAULTS = { "dns-port": 53, timeout: 5 } as const;
/** The longest wait per query that --timeout takes, in seconds. */
const MAX_TIMEOUT_S = 60;

export interface DnsCheckOptions {
  domain: string;
  /** --public-ip; undefined: guessed from the interfaces. */
  publicIps?: PublicAddresses;
  /** --resolver as [host, port]; undefined: the system's resolvers. */
  resolver?: { host: string; port: number };
  dnsPort: number;
  timeoutMs: number;
}

export type ParsedDnsCheck = { help: true } | { help: false; options: DnsCheckOptions };

/** Reads `burrow server dns-check` flags (argv after "dns-check"); throws UsageError with a one-line message. */
export function parseDnsCheck(argv: string[]): ParsedDnsCheck {
  const { values, positionals } = parseFlags(
    argv,
    { domain: { type: "string" }, "public-ip": { type: "string", multiple: true }, resolver: { type: "string" }, "dns-port": { type: "string" }, timeout: { type: "string" } },
    {},
  );
  if (values.help) return { help: true };
  if (positionals.length > 0) throw new UsageError(`unexpected argument '${positionals[0]}'`);
  if (typeof values.domain !== "string") throw new UsageError("server dns-check needs --domain, the server's domain, e.g. --domain tunnels.example.com");
  // the server's own check of --domain, so that what passes here is what the server takes
  const server = parseServerConfig(["--domain", values.domain], {});
  if (server.help) return { help: true };
  const ips = (values["public-ip"] as string[] | undefined) ?? [];
  const dnsPortText = typeof values["dns-port"] === "string" ? values["dns-port"] : String(DNS_CHECK_DEFAULTS["dns-port"]);
  const dnsPort = Number(dnsPortText);
  if (!/^[0-9]{1,5}$/.test(dnsPortText) || dnsPort < 1 || dnsPort > 65535) {
    throw new UsageError(`--dns-port must be a port number from 1 to 65535 (got '${dnsPortText}')`);
  }
  const timeoutText = typeof values.timeout === "string" ? values.timeout : String(DNS_CHECK_DEFAULTS.timeout);
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
    },
  };
}

/** `1.2.3.4`, `1.2.3.4:5353`, `::1` or `[::1]:5353`; port 53 when none is given. */
export function parseHostPort(text: string, flag: string): { host: string; port: number } {
  const bad = () => new UsageError(`${flag} must be an IP address with an optional port, e.g. 127.0.0.1:5353 or [::1]:5353 (got '${text}')`);
  const m = /^\[([^\]]+)\](?::([0-9]{1,5}))?$/.exec(text) ?? /^([^:]+)(?::([0-9]{1,5}))?$/.exec(text) ?? (isIP(text) === 6 ? [text, text, undefined] : null);
  if (!m || isIP(m[1]!) === 0) throw bad();
  const port = m[2] === undefined ? 53 : Number(m[2]);
  if (port < 1 || port > 65535) throw bad();
  return { host: m[1]!, port };
}
