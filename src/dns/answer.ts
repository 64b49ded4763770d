/**
 * The challenge responder's answer to one DNS message: bytes in, bytes (or
 * a reason to send nothing) out, with no socket in sight. Decoding and
 * encoding are dns-packet's; what to answer is decided here.
 *
 * For a name in the zone (the zone's own name, `_acme-challenge.<domain>`,
 * and any name below it) the answer is authoritative (AA set):
 * - TXT (and ANY, which RFC 8482 lets a server answer with the records of
 *   its choice): the name's pending challenge values, at most
 *   MAX_TXT_VALUES, with a TTL of TXT_TTL_S.
 * - SOA and NS of the zone's own name: the zone's SOA, and the NS record
 *   naming the server (resolvers ask for these on their way down).
 * - Anything else, or TXT with nothing pending: NOERROR with no answer and
 *   the SOA in the authority section (NODATA, RFC 2308 2.2), for every name
 *   in the zone, never NXDOMAIN. An NXDOMAIN says that nothing exists at or
 *   below the name (RFC 8020), and a resolver may keep it for the SOA's
 *   minimum: one that asked a moment before a challenge was added, or that
 *   walks down a name label by label (QNAME minimisation, on by default in
 *   unbound, which Let's Encrypt validates with), would then be told "no"
 *   about a name that is about to hold the value. NODATA claims nothing
 *   about other types or other names.
 *
 * Everything else is refused or dropped, so that the server is no resolver
 * and answers no more than the little it holds:
 * - a name outside the zone, a class other than IN, a zone transfer: REFUSED;
 * - RD (recursion desired) is echoed and never honoured: RA is never set;
 * - an opcode other than QUERY: NOTIMP; a question count other than one,
 *   answer or authority records, or an additional record other than one
 *   OPT: FORMERR; an EDNS version other than 0: BADVERS;
 * - a message that is a response, is shorter than a header, longer than
 *   MAX_QUERY_BYTES, that dns-packet cannot decode, that has bytes past its
 *   end, or whose name dns-packet would not write back as it came (a dot or
 *   a non-UTF-8 byte inside a label): dropped, which the TCP side turns
 *   into closing the connection. (A query without EDNS is a header and one
 *   question, 271 bytes at most: one over 512 bytes without an OPT record
 *   has bytes past its end or records a query has not, so is dropped or
 *   FORMERR by the rules above.)
 *
 * Over UDP an answer longer than 512 bytes (or the client's EDNS size,
 * capped at EDNS_UDP_MAX) is cut to its question with TC set. The question
 * goes back as it was asked, letter case included: resolvers that randomise
 * the case of their questions (0x20) check that it comes back unchanged.
 */
import {
  AUTHORITATIVE_ANSWER,
  CHECKING_DISABLED,
  RECURSION_DESIRED,
  TRUNCATED_RESPONSE,
  decode,
  encode,
  type Answer,
  type DecodedPacket,
  type OptAnswer,
  type Packet,
  type Question,
  type SoaAnswer,
} from "dns-packet";
import type { TxtRecords } from "./challenge-records.ts";
import { asciiLower, inZone } from "./names.ts";
import {
  APEX_TTL_S,
  EDNS_UDP_MAX,
  FLAG_QR,
  HEADER_LENGTH,
  HeaderOffset,
  MAX_QUERY_BYTES,
  MAX_TXT_VALUE_BYTES,
  MAX_TXT_VALUES,
  NEGATIVE_TTL_S,
  OPCODE_MASK,
  OPCODE_QUERY,
  OPCODE_SHIFT,
  PLAIN_UDP_MAX,
  Rcode,
  SOA_TIMERS,
  TXT_TTL_S,
  type RcodeName,
} from "./wire.ts";

/** The zone a responder serves; every name normalized (lower case, no trailing dot). */
export interface Zone {
  /** `_acme-challenge.<domain>`: the name delegated to the server. */
  name: string;
  /** The server's own host name: the SOA's MNAME and the zone's NS record. */
  nameserver: string;
  /** The SOA's RNAME (a mailbox written as a name); nothing reads it. */
  hostmaster: string;
}

export type Transport = "udp" | "tcp";

export type Verdict =
  | { kind: "answer"; bytes: Buffer; rcode: RcodeName; truncated: boolean }
  | { kind: "drop"; reason: string };

/** What a query's header says that its answer echoes. */
interface Asked {
  id: number;
  opcode: number;
  /** RD and CD, copied into the answer as RFC 1035 and RFC 6840 5.9 ask. */
  echoed: number;
}

interface Reply {
  rcode: RcodeName;
  authoritative: boolean;
  answers: Answer[];
  authorities: Answer[];
}

