/**
 * The start of a TLS connection, read before anything is decrypted: the
 * server name (SNI) and the application protocols (ALPN) the client asks
 * for. The public port reads it to choose a certificate (Bun.listen holds
 * one) and to pass a connection on by name without decrypting it; and,
 * when asked, the pieces its JA4 fingerprint is made of (ja4.ts).
 *
 * Pure and indifferent to chunking: given every byte received so far, it
 * answers the hello, "incomplete", or a HelloError. It never throws and
 * never reads past a length it was given. What it reads (RFC 8446 5.1 and
 * 4.1.2, RFC 6066 3, RFC 7301 3.1):
 *
 *   record        type u8 (22) | version u16 (3.x) | length u16 | fragment
 *   handshake     type u8 (1) | length u24 | body     (over one or more records)
 *   client_hello  version u16 | random [32] | session_id <0..32>
 *                 | cipher_suites <2..2^16-2> | compression_methods <1..2^8-1>
 *                 | extensions <0..2^16-1>           (absent in old hellos)
 */

/** What a ClientHello asks for; a field is absent when its extension is. */
export interface ClientHello {
  /** The host_name of server_name: lower case, no trailing dot. */
  serverName?: string;
  /** The protocols of application_layer_protocol_negotiation, in the client's order. */
  alpn?: string[];
  /** What the hello's JA4 fingerprint is made of (tls/ja4.ts); only when asked for. */
  pieces?: HelloPieces;
}

/**
 * The parts of a hello its JA4 fingerprint reads, as the client sent them
 * (GREASE values included, in their order): a few small arrays, copied
 * out so that keeping them does not keep the bytes they came in.
 */
export interface HelloPieces {
  /** ClientHello.legacy_version. */
  version: number;
  cipherSuites: number[];
  /** The extensions' types, in their order. */
  extensions: number[];
  /** supported_versions' list; absent without the extension (or when its body does not add up). */
  supportedVersions?: number[];
  /** signature_algorithms' list, in its order; absent likewise. */
  signatureAlgorithms?: number[];
}

/**
 * The most bytes the hello may take on the wire, record headers included.
 * Real ones are well under (about 2 KiB with a post-quantum key share);
 * past this the peer is not a browser, and what it sent is not kept.
 */
export const MAX_HELLO_BYTES = 16 * 1024;

export const HELLO_ERRORS = {
  NOT_TLS: "The first bytes are not a TLS ClientHello: plain HTTP sent to the TLS port, or another protocol.",
  MALFORMED: "A length or field of the ClientHello does not add up.",
  TOO_LONG: `The ClientHello takes more than ${MAX_HELLO_BYTES} bytes.`,
  BAD_SERVER_NAME: "The server name carries bytes or labels a DNS name cannot.",
} as const;

export type HelloErrorCode = keyof typeof HELLO_ERRORS;

/** Why the bytes are not a usable ClientHello: a value, never thrown. */
export class HelloError {
  constructor(
    readonly code: HelloErrorCode,
    /** The particular fault, for a log line. */
    readonly message: string,
  ) {}
}

export type HelloAnswer = ClientHello | "incomplete" | HelloError;

const RECORD_HEADER = 5;
const CONTENT_HANDSHAKE = 22;
/** TLSPlaintext.length may not exceed 2^14. */
const MAX_RECORD = 16_384;
const HANDSHAKE_HEADER = 4;
const CLIENT_HELLO = 1;
const EXT_SERVER_NAME = 0;
const EXT_ALPN = 16;
const EXT_SIGNATURE_ALGORITHMS = 13;
const EXT_SUPPORTED_VERSIONS = 43;
const HOST_NAME = 0;
const MAX_NAME = 253;
const MAX_LABEL = 63;
/** Letters, digits, hyphen, dot, and the underscore some real names carry. */
const NAME_BYTES = /^[a-z0-9_.-]+$/;

/** With `pieces`, a whole hello carries what its JA4 fingerprint is made of (ClientHello.pieces); its other answers are the same. */
export function parseClientHello(bytes: Uint8Array, pieces = false): HelloAnswer {
  const message = handshakeMessage(bytes);
  if (typeof message !== "object" || message instanceof HelloError) return message;
  return helloBody(new Cursor(message, HANDSHAKE_HEADER, message.length), pieces);
}

