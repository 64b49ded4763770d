/**
 * The JA4 fingerprint of a TLS client (FoxIO's JA4, as ngrok's
 * `conn.tls.ja4_fingerprint` gives it), made from its ClientHello
 * (client-hello.ts, parsed with its pieces):
 *
 *   t13d1516h2_8daaf6152771_e5627efa2ab1
 *   │ │ │ │ │ │  │            └ sha256 of the extensions sorted (SNI and ALPN left out), "_", the signature algorithms in order: 12 hex
 *   │ │ │ │ │ │  └ sha256 of the cipher suites sorted: 12 hex
 *   │ │ │ │ │ └ first and last character of the first ALPN protocol ("00" without)
 *   │ │ │ │ └ extensions counted (99 at most)
 *   │ │ │ └ cipher suites counted (99 at most)
 *   │ │ └ "d" with a server_name extension, "i" without
 *   │ └ the version: supported_versions' highest, else the hello's own
 *   └ "t": TLS over TCP (the edge reads no QUIC or DTLS)
 *
 * GREASE values (RFC 8701) are left out everywhere: counts, lists, version.
 * Pure: the same pieces always make the same string. Made only when a rule
 * reads it, and once per hello.
 */
import type { ClientHello, HelloPieces } from "./client-hello.ts";

const EXT_SERVER_NAME = 0x0000;
const EXT_ALPN = 0x0010;
/** What JA4 writes for a list with nothing in it, rather than the hash of nothing. */
const EMPTY = "000000000000";

const VERSIONS: Record<number, string> = {
  0x0304: "13",
  0x0303: "12",
  0x0302: "11",
  0x0301: "10",
  0x0300: "s3",
  0x0002: "s2",
  0xfeff: "d1",
  0xfefd: "d2",
  0xfefc: "d3",
};

/** The fingerprints made so far, by the pieces they were made of: a rule read on every request costs one. */
const made = new WeakMap<HelloPieces, string>();

/** The hello's JA4; "" for one parsed without its pieces. */
export function ja4(hello: ClientHello): string {
  const pieces = hello.pieces;
  if (!pieces) return "";
  let fingerprint = made.get(pieces);
  if (fingerprint === undefined) {
    fingerprint = fromPieces(pieces, hello.alpn?.[0]);
    made.set(pieces, fingerprint);
  }
  return fingerprint;
}

/** `firstAlpn`: the first ALPN protocol name, one character per byte. */
export function fromPieces(pieces: HelloPieces, firstAlpn: string | undefined): string {
  const ciphers = pieces.cipherSuites.filter(notGrease);
  const extensions = pieces.extensions.filter(notGrease);
  const signatures = (pieces.signatureAlgorithms ?? []).filter(notGrease);
  const sni = extensions.includes(EXT_SERVER_NAME) ? "d" : "i";
  const a = `t${versionOf(pieces)}${sni}${count(ciphers.length)}${count(extensions.length)}${alpnMark(firstAlpn)}`;
  const hashedExtensions = extensions.filter((e) => e !== EXT_SERVER_NAME && e !== EXT_ALPN);
  const b = ciphers.length === 0 ? EMPTY : hash12(sortedHex(ciphers));
  const c = hashedExtensions.length === 0 ? EMPTY : hash12(signatures.length === 0 ? sortedHex(hashedExtensions) : `${sortedHex(hashedExtensions)}_${signatures.map(hex4).join(",")}`);
  return `${a}_${b}_${c}`;
}

/** GREASE: 0x?a?a with both bytes the same (0x0a0a, 0x1a1a ... 0xfafa). */
export function isGrease(value: number): boolean {
  return (value & 0x0f0f) === 0x0a0a && value >> 8 === (value & 0xff);
}

const notGrease = (value: number) => !isGrease(value);

function versionOf(pieces: HelloPieces): string {
  const offered = pieces.supportedVersions?.filter(notGrease) ?? [];
  const version = offered.length > 0 ? Math.max(...offered) : pieces.version;
  return VERSIONS[version] ?? "00";
}

function count(n: number): string {
  return n > 99 ? "99" : n.toString().padStart(2, "0");
}

/**
 * The first and last character of the first ALPN protocol; "00" without
 * one. When either is not an ASCII letter or digit, the first and last
 * character of the name's bytes in hex instead.
 */
export function alpnMark(name: string | undefined): string {
  if (!name) return "00";
  const first = name.charCodeAt(0);
  const last = name.charCodeAt(name.length - 1);
  if (alphanumeric(first) && alphanumeric(last)) return String.fromCharCode(first, last);
  const firstHex = hex2(first);
  const lastHex = hex2(last);
  return firstHex[0]! + lastHex[1]!;
}

function alphanumeric(c: number): boolean {
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);
}

function sortedHex(values: number[]): string {
  return [...values].sort((x, y) => x - y).map(hex4).join(",");
}

const hex2 = (n: number) => (n & 0xff).toString(16).padStart(2, "0");
const hex4 = (n: number) => n.toString(16).padStart(4, "0");

function hash12(text: string): string {
  return new Bun.CryptoHasher("sha256").update(text).digest("hex").slice(0, 12);
}
