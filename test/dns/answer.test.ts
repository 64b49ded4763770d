/**
 * What the challenge responder answers, without a socket: queries built with
 * dns-packet (and by hand where dns-packet will not build them), answers
 * read back with it. Authoritative answers for the zone, NODATA rather than
 * NXDOMAIN, refusals for everything outside it, the error codes, truncation
 * over UDP, the letter case of a 0x20 resolver, and messages that are
 * dropped. Then random and mutated bytes, which must never throw.
 */
import { describe, expect, test } from "bun:test";
import {
  AUTHORITATIVE_ANSWER,
  CHECKING_DISABLED,
  RECURSION_AVAILABLE,
  RECURSION_DESIRED,
  TRUNCATED_RESPONSE,
  decode,
  encode,
  type Answer,
  type DecodedPacket,
  type OptAnswer,
  type Packet,
  type RecordType,
} from "dns-packet";
import fc from "fast-check";
import { answerQuery, type Transport, type Zone } from "../../src/dns/answer.ts";
import { EDNS_UDP_MAX, MAX_QUERY_BYTES, MAX_TXT_VALUES, NEGATIVE_TTL_S, PLAIN_UDP_MAX, Rcode, TXT_TTL_S } from "../../src/dns/wire.ts";
import { fuzzParams } from "../harness/fuzz.ts";

const ZONE: Zone = {
  name: "_acme-challenge.tunnels.example.com",
  nameserver: "tunnels.example.com",
  hostmaster: "hostmaster.tunnels.example.com",
};
const VALUES = ["LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0", "evaGxfADs6pSRb2LAv9IZf17Dt3juxGJ-PCt92wr-oA"];
const RECORDS = { txt: (name: string) => (name === ZONE.name ? VALUES : []) };

interface Ask {
  type?: string;
  class?: string;
  id?: number;
  flags?: number;
  /** An OPT record: EDNS with this size, version and options. */
  edns?: Partial<OptAnswer>;
}

function query(name: string, ask: Ask = {}): Buffer {
  const packet: Packet = {
    type: "query",
    id: ask.id ?? 0x1234,
    flags: ask.flags ?? RECURSION_DESIRED,
    questions: [{ name, type: (ask.type ?? "TXT") as RecordType, class: (ask.class ?? "IN") as "IN" }],
    additionals: ask.edns ? [{ name: ".", type: "OPT", udpPayloadSize: 1232, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [], ...ask.edns }] : [],
  };
  return encode(packet);
}

function answer(bytes: Buffer, transport: Transport = "udp", records = RECORDS, zone = ZONE) {
  const verdict = answerQuery(bytes, transport, zone, records);
  if (verdict.kind !== "answer") throw new Error(`dropped: ${verdict.reason}`);
  const packet = decode(verdict.bytes);
  const opt = packet.additionals?.find((a): a is OptAnswer => a.type === "OPT");
  return { packet, bytes: verdict.bytes, rcode: (packet.flags! & 0xf) | ((opt?.extendedRcode ?? 0) << 4), opt, truncated: verdict.truncated };
}

function dropped(bytes: Buffer, transport: Transport = "udp"): string {
  const verdict = answerQuery(bytes, transport, ZONE, RECORDS);
  if (verdict.kind !== "drop") throw new Error(`answered with ${verdict.rcode}`);
  return verdict.reason;
}

const has = (p: DecodedPacket, flag: number) => (p.flags! & flag) !== 0;
const txtOf = (answers: Answer[] = []) => answers.map((a) => (a.type === "TXT" ? Buffer.concat([a.data].flat().map((d) => Buffer.from(d))).toString() : a.type));

/** A header with these counts, and whatever bytes follow. */
function rawMessage(counts: [number, number, number, number], rest: number[] = [], flags = 0x0100): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(0xbeef, 0);
  header.writeUInt16BE(flags, 2);
  counts.forEach((n, i) => header.writeUInt16BE(n, 4 + 2 * i));
  return Buffer.concat([header, Buffer.from(rest)]);
}

