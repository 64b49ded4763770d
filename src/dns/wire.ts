/**
 * The DNS facts and limits of burrow's challenge responder, in one place.
 *
 * Decoding and encoding messages is dns-packet's; what is here is the few
 * header facts read before a message is handed to it (so that a datagram
 * claiming 65535 questions is refused before anything is decoded), the
 * response codes burrow sends, the TTLs it gives, and every limit that keeps
 * a server answering anyone on the internet from being used against others.
 */

/** RFC 1035 4.1.1: id u16 | flags u16 | QDCOUNT | ANCOUNT | NSCOUNT | ARCOUNT, big-endian. */
export const HEADER_LENGTH = 12;
export const HeaderOffset = { ID: 0, FLAGS: 2, QDCOUNT: 4, ANCOUNT: 6, NSCOUNT: 8, ARCOUNT: 10 } as const;
/** Set in a response: burrow never answers one (two servers would answer each other forever). */
export const FLAG_QR = 0x8000;
/** The opcode is the 4 bits below QR. */
export const OPCODE_SHIFT = 11;
export const OPCODE_MASK = 0xf;
/** The only opcode answered; the others (IQUERY, STATUS, NOTIFY, UPDATE) get NOTIMP. */
export const OPCODE_QUERY = 0;

/** Response codes burrow sends (RFC 1035 4.1.1; BADVERS is EDNS's, RFC 6891 9). */
export const Rcode = {
  NOERROR: 0,
  /** More or fewer than one question, records where a query has none. */
  FORMERR: 1,
  /** An opcode other than QUERY. */
  NOTIMP: 4,
  /** A name outside the zone, a class other than IN, a zone transfer. */
  REFUSED: 5,
  /** An EDNS version other than 0: 16, of which the OPT record carries the upper 8 bits. */
  BADVERS: 16,
} as const;
export type RcodeName = keyof typeof Rcode;

/**
 * The largest DNS message over UDP without EDNS (RFC 1035 4.2.1): a longer
 * answer is cut to its question with TC set, and the client asks over TCP.
 */
export const PLAIN_UDP_MAX = 512;
/**
 * The largest UDP message burrow sends or takes with EDNS, whatever size the
 * client offers: 1232 bytes fit in any IPv6 path without fragments (DNS
 * flag day 2020). It is also the hard cap on a query by any transport: a
 * query is one question of at most 255 bytes and an OPT record, so a
 * message past this is no query of a resolver's.
 */
export const EDNS_UDP_MAX = 1232;
export const MAX_QUERY_BYTES = EDNS_UDP_MAX;
/** TCP messages are preceded by their length, u16 big-endian (RFC 1035 4.2.2). */
export const TCP_LENGTH_PREFIX = 2;

/**
 * TXT answers for one name, at most. Issuing a certificate for a domain and
 * its wildcard puts two values under the one `_acme-challenge` name; a
 * renewal overlapping another order may add two more. Four answers under
 * `_acme-challenge.tunnels.example.com` take about 430 bytes, under
 * PLAIN_UDP_MAX; and the cap bounds what one small query can draw out.
 */
export const MAX_TXT_VALUES = 4;
/**
 * A DNS-01 value is 43 characters (base64url of a SHA-256 digest); a value
 * of up to this many printable ASCII characters is held, a longer one
 * refused. One TXT string holds 255 bytes at most in any case.
 */
export const MAX_TXT_VALUE_BYTES = 64;

/**
 * TTL of a TXT answer: 0, kept by no cache (RFC 1035 3.2.1). An order for a
 * domain and its wildcard adds two values under one name, and a client may
 * add the second after the CA has checked the first: a resolver that kept
 * the first answer (one value) even a second would fail the second check.
 * Every validation asks afresh, which costs the server one small answer.
 */
export const TXT_TTL_S = 0;
/**
 * How long a resolver may keep a "nothing here" answer (the SOA's TTL and
 * minimum, RFC 2308 5): 0 too, so that a resolver asked a moment before a
 * value was added sees it at once.
 */
export const NEGATIVE_TTL_S = 0;
/** TTL of the zone's own SOA and NS answers: they never change while the server runs. */
export const APEX_TTL_S = 60;
/**
 * The SOA's serial, refresh, retry and expire mean something only to
 * secondary servers pulling the zone; there are none (zone transfers are
 * refused), so they are fixed, conventional values.
 */
export const SOA_TIMERS = { serial: 1, refresh: 3600, retry: 600, expire: 86_400 } as const;

/** Limits of one responder; tests lower some of them. */
export interface DnsLimits {
  /**
   * Answers per client a second, and the burst above that (over TCP a
   * client past it is closed; over UDP its queries go unanswered). A resolver
   * validating a challenge asks a few questions (the TXT, maybe NS and SOA
   * on its way down), and Let's Encrypt asks from several places, each its
   * own client: 20 at once is plenty. A source address can be forged over
   * UDP, so this is what bounds the answers sent to whoever is named as the
   * source: a forged flood draws at most this rate at its victim.
   */
  perClientPerSecond: number;
  perClientBurst: number;
  /**
   * Answers a second in all, and the burst. With forged sources from
   * many addresses each client's bucket starts full, so this bounds what the
   * responder sends altogether.
   */
  totalPerSecond: number;
  totalBurst: number;
  /** Clients whose buckets are kept; past it the longest idle is forgotten. */
  maxClients: number;
  /** A TCP connection that completes no query for this long is closed (RFC 7766 6.2.3: seconds, not minutes). */
  tcpIdleMs: number;
  /** TCP connections at once from one client, and in all. */
  tcpPerClient: number;
  tcpTotal: number;
  /**
   * Answer bytes a TCP client has not read, at most: a client that sends
   * queries and never reads is closed rather than buffered for.
   */
  tcpMaxUnsent: number;
}

export const DEFAULT_DNS_LIMITS: Readonly<DnsLimits> = {
  perClientPerSecond: 10,
  perClientBurst: 20,
  totalPerSecond: 500,
  totalBurst: 1000,
  maxClients: 10_000,
  tcpIdleMs: 10_000,
  tcpPerClient: 8,
  tcpTotal: 64,
  tcpMaxUnsent: 16 * 1024,
};

/** Client faults logged a minute, at most (log.ts limitedLog): anyone can send them. */
export const FAULT_LOG_PER_MINUTE = 10;
/** With port 0, how many free UDP ports are tried for one whose number is free for TCP too. */
export const BIND_TRIES = 8;
