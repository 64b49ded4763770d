/**
 * A custom hostname as a person writes it (demo.acme.com, Bücher.example,
 * *.dev.acme.com) and as burrow keeps it: lowercased, IDNA in its ASCII
 * form (xn--bcher-kva.example), no trailing dot; a wildcard covers one label
 * under its base. Shared by the admin API and the agent's --hostname.
 */
import { domainToASCII } from "node:url";

const LABEL = /^(?!-)[a-z0-9-]{1,63}(?<!-)$/;
const MAX_NAME = 253;

/** The hostname in its kept form, or why it is none. */
export function normalizeHostname(raw: string): { hostname: string } | { problem: string } {
  const text = raw.trim().toLowerCase().replace(/\.$/, "");
  const wildcard = text.startsWith("*.");
  const base = wildcard ? text.slice(2) : text;
  if (base.includes("*")) return { problem: "a wildcard is '*.' followed by a name, such as *.dev.example.com" };
  // domainToASCII lowercases and maps IDNA; it answers "" for what is no domain name
  const ascii = base === "" ? "" : domainToASCII(base);
  const labels = ascii.split(".");
  if (ascii === "" || ascii.length > MAX_NAME - (wildcard ? 2 : 0) || !labels.every((l) => LABEL.test(l))) {
    return { problem: "must be a DNS name such as demo.example.com (letters, digits and hyphens, labels of 1 to 63)" };
  }
  if (labels.length < 2) return { problem: "must have at least two labels, such as example.com" };
  if (/^[0-9]+$/.test(labels[labels.length - 1]!)) return { problem: "must be a name, not an IP address" };
  return { hostname: wildcard ? `*.${ascii}` : ascii };
}

/** Whether `hostname` (kept form) is `name` or, for a wildcard, covers it (one label under its base). */
export function hostnameCovers(hostname: string, name: string): boolean {
  if (!hostname.startsWith("*.")) return hostname === name;
  const base = hostname.slice(1); // ".dev.acme.com"
  return name.endsWith(base) && !name.slice(0, -base.length).includes(".") && name.length > base.length;
}

/**
 * The one wildcard that could cover `name` (kept form, no wildcard): `*.` and
 * the name less its first label. A wildcard covers one label, as in TLS
 * certificates (RFC 6125), so no other could.
 */
export function coveringWildcard(name: string): string {
  return `*.${name.slice(name.indexOf(".") + 1)}`;
}

/**
 * Whether two hostnames (kept forms) can name the same host: the same
 * hostname, or a wildcard and a name it covers. Two different wildcards
 * never do (`*.acme.com` covers `dev.acme.com`, not what `*.dev.acme.com`
 * covers), nor does a wildcard and its own base (`acme.com`).
 */
export function hostnamesOverlap(a: string, b: string): boolean {
  return a === b || hostnameCovers(a, b) || hostnameCovers(b, a);
}

/** The name whose TXT record proves a hostname: `_burrow-challenge.` before it (a wildcard's base for a wildcard). */
export function challengeName(hostname: string): string {
  return `_burrow-challenge.${hostname.startsWith("*.") ? hostname.slice(2) : hostname}`;
}