describe("answers for the zone", () => {
  test("TXT for the zone's name: the pending values, authoritative, no recursion, short TTL, id and RD echoed", () => {
    const { packet, rcode } = answer(query(ZONE.name, { id: 4242 }));
    expect(rcode).toBe(Rcode.NOERROR);
    expect(packet.id).toBe(4242);
    expect(has(packet, AUTHORITATIVE_ANSWER)).toBe(true);
    expect(has(packet, RECURSION_AVAILABLE)).toBe(false);
    expect(has(packet, RECURSION_DESIRED)).toBe(true);
    expect(txtOf(packet.answers)).toEqual(VALUES);
    expect(packet.answers!.every((a) => a.type === "TXT" && a.ttl === TXT_TTL_S)).toBe(true);
    expect(packet.authorities).toEqual([]);
  });

  test("the question's letter case comes back as asked (0x20), in the question, the answers and the SOA's owner", () => {
    const asked = "_AcMe-ChAlLeNgE.TuNnElS.eXaMpLe.CoM";
    const { packet } = answer(query(asked));
    expect(packet.questions![0]!.name).toBe(asked);
    expect(packet.answers!.map((a) => a.name)).toEqual([asked, asked]);
    const nodata = answer(query(`X.${asked}`, { type: "A" })).packet;
    expect(nodata.questions![0]!.name).toBe(`X.${asked}`);
    expect(nodata.authorities![0]!.name).toBe(asked);
  });

  test("no pending value, or another type: NOERROR with no answer and the SOA in authority (NODATA)", () => {
    for (const [name, type] of [
      [ZONE.name, "A"],
      [ZONE.name, "AAAA"],
      [ZONE.name, "CNAME"],
      [ZONE.name, "UNKNOWN_65"], // HTTPS, a type dns-packet has no name for
    ] as const) {
      const { packet, rcode } = answer(query(name, { type }));
      expect(rcode).toBe(Rcode.NOERROR);
      expect(has(packet, AUTHORITATIVE_ANSWER)).toBe(true);
      expect(packet.answers).toEqual([]);
      const soa = packet.authorities![0]!;
      expect(soa.type).toBe("SOA");
      if (soa.type !== "SOA") throw new Error("no SOA");
      expect(soa.name).toBe(ZONE.name);
      expect(soa.ttl).toBe(NEGATIVE_TTL_S);
      expect(soa.data.mname).toBe(ZONE.nameserver);
      expect(soa.data.minimum).toBe(NEGATIVE_TTL_S);
    }
    const empty = answer(query(ZONE.name), "udp", { txt: () => [] });
    expect(empty.rcode).toBe(Rcode.NOERROR);
    expect(empty.packet.answers).toEqual([]);
    expect(empty.packet.authorities![0]!.type).toBe("SOA");
  });

  test("a name below the zone's name that holds nothing is NODATA too, never NXDOMAIN", () => {
    for (const name of [`x.${ZONE.name}`, `a.b.c.${ZONE.name}`]) {
      const { packet, rcode } = answer(query(name));
      expect(rcode).toBe(Rcode.NOERROR);
      expect(packet.answers).toEqual([]);
      expect(packet.authorities![0]!.type).toBe("SOA");
    }
  });

  test("SOA and NS of the zone's name are answered; below it they are NODATA", () => {
    const soa = answer(query(ZONE.name, { type: "SOA" })).packet;
    expect(soa.answers!.map((a) => a.type)).toEqual(["SOA"]);
    const ns = answer(query(ZONE.name, { type: "NS" })).packet;
    expect(ns.answers).toMatchObject([{ type: "NS", name: ZONE.name, data: ZONE.nameserver }]);
    expect(has(ns, AUTHORITATIVE_ANSWER)).toBe(true);
    for (const type of ["SOA", "NS"]) {
      const below = answer(query(`x.${ZONE.name}`, { type })).packet;
      expect(below.answers).toEqual([]);
      expect(below.authorities!.map((a) => a.type)).toEqual(["SOA"]);
    }
  });

  test("ANY is answered with the TXT values (RFC 8482)", () => {
    expect(txtOf(answer(query(ZONE.name, { type: "ANY" })).packet.answers)).toEqual(VALUES);
  });

  test("at most MAX_TXT_VALUES answers, and no value longer than a short TXT string", () => {
    const many = { txt: () => ["a".repeat(300), ...Array.from({ length: 10 }, (_, i) => `v${i}`)] };
    expect(txtOf(answer(query(ZONE.name), "tcp", many).packet.answers)).toEqual(["v0", "v1", "v2", "v3"].slice(0, MAX_TXT_VALUES));
  });
});

