/**
 * A DNS resolver's address as flags give it (`--resolver` of dns-check,
 * `--dns-resolver` of the server), and the TXT lookups the server makes
 * through it (a custom hostname's verification record).
 */
import { Resolver } from "node:dns/promises";
import { isIP } from "node:net";
import { UsageError } from "../usage-error.ts";

/** `1.2.3.4`, `1.2.3.4:5353`, `::1` or `[::1]:5353`; port 53 when none is given. */
export function parseHostPort(text: string, flag: string): { host: string; port: number } {
  const bad = () => new UsageError(`${flag} must be an IP address with an optional port, e.g. 127.0.0.1:5353 or [::1]:5353 (got '${text}')`);
  const m = /^\[([^\]]+)\](?::([0-9]{1,5}))?$/.exec(text) ?? /^([^:]+)(?::([0-9]{1,5}))?$/.exec(text) ?? (isIP(text) === 6 ? [text, text, undefined] : null);
  if (!m || isIP(m[1]!) === 0) throw bad();
  const port = m[2] === undefined ? 53 : Number(m[2]);
  if (port < 1 || port > 65535) throw bad();
  return { host: m[1]!, port };
}

/** "1.2.3.4:53", "[::1]:53": an address as node:dns and people write it. */
export function hostPort(host: string, port: number): string {
  return host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
}

/** Codes node:dns answers for a name that exists without records of the type, or does not exist: no record, not a failure. */
const NO_RECORD = new Set(["ENODATA", "ENOTFOUND", "NXDOMAIN"]);

/**
 * TXT lookups through `resolver` (the system's when undefined): each
 * record's strings joined, [] when there is none; a lookup that fails
 * (timeout, refused) throws with its code.
 */
export function txtLookup(resolver: { host: string; port: number } | undefined, timeoutMs = 5_000): (name: string) => Promise<string[]> {
  const r = new Resolver({ timeout: timeoutMs, tries: 2 });
  if (resolver) r.setServers([hostPort(resolver.host, resolver.port)]);
  return async (name) => {
    try {
      return (await r.resolveTxt(name)).map((chunks) => chunks.join(""));
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code && NO_RECORD.has(code)) return [];
      throw new Error(code ? `${code} from ${resolver ? hostPort(resolver.host, resolver.port) : "the system's resolver"}` : String(err));
    }
  };
}
