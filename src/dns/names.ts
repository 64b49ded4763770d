/**
 * Domain names as the challenge responder compares them: ASCII letters
 * folded to lower case and nothing else (RFC 4343: DNS compares names
 * case-insensitively in ASCII only; String.toLowerCase would also fold
 * other letters, some into a different length), with no trailing dot.
 */

/** One label: letters, digits, hyphens, underscores (`_acme-challenge`), 1 to 63 of them. */
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
/** RFC 1035 2.3.4: 255 bytes on the wire, so 253 characters as text. */
const MAX_NAME_LENGTH = 253;

/** Folds A-Z only. */
export function asciiLower(text: string): string {
  return text.replace(/[A-Z]+/g, (s) => s.toLowerCase());
}

/** "_ACME-Challenge.Example.COM." -> "_acme-challenge.example.com" */
export function normalizeName(name: string): string {
  return asciiLower(name.endsWith(".") ? name.slice(0, -1) : name);
}

/** Whether a normalized name is a host name of labels that LABEL allows (the root is not). */
export function isHostName(name: string): boolean {
  return name.length > 0 && name.length <= MAX_NAME_LENGTH && name.split(".").every((l) => LABEL.test(l));
}

/** Whether normalized `name` is `zone` itself or a name below it. */
export function inZone(name: string, zone: string): boolean {
  return name === zone || name.endsWith(`.${zone}`);
}