describe("refusals and errors", () => {
  test("a name outside the zone is REFUSED, not authoritative, without recursion, with the question echoed", () => {
    for (const name of ["example.com", "tunnels.example.com", "x.tunnels.example.com", `x${ZONE.name}`, "com", "."]) {
      const { packet, rcode, bytes } = answer(query(name, { type: "A" }));
      expect(rcode).toBe(Rcode.REFUSED);
      expect(has(packet, AUTHORITATIVE_ANSWER)).toBe(false);
      expect(has(packet, RECURSION_AVAILABLE)).toBe(false);
      expect(packet.answers).toEqual([]);
      expect(packet.questions![0]!.name).toBe(name === "." ? "." : name);
      // never bigger than the question: nothing for a forged source to amplify
      expect(bytes.length).toBeLessThanOrEqual(query(name, { type: "A" }).length);
    }
  });

  test("a class other than IN and zone transfers are REFUSED", () => {
    expect(answer(query(ZONE.name, { class: "CH" })).rcode).toBe(Rcode.REFUSED);
    expect(answer(query("version.bind", { class: "CH" })).rcode).toBe(Rcode.REFUSED);
    expect(answer(query(ZONE.name, { type: "AXFR" }), "tcp").rcode).toBe(Rcode.REFUSED);
    expect(answer(query(ZONE.name, { type: "IXFR" })).rcode).toBe(Rcode.REFUSED);
  });

  test("opcodes other than QUERY get NOTIMP, the opcode echoed, a header alone", () => {
    for (const opcode of [1, 2, 4, 5, 15]) {
      const bytes = query(ZONE.name);
      bytes.writeUInt16BE((opcode << 11) | RECURSION_DESIRED, 2);
      const { packet, rcode, bytes: out } = answer(bytes);
      expect(rcode).toBe(Rcode.NOTIMP);
      expect((packet.flags! >> 11) & 0xf).toBe(opcode);
      expect(out.length).toBe(12);
    }
  });

  test("a question count other than one, or records a query has not, are FORMERR", () => {
    const question = [...query(ZONE.name).subarray(12)];
    for (const counts of [
      [0, 0, 0, 0],
      [2, 0, 0, 0],
      [65535, 0, 0, 0],
      [1, 1, 0, 0],
      [1, 0, 1, 0],
      [1, 0, 0, 2],
    ] as [number, number, number, number][]) {
      const { packet, rcode, bytes } = answer(rawMessage(counts, question));
      expect(rcode).toBe(Rcode.FORMERR);
      expect(packet.id).toBe(0xbeef);
      expect(bytes.length).toBe(12);
    }
    // one additional record that is not OPT (as a TSIG would be)
    const withA = encode({
      type: "query",
      id: 7,
      questions: [{ name: ZONE.name, type: "TXT" }],
      additionals: [{ name: "x.example", type: "A", ttl: 0, data: "192.0.2.1" }],
    });
    expect(answer(withA).rcode).toBe(Rcode.FORMERR);
  });

  test("EDNS: the answer carries OPT with burrow's size; a version other than 0 is BADVERS", () => {
    const { opt, rcode } = answer(query(ZONE.name, { edns: { udpPayloadSize: 4096 } }));
    expect(rcode).toBe(Rcode.NOERROR);
    expect(opt?.udpPayloadSize).toBe(EDNS_UDP_MAX);
    expect(opt?.ednsVersion).toBe(0);
    const bad = answer(query(ZONE.name, { edns: { ednsVersion: 1 } }));
    expect(bad.rcode).toBe(Rcode.BADVERS);
    expect(bad.packet.answers).toEqual([]);
  });

  test("CD is echoed like RD, and never a flag the query did not set", () => {
    const { packet } = answer(query(ZONE.name, { flags: CHECKING_DISABLED }));
    expect(has(packet, CHECKING_DISABLED)).toBe(true);
    expect(has(packet, RECURSION_DESIRED)).toBe(false);
  });
});

describe("truncation over UDP", () => {
  // a long zone name and long values: four answers take more than 512 bytes
  const long: Zone = { name: `_acme-challenge.${"a".repeat(60)}.${"b".repeat(60)}.example.com`, nameserver: "ns.example.com", hostmaster: "h.example.com" };
  const four = { txt: () => ["1", "2", "3", "4"].map((d) => d.repeat(64)) };

  test("without EDNS an answer over 512 bytes is cut to its question with TC; over TCP it is whole", () => {
    const q = query(long.name);
    const udp = answer(q, "udp", four, long);
    expect(udp.truncated).toBe(true);
    expect(has(udp.packet, TRUNCATED_RESPONSE)).toBe(true);
    expect(udp.packet.answers).toEqual([]);
    expect(udp.packet.questions![0]!.name).toBe(long.name);
    expect(udp.bytes.length).toBeLessThanOrEqual(q.length);
    const tcp = answer(q, "tcp", four, long);
    expect(tcp.truncated).toBe(false);
    expect(tcp.packet.answers).toHaveLength(4);
    expect(tcp.bytes.length).toBeGreaterThan(PLAIN_UDP_MAX);
  });

  test("with EDNS the client's size counts, at least 512 and at most EDNS_UDP_MAX", () => {
    expect(answer(query(long.name, { edns: { udpPayloadSize: 1232 } }), "udp", four, long).truncated).toBe(false);
    expect(answer(query(long.name, { edns: { udpPayloadSize: 65535 } }), "udp", four, long).truncated).toBe(false);
    expect(answer(query(long.name, { edns: { udpPayloadSize: 600 } }), "udp", four, long).truncated).toBe(true);
    expect(answer(query(long.name, { edns: { udpPayloadSize: 100 } }), "udp", four, long).truncated).toBe(true);
    // a small answer with a tiny offered size is sent whole: 512 is every client's floor
    expect(answer(query(ZONE.name, { edns: { udpPayloadSize: 100 } })).truncated).toBe(false);
  });
});