export function answerQuery(query: Buffer, transport: Transport, zone: Zone, records: TxtRecords): Verdict {
  if (query.length < HEADER_LENGTH) return drop("shorter than a DNS header");
  if (query.length > MAX_QUERY_BYTES) return drop(`longer than ${MAX_QUERY_BYTES} bytes`);
  const flags = query.readUInt16BE(HeaderOffset.FLAGS);
  if (flags & FLAG_QR) return drop("a response, not a query");
  const asked: Asked = {
    id: query.readUInt16BE(HeaderOffset.ID),
    opcode: (flags >> OPCODE_SHIFT) & OPCODE_MASK,
    echoed: flags & (RECURSION_DESIRED | CHECKING_DISABLED),
  };
  if (asked.opcode !== OPCODE_QUERY) return bare(asked, "NOTIMP");
  // counts are checked before decoding: the decoder would make room for as many records as the header claims
  const additionals = query.readUInt16BE(HeaderOffset.ARCOUNT);
  if (
    query.readUInt16BE(HeaderOffset.QDCOUNT) !== 1 ||
    query.readUInt16BE(HeaderOffset.ANCOUNT) !== 0 ||
    query.readUInt16BE(HeaderOffset.NSCOUNT) !== 0 ||
    additionals > 1
  ) {
    return bare(asked, "FORMERR");
  }

  let packet: DecodedPacket;
  try {
    packet = decode(query);
  } catch (err) {
    return drop(`undecodable: ${(err as Error).message}`);
  }
  if (decode.bytes !== query.length) return drop("bytes past the end of the message");
  const question = packet.questions?.[0];
  if (!question) return drop("no question");
  const opt = packet.additionals?.find((a): a is OptAnswer => a.type === "OPT");
  if (additionals === 1 && !opt) return bare(asked, "FORMERR"); // TSIG, SIG(0): not spoken here
  if (!nameReadsBack(query, question.name)) return drop("a name that would not be written back as it came");

  const reply: Reply = opt && opt.ednsVersion !== 0 ? refusal("BADVERS") : replyTo(question, zone, records);
  const packetOut = (truncated: boolean): Packet => ({
    type: "response",
    id: asked.id,
    flags:
      asked.echoed |
      (reply.authoritative ? AUTHORITATIVE_ANSWER : 0) |
      (truncated ? TRUNCATED_RESPONSE : 0) |
      (Rcode[reply.rcode] & 0xf),
    questions: echoable(question) ? [{ name: question.name, type: question.type, class: question.class }] : [],
    answers: truncated ? [] : reply.answers,
    authorities: truncated ? [] : reply.authorities,
    additionals: opt ? [ednsRecord(Rcode[reply.rcode] >> 4)] : [],
  });
  const bytes = encode(packetOut(false));
  const room = !opt ? PLAIN_UDP_MAX : Math.min(EDNS_UDP_MAX, Math.max(PLAIN_UDP_MAX, opt.udpPayloadSize));
  if (transport === "udp" && bytes.length > room) {
    return { kind: "answer", bytes: encode(packetOut(true)), rcode: reply.rcode, truncated: true };
  }
  return { kind: "answer", bytes, rcode: reply.rcode, truncated: false };
}

function replyTo(question: Question, zone: Zone, records: TxtRecords): Reply {
  const name = asciiLower(question.name);
  if (question.class !== "IN" || !inZone(name, zone.name)) return refusal("REFUSED");
  if (question.type === "AXFR" || question.type === "IXFR") return refusal("REFUSED"); // no zone transfers
  const apex = name === zone.name;
  // the zone's name as this question spelled it: a 0x20 resolver sees its own letters throughout
  const soa = soaRecord(question.name.slice(question.name.length - zone.name.length), zone);
  const answers: Answer[] = [];
  const type: string = question.type; // dns-packet reads type 255 as "ANY", which its types leave out
  if (type === "TXT" || type === "ANY") {
    const values = records.txt(name).filter((v) => v.length > 0 && Buffer.byteLength(v) <= MAX_TXT_VALUE_BYTES);
    for (const value of values.slice(0, MAX_TXT_VALUES)) answers.push({ name: question.name, type: "TXT", ttl: TXT_TTL_S, data: value });
  } else if (apex && question.type === "SOA") {
    answers.push({ ...soa, name: question.name, ttl: APEX_TTL_S });
  } else if (apex && question.type === "NS") {
    answers.push({ name: question.name, type: "NS", ttl: APEX_TTL_S, data: zone.nameserver });
  }
  return { rcode: "NOERROR", authoritative: true, answers, authorities: answers.length > 0 ? [] : [soa] };
}

/** The SOA; its TTL and minimum are how long a resolver keeps a "nothing here" (RFC 2308 5). */
function soaRecord(owner: string, zone: Zone): SoaAnswer {
  return {
    name: owner,
    type: "SOA",
    ttl: NEGATIVE_TTL_S,
    data: { mname: zone.nameserver, rname: zone.hostmaster, ...SOA_TIMERS, minimum: NEGATIVE_TTL_S },
  };
}

/** The OPT record of an answer to an EDNS query (RFC 6891 7): the size burrow takes, no options, no DNSSEC. */
function ednsRecord(extendedRcode: number): OptAnswer {
  return { name: ".", type: "OPT", udpPayloadSize: EDNS_UDP_MAX, extendedRcode, ednsVersion: 0, flags: 0, flag_do: false, options: [] };
}

/**
 * Whether dns-packet writes `name` back as the bytes of the question. It
 * reads labels as UTF-8 and joins them with dots, so a label holding a dot
 * ("a.b" in one label) would be read as two labels, and bytes that are not
 * UTF-8 would come back changed: such a name is not what it seems.
 */
function nameReadsBack(query: Buffer, name: string): boolean {
  const written = encode({ questions: [{ name, type: "A", class: "IN" }] });
  const length = written.length - HEADER_LENGTH - 4; // less the type and class
  return written.subarray(HEADER_LENGTH, HEADER_LENGTH + length).equals(query.subarray(HEADER_LENGTH, HEADER_LENGTH + length));
}

/** A class dns-packet cannot write (one it has no name for) leaves the question out of the answer. */
function echoable(question: Question): boolean {
  return !String(question.class).startsWith("UNKNOWN_");
}

function refusal(rcode: RcodeName): Reply {
  return { rcode, authoritative: false, answers: [], authorities: [] };
}

/** A header alone: the answer to a message whose question is not read (NOTIMP, FORMERR). */
function bare(asked: Asked, rcode: RcodeName): Verdict {
  const flags = (asked.opcode << OPCODE_SHIFT) | asked.echoed | (Rcode[rcode] & 0xf);
  return { kind: "answer", bytes: encode({ type: "response", id: asked.id, flags }), rcode, truncated: false };
}

function drop(reason: string): Verdict {
  return { kind: "drop", reason };
}