/** The ClientHello handshake message (header included) gathered from its records. */
function handshakeMessage(bytes: Uint8Array): Uint8Array | "incomplete" | HelloError {
  const fragments: Uint8Array[] = [];
  let have = 0;
  /** The message's whole length, once its header is in. */
  let need: number | undefined;
  let pos = 0;
  while (need === undefined || have < need) {
    const first = pos === 0;
    // another record is needed, and it carries at least a byte
    if (pos + RECORD_HEADER + 1 > MAX_HELLO_BYTES) return tooLong();
    if (pos >= bytes.length) return "incomplete";
    if (bytes[pos] !== CONTENT_HANDSHAKE) {
      return first ? notTls(`the first byte is ${bytes[pos]}, not a handshake record (22)`) : malformed(`a record of type ${bytes[pos]} inside the ClientHello`);
    }
    if (pos + 1 < bytes.length && bytes[pos + 1] !== 3) {
      return first ? notTls(`record version ${bytes[pos + 1]}.x is not TLS (3.x)`) : malformed("a record of another version inside the ClientHello");
    }
    if (pos + RECORD_HEADER > bytes.length) return "incomplete";
    const length = u16(bytes, pos + 3);
    if (length === 0 || length > MAX_RECORD) return malformed(`a record of ${length} bytes`);
    const end = pos + RECORD_HEADER + length;
    if (end > MAX_HELLO_BYTES) return tooLong();
    const fragment = bytes.subarray(pos + RECORD_HEADER, Math.min(end, bytes.length));
    fragments.push(fragment);
    have += fragment.length;
    if (need === undefined && have >= HANDSHAKE_HEADER) {
      const head = concat(fragments, HANDSHAKE_HEADER);
      if (head[0] !== CLIENT_HELLO) return notTls(`handshake message type ${head[0]}, not a ClientHello (1)`);
      need = HANDSHAKE_HEADER + u24(head, 1);
      if (need > MAX_HELLO_BYTES) return tooLong();
    }
    if (end > bytes.length) return "incomplete";
    pos = end;
  }
  // the hello is the client's whole first flight: nothing else shares its last record
  if (have > need) return malformed(`${have - need} bytes after the ClientHello in its record`);
  return concat(fragments, need);
}

function helloBody(r: Cursor, withPieces: boolean): ClientHello | HelloError {
  const version = r.u16();
  if (version === undefined || !r.skip(32)) return malformed("shorter than its version and random");
  const session = r.vector(1);
  if (!session || session.remaining > 32) return malformed("session_id");
  const suites = r.vector(2);
  if (!suites || suites.remaining < 2 || suites.remaining % 2 !== 0) return malformed("cipher_suites");
  const compression = r.vector(1);
  if (!compression || compression.remaining < 1) return malformed("compression_methods");
  const hello: ClientHello = {};
  const pieces: HelloPieces | undefined = withPieces ? { version, cipherSuites: suites.u16s(), extensions: [] } : undefined;
  if (pieces) hello.pieces = pieces;
  if (r.done) return hello; // a hello without extensions (TLS 1.0 era)
  const extensions = r.vector(2);
  if (!extensions || !r.done) return malformed("the extensions do not fill the hello exactly");
  const seen = new Set<number>();
  while (!extensions.done) {
    const type = extensions.u16();
    const body = extensions.vector(2);
    if (type === undefined || !body) return malformed("an extension runs past the end");
    if (seen.has(type)) return malformed(`extension ${type} twice`);
    seen.add(type);
    if (pieces) {
      pieces.extensions.push(type);
      if (type === EXT_SUPPORTED_VERSIONS) pieces.supportedVersions = listOf(body, 1);
      else if (type === EXT_SIGNATURE_ALGORITHMS) pieces.signatureAlgorithms = listOf(body, 2);
    }
    if (type === EXT_SERVER_NAME) {
      const name = serverName(body);
      if (name instanceof HelloError) return name;
      if (name !== undefined) hello.serverName = name;
    } else if (type === EXT_ALPN) {
      const alpn = protocols(body);
      if (alpn instanceof HelloError) return alpn;
      hello.alpn = alpn;
    }
  }
  return hello;
}

/**
 * The u16 values of a list with a length prefix of `lengthBytes` that fills
 * the extension exactly; undefined when it does not add up (JA4 then reads
 * it as absent: the hello's other answers do not depend on it).
 */
function listOf(ext: Cursor, lengthBytes: 1 | 2): number[] | undefined {
  const list = ext.vector(lengthBytes);
  if (!list || !ext.done || list.remaining % 2 !== 0) return undefined;
  return list.u16s();
}