describe("messages that are dropped", () => {
  test("a response, a short message, a message over the cap, bytes past the end", () => {
    const response = query(ZONE.name);
    response.writeUInt16BE(0x8000 | RECURSION_DESIRED, 2);
    expect(dropped(response)).toContain("response");
    expect(dropped(Buffer.from([1, 2, 3]))).toContain("shorter");
    expect(dropped(query(ZONE.name).subarray(0, 20))).toContain("undecodable");
    expect(dropped(Buffer.concat([query(ZONE.name), Buffer.from([0])]))).toContain("past the end");
    const padded = query(ZONE.name, { edns: { options: [{ code: 12, length: MAX_QUERY_BYTES }] } });
    expect(dropped(padded)).toContain("longer than");
    // padded to just under the cap, with EDNS: a query, answered
    const fits = query(ZONE.name, { edns: { options: [{ code: 12, length: 900 }] } });
    expect(fits.length).toBeGreaterThan(PLAIN_UDP_MAX);
    expect(answer(fits).rcode).toBe(Rcode.NOERROR);
  });

  test("a label holding a dot, bytes that are not UTF-8, and compression pointers are not read as names", () => {
    const question = (labels: Buffer[]) => rawMessage([1, 0, 0, 0], [...Buffer.concat([...labels, Buffer.from([0, 0, 16, 0, 1])])]);
    const label = (bytes: Buffer) => Buffer.concat([Buffer.from([bytes.length]), bytes]);
    const zoneLabels = ZONE.name.split(".").map((l) => label(Buffer.from(l)));
    // sanity: the same name built by hand is answered
    expect(answer(question(zoneLabels)).rcode).toBe(Rcode.NOERROR);
    // "_acme-challenge.tunnels" as one label, which would read as the zone's name
    const [, , ...rest] = zoneLabels;
    expect(dropped(question([label(Buffer.from("_acme-challenge.tunnels")), ...rest]))).toContain("written back");
    expect(dropped(question([label(Buffer.from([0xff, 0xfe])), ...zoneLabels]))).toContain("written back");
    // a pointer into the header, a pointer to itself, a pointer forward
    for (const pointer of [[0xc0, 0x00], [0xc0, 0x0c], [0xc0, 0x20]]) {
      expect(answerQuery(rawMessage([1, 0, 0, 0], [...pointer, 0, 16, 0, 1]), "udp", ZONE, RECORDS).kind).toBe("drop");
    }
    // a label length with the reserved bits 01 or 10
    expect(dropped(rawMessage([1, 0, 0, 0], [0x41, 0x61, 0, 0, 16, 0, 1]))).toContain("undecodable");
  });

  test("random bytes and mutated queries never throw, and every answer is a well-formed response", () => {
    const valid = [query(ZONE.name), query(ZONE.name, { edns: {} }), query("example.com"), query(`x.${ZONE.name}`, { type: "SOA" })];
    const check = (bytes: Uint8Array, transport: Transport) => {
      const verdict = answerQuery(Buffer.from(bytes), transport, ZONE, RECORDS);
      if (verdict.kind === "answer") {
        const packet = decode(verdict.bytes);
        expect(packet.type).toBe("response");
        expect(has(packet, RECURSION_AVAILABLE)).toBe(false);
        if (transport === "udp") expect(verdict.bytes.length).toBeLessThanOrEqual(EDNS_UDP_MAX);
      }
    };
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), fc.constantFrom<Transport>("udp", "tcp"), (bytes, transport) => check(bytes, transport)),
      fuzzParams(2000, 5_000),
    );
    fc.assert(
      fc.property(
        fc.constantFrom(...valid),
        fc.array(fc.tuple(fc.nat(), fc.integer({ min: 0, max: 255 })), { minLength: 1, maxLength: 6 }),
        fc.nat(40),
        (base, flips, cut) => {
          const bytes = Buffer.from(base);
          for (const [at, value] of flips) bytes[at % bytes.length] = value;
          check(bytes.subarray(0, Math.max(0, bytes.length - cut)), "udp");
        },
      ),
      fuzzParams(5000, 5_000),
    );
  });
});
