/**
 * One DNS question asked of one server, over UDP or TCP, and what came
 * back: the response code, the AA bit and the SOA records in it. This is
 * what `burrow server dns-check` uses to ask burrow's own responder directly
 * (no resolver in between, so "nothing answers" means nothing answers), and
 * to read the exact response code a resolver gives (Bun's resolver reports
 * NXDOMAIN and NODATA alike as ENOTFOUND).
 */
import { randomInt } from "node:crypto";
import { isIPv6 } from "node:net";
import { RECURSION_DESIRED, decode, encode, type DecodedPacket, type RecordType, type SoaData } from "dns-packet";
import { HEADER_LENGTH, TCP_LENGTH_PREFIX } from "./wire.ts";

/** RFC 1035 4.1.1 and RFC 6895 2.3: the codes a probe may meet, by number. */
const RCODE_NAMES: Record<number, string> = { 0: "NOERROR", 1: "FORMERR", 2: "SERVFAIL", 3: "NXDOMAIN", 4: "NOTIMP", 5: "REFUSED" };
/** The largest answer read, whatever the transport: a probe asks one small question. */
const MAX_ANSWER_BYTES = 65_535;

export type ProbeTransport = "udp" | "tcp";

export type ProbeAnswer =
  | { kind: "answer"; rcode: string; authoritative: boolean; answers: number; soa: SoaData[] }
  /** Nothing usable came back: refused connection, timeout, garbage. */
  | { kind: "silent"; error: string };

export interface ProbeQuestion {
  name: string;
  type: RecordType;
  /** Ask for recursion (a resolver); off for an authoritative server. */
  recursive: boolean;
}

export async function probeDns(
  address: string,
  port: number,
  question: ProbeQuestion,
  transport: ProbeTransport,
  timeoutMs: number,
): Promise<ProbeAnswer> {
  const id = randomInt(0, 0x10000);
  const query = encode({
    type: "query",
    id,
    flags: question.recursive ? RECURSION_DESIRED : 0,
    questions: [{ name: question.name, type: question.type, class: "IN" }],
  });
  let bytes: Buffer;
  try {
    bytes = await (transport === "udp" ? askUdp(address, port, query, id, timeoutMs) : askTcp(address, port, query, timeoutMs));
  } catch (err) {
    return { kind: "silent", error: errorText(err, transport) };
  }
  return readAnswer(bytes, id);
}

/** The parts of an answer a check reads; garbage, or an answer to another question, is silence. */
export function readAnswer(bytes: Buffer, id: number): ProbeAnswer {
  if (bytes.length < HEADER_LENGTH || bytes.readUInt16BE(0) !== id) return { kind: "silent", error: "an answer that is not to this question" };
  let packet: DecodedPacket;
  try {
    packet = decode(bytes);
  } catch (err) {
    return { kind: "silent", error: `an undecodable answer: ${(err as Error).message}` };
  }
  const code = bytes.readUInt16BE(2) & 0xf;
  const records = [...(packet.answers ?? []), ...(packet.authorities ?? [])];
  return {
    kind: "answer",
    rcode: RCODE_NAMES[code] ?? `RCODE${code}`,
    authoritative: packet.flag_aa,
    answers: packet.answers?.length ?? 0,
    soa: records.flatMap((r) => (r.type === "SOA" ? [r.data] : [])),
  };
}

/** What went wrong, in a few words; Bun reports some socket errors (an ICMP "port unreachable" over UDP) without an Error. */
function errorText(err: unknown, transport: ProbeTransport): string {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (err instanceof Error && err.message !== "") return typeof code === "string" && !err.message.includes(code) ? `${err.message} (${code})` : err.message;
  return err === undefined || err === null ? `${transport.toUpperCase()} socket error (port closed?)` : String(err);
}

/** A timer rejecting `reject` after `ms`, for each transport to clear once it is done (its socket closed either way). */
function deadline(ms: number, reject: (err: Error) => void): Timer {
  return setTimeout(() => reject(new Error(`no answer within ${ms / 1000} s`)), ms);
}

/** One datagram out, the first datagram back with our id (the id is random: a stray datagram will not match). */
async function askUdp(address: string, port: number, query: Buffer, id: number, timeoutMs: number): Promise<Buffer> {
  const { promise, resolve, reject } = Promise.withResolvers<Buffer>();
  promise.catch(() => {}); // a failure before anyone awaits it is reported by the await below, not as unhandled
  const timer = deadline(timeoutMs, reject);
  const socket = await Bun.udpSocket({
    hostname: isIPv6(address) ? "::" : "0.0.0.0",
    socket: {
      data(_s, data) {
        if (data.length >= 2 && data.readUInt16BE(0) === id) resolve(Buffer.from(data));
      },
      error(_s, err) {
        reject(err);
      },
    },
  });
  try {
    if (!socket.send(query, port, address)) throw new Error("the query could not be sent");
    return await promise;
  } finally {
    clearTimeout(timer);
    socket.close();
  }
}

/** The query with its length prefix; the answer is the first length-prefixed message back. */
async function askTcp(address: string, port: number, query: Buffer, timeoutMs: number): Promise<Buffer> {
  const { promise, resolve, reject } = Promise.withResolvers<Buffer>();
  promise.catch(() => {}); // as above
  const timer = deadline(timeoutMs, reject);
  let done = false;
  let got = Buffer.alloc(0);
  const framed = Buffer.alloc(TCP_LENGTH_PREFIX + query.length);
  framed.writeUInt16BE(query.length, 0);
  query.copy(framed, TCP_LENGTH_PREFIX);
  const connecting = Bun.connect({
    hostname: address,
    port,
    socket: {
      open(s) {
        if (done) s.end(); // connected only after the deadline
        else s.write(framed);
      },
      data(_s, data) {
        got = Buffer.concat([got, data]);
        if (got.length >= TCP_LENGTH_PREFIX) {
          const length = got.readUInt16BE(0);
          if (got.length >= TCP_LENGTH_PREFIX + length) resolve(got.subarray(TCP_LENGTH_PREFIX, TCP_LENGTH_PREFIX + length));
        }
        if (got.length > TCP_LENGTH_PREFIX + MAX_ANSWER_BYTES) reject(new Error("an answer longer than DNS allows"));
      },
      close() {
        reject(new Error("the connection closed without an answer"));
      },
      error(_s, err) {
        reject(err);
      },
      connectError(_s, err) {
        reject(err);
      },
    },
  });
  connecting.catch((err: unknown) => reject(new Error(`connection failed: ${errorText(err, "tcp")}`)));
  try {
    await Promise.race([connecting.catch(() => {}), promise]); // a failed connect rejects `promise` with its reason
    return await promise;
  } finally {
    done = true;
    clearTimeout(timer);
    connecting.then((s) => s.end(), () => {});
  }
}