/** The host_name of a server_name extension; undefined when the list holds only other kinds. */
function serverName(ext: Cursor): string | undefined | HelloError {
  const list = ext.vector(2);
  if (!list || !ext.done || list.done) return malformed("server_name list");
  let host: string | undefined;
  while (!list.done) {
    const type = list.u8();
    const name = list.vector(2);
    if (type === undefined || !name || name.done) return malformed("server_name entry");
    if (type !== HOST_NAME) continue;
    if (host !== undefined) return malformed("two host names");
    host = name.latin1();
  }
  return host === undefined ? undefined : dnsName(host);
}

/** `host` lower case without its trailing dot, if a DNS name can carry it. */
function dnsName(host: string): string | HelloError {
  const name = host.toLowerCase().replace(/\.$/, "");
  const bad = (why: string) => new HelloError("BAD_SERVER_NAME", `server name ${JSON.stringify(host.slice(0, 80))}: ${why}`);
  if (!NAME_BYTES.test(name)) return bad("bytes outside letters, digits, '-', '_' and '.'");
  if (name.length > MAX_NAME) return bad(`longer than ${MAX_NAME}`);
  if (name.split(".").some((label) => label.length === 0 || label.length > MAX_LABEL)) return bad(`an empty label or one over ${MAX_LABEL}`);
  return name;
}

function protocols(ext: Cursor): string[] | HelloError {
  const list = ext.vector(2);
  if (!list || !ext.done || list.done) return malformed("ALPN list");
  const names: string[] = [];
  while (!list.done) {
    const name = list.vector(1);
    if (!name || name.done) return malformed("ALPN protocol name");
    names.push(name.latin1());
  }
  return names;
}

/** Reads within [pos, end) of `bytes`; a read that does not fit answers undefined and moves nothing. */
class Cursor {
  constructor(
    private readonly bytes: Uint8Array,
    private pos: number,
    private readonly end: number,
  ) {}

  get remaining(): number {
    return this.end - this.pos;
  }

  get done(): boolean {
    return this.pos === this.end;
  }

  skip(n: number): boolean {
    if (n > this.remaining) return false;
    this.pos += n;
    return true;
  }

  u8(): number | undefined {
    return this.skip(1) ? this.bytes[this.pos - 1] : undefined;
  }

  u16(): number | undefined {
    return this.skip(2) ? u16(this.bytes, this.pos - 2) : undefined;
  }

  /** A vector with a length prefix of `lengthBytes` (1 or 2), as its own cursor. */
  vector(lengthBytes: 1 | 2): Cursor | undefined {
    const start = this.pos;
    const length = lengthBytes === 1 ? this.u8() : this.u16();
    if (length === undefined || !this.skip(length)) {
      this.pos = start;
      return undefined;
    }
    return new Cursor(this.bytes, this.pos - length, this.pos);
  }

  /** The rest as u16 values (an odd last byte is left out). */
  u16s(): number[] {
    const values: number[] = [];
    for (let at = this.pos; at + 1 < this.end; at += 2) values.push(u16(this.bytes, at));
    return values;
  }

  /** The rest as one byte per character (protocol names and host names are ASCII). */
  latin1(): string {
    return String.fromCharCode(...this.bytes.subarray(this.pos, this.end));
  }
}

function u16(bytes: Uint8Array, at: number): number {
  return (bytes[at]! << 8) | bytes[at + 1]!;
}

function u24(bytes: Uint8Array, at: number): number {
  return (bytes[at]! << 16) | (bytes[at + 1]! << 8) | bytes[at + 2]!;
}

/** The first `length` bytes of the fragments, as one array. */
function concat(fragments: Uint8Array[], length: number): Uint8Array {
  if (fragments.length === 1 && fragments[0]!.length >= length) return fragments[0]!.subarray(0, length);
  const out = new Uint8Array(length);
  let at = 0;
  for (const f of fragments) {
    if (at >= length) break;
    const part = f.subarray(0, length - at);
    out.set(part, at);
    at += part.length;
  }
  return out;
}

const notTls = (why: string) => new HelloError("NOT_TLS", why);
const malformed = (why: string) => new HelloError("MALFORMED", why);
const tooLong = () => new HelloError("TOO_LONG", `more than ${MAX_HELLO_BYTES} bytes before the ClientHello's end`);
