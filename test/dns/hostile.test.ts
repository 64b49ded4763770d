/**
 * The challenge responder against hostile and careless clients, on raw
 * sockets (127.0.0.1, ephemeral ports): bytes that are no DNS message,
 * oversized datagrams, a flood from one address, TCP length prefixes that
 * promise more than comes, slow and idle connections, too many of them,
 * pipelining and chunking. "Nothing came back" is judged without sleeping:
 * a good query sent after the bad ones is answered, and UDP over loopback
 * keeps order, so whatever the bad ones drew would have come first.
 */
import { describe, expect, test } from "bun:test";
import type { Socket } from "bun";
import { RECURSION_DESIRED, decode, encode, type DecodedPacket, type OptAnswer } from "dns-packet";
import { ChallengeRecords } from "../../src/dns/challenge-records.ts";
import { startDnsResponder, type DnsResponderOptions } from "../../src/dns/responder.ts";
import { DEFAULT_DNS_LIMITS, Rcode } from "../../src/dns/wire.ts";
import { deferred, waitUntil, within } from "../harness/wait.ts";

const ZONE = "_acme-challenge.tunnels.example.com";
const records = new ChallengeRecords();
records.add(ZONE, "LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0");

function start(opts: Partial<DnsResponderOptions> = {}) {
  const faults: string[] = [];
  return startDnsResponder({ host: "127.0.0.1", port: 0, zone: ZONE, records, log: (msg) => faults.push(msg), ...opts });
}

function query(id: number, name = ZONE, padding = 0): Buffer {
  const opt: OptAnswer[] = padding > 0 ? [{ name: ".", type: "OPT", udpPayloadSize: 1232, extendedRcode: 0, ednsVersion: 0, flags: 0, flag_do: false, options: [{ code: 12, length: padding }] }] : [];
  return encode({ type: "query", id, flags: RECURSION_DESIRED, questions: [{ name, type: "TXT" }], additionals: opt });
}

const framed = (message: Buffer) => Buffer.concat([Buffer.from([message.length >> 8, message.length & 0xff]), message]);
const rcodeOf = (p: DecodedPacket) => p.flags! & 0xf;

async function udpClient() {
  const received: Buffer[] = [];
  const socket = await Bun.udpSocket({ hostname: "127.0.0.1", port: 0, socket: { data: (_s, data) => void received.push(Buffer.from(data)) } });
  const ids = () => received.filter((b) => b.length >= 2).map((b) => b.readUInt16BE(0));
  return {
    received,
    ids,
    send: (bytes: Uint8Array, port: number) => socket.send(bytes, port, "127.0.0.1"),
    /** The answer to query `id`, once it has come (5 s at most). */
    async answerTo(id: number): Promise<DecodedPacket> {
      await waitUntil(() => ids().includes(id), 5_000, `the answer to query ${id}`, 5);
      return decode(received.find((b) => b.readUInt16BE(0) === id)!);
    },
    [Symbol.dispose]: () => socket.close(),
  };
}

/** A raw TCP connection that collects framed answers and tells when the server has closed it. */
async function tcpClient(port: number) {
  let pending = Buffer.alloc(0);
  const answers: DecodedPacket[] = [];
  const closed = deferred<void>();
  let isClosed = false;
  const socket: Socket<undefined> = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      data(_s, chunk) {
        pending = Buffer.concat([pending, chunk]);
        while (pending.length >= 2 && pending.length >= 2 + pending.readUInt16BE(0)) {
          answers.push(decode(pending.subarray(2, 2 + pending.readUInt16BE(0))));
          pending = pending.subarray(2 + pending.readUInt16BE(0));
        }
      },
      close() {
        isClosed = true;
        closed.resolve();
      },
      error() {},
    },
  });
  return {
    socket,
    answers,
    closed: closed.promise,
    isClosed: () => isClosed,
    [Symbol.dispose]: () => socket.end(),
  };
}

describe("UDP", () => {
  test("garbage, a response, a cut or ambiguous query and a 4 KiB datagram draw nothing; the responder goes on", async () => {
    using responder = await start();
    using client = await udpClient();
    const response = query(0xbbbb);
    response.writeUInt16BE(0x8000, 2);
    const big = Buffer.alloc(4096, 0x41);
    query(0xaaaa).copy(big);
    const dotted = Buffer.from(query(0xdddd));
    dotted[1 + 12 + "_acme-challenge".length] = ".".charCodeAt(0); // "_acme-challenge.tunnels" as one label: the same bytes, save one
    dotted[12] = "_acme-challenge.tunnels".length;
    const bad = [Buffer.from([1, 2, 3]), response, big, query(0xcccc).subarray(0, 20), dotted, Buffer.concat([query(0xeeee), Buffer.alloc(3)])];
    for (const bytes of bad) client.send(bytes, responder.udpPort);
    client.send(query(1), responder.udpPort);
    const canary = await client.answerTo(1);
    expect(rcodeOf(canary)).toBe(Rcode.NOERROR);
    expect(canary.answers).toHaveLength(1);
    expect(client.ids()).toEqual([1]);
    expect(responder.counters.dropped).toBe(bad.length);
  });

  test("two questions: FORMERR; another opcode: NOTIMP; each a bare header no longer than the query", async () => {
    using responder = await start();
    using client = await udpClient();
    const two = encode({ type: "query", id: 2, questions: [{ name: ZONE, type: "TXT" }, { name: ZONE, type: "A" }] });
    client.send(two, responder.udpPort);
    const formerr = await client.answerTo(2);
    expect(rcodeOf(formerr)).toBe(Rcode.FORMERR);
    const notify = query(3);
    notify.writeUInt16BE(4 << 11, 2);
    client.send(notify, responder.udpPort);
    expect(rcodeOf(await client.answerTo(3))).toBe(Rcode.NOTIMP);
    expect(client.received.every((b) => b.length === 12)).toBe(true);
  });

  test("an EDNS query padded past 512 bytes is answered; one past the 1232-byte cap is not", async () => {
    using responder = await start();
    using client = await udpClient();
    const fits = query(4, ZONE, 900);
    expect(fits.length).toBeGreaterThan(512);
    client.send(query(5, ZONE, 1300), responder.udpPort);
    client.send(fits, responder.udpPort);
    expect(rcodeOf(await client.answerTo(4))).toBe(Rcode.NOERROR);
    expect(client.ids()).toEqual([4]);
  });

  test("a burst of 200 queries from one address draws at most its burst and rate; another address is still answered", async () => {
    using responder = await start();
    using flood = await udpClient();
    const began = performance.now();
    for (let id = 0; id < 200; id++) flood.send(query(id), responder.udpPort);
    const { counters } = responder;
    await waitUntil(() => counters.answered + counters.limited === 200, 5_000, "all 200 queries seen", 5);
    const seconds = (performance.now() - began) / 1000;
    await waitUntil(() => flood.received.length === counters.answered, 2_000, "every answer sent to arrive", 5);
    const { perClientBurst, perClientPerSecond } = DEFAULT_DNS_LIMITS;
    expect(counters.answered).toBeGreaterThanOrEqual(perClientBurst);
    expect(counters.answered).toBeLessThanOrEqual(perClientBurst + Math.ceil(perClientPerSecond * seconds));
    expect(counters.limited).toBe(200 - counters.answered);
    // a client on another address (127.0.0.2 is loopback too) has its own bucket
    const answered = deferred<void>();
    const other = await Bun.udpSocket({ hostname: "127.0.0.2", port: 0, socket: { data: () => answered.resolve() } }).catch(() => undefined);
    if (other) {
      other.send(query(999), responder.udpPort, "127.0.0.1");
      await within(answered.promise, 5_000, "an answer to another address");
      other.close();
    }
  });
});

describe("TCP", () => {
  test("queries pipelined in one write, and one sent a byte at a time, are all answered in order", async () => {
    using responder = await start();
    using client = await tcpClient(responder.tcpPort);
    client.socket.write(Buffer.concat([framed(query(1)), framed(query(2)), framed(query(3))]));
    const slow = framed(query(4));
    for (const byte of slow) {
      client.socket.write(Buffer.from([byte]));
      await Bun.sleep(1);
    }
    await waitUntil(() => client.answers.length === 4, 5_000, "four answers");
    expect(client.answers.map((a) => a.id)).toEqual([1, 2, 3, 4]);
    expect(client.answers.every((a) => a.answers!.length === 1)).toBe(true);
    expect(client.isClosed()).toBe(false);
  });

  test("a length prefix of 65535, or shorter than a header, closes the connection as soon as it is read", async () => {
    using responder = await start();
    for (const prefix of [[0xff, 0xff, 1, 2, 3], [0x00, 0x05, 1, 2, 3, 4, 5]]) {
      using client = await tcpClient(responder.tcpPort);
      client.socket.write(Buffer.from(prefix));
      await within(client.closed, 2_000, `the server closing after prefix ${prefix.slice(0, 2)}`);
    }
    expect(responder.counters.dropped).toBe(2);
    await waitUntil(() => responder.tcpOpen === 0, 2_000, "both connections released");
  });

  test("a malformed message closes the connection; a FORMERR one is answered and the connection goes on", async () => {
    using responder = await start();
    using client = await tcpClient(responder.tcpPort);
    const two = encode({ type: "query", id: 7, questions: [{ name: ZONE, type: "TXT" }, { name: ZONE, type: "A" }] });
    client.socket.write(Buffer.concat([framed(two), framed(query(8))]));
    await waitUntil(() => client.answers.length === 2, 5_000, "two answers");
    expect(client.answers.map(rcodeOf)).toEqual([Rcode.FORMERR, Rcode.NOERROR]);
    client.socket.write(framed(Buffer.concat([query(9), Buffer.from([0])]))); // a byte past the end
    await within(client.closed, 2_000, "the server closing on a malformed message");
    expect(client.answers).toHaveLength(2);
  });

  test("a client that completes no query within the idle time is closed, trickling bytes or not", async () => {
    const tcpIdleMs = 400;
    using responder = await start({ limits: { tcpIdleMs } });
    using idle = await tcpClient(responder.tcpPort);
    using trickler = await tcpClient(responder.tcpPort);
    const began = performance.now();
    const message = framed(query(1, ZONE, 200));
    // a byte every 250 ms, well inside the idle time, for 10 s: were bytes to count, the trickler would stay
    for (let i = 0; i < 40 && !trickler.isClosed(); i++) {
      trickler.socket.write(message.subarray(i, i + 1));
      await Bun.sleep(250);
    }
    await within(Promise.all([idle.closed, trickler.closed]), 12_000, "both connections closed");
    const elapsed = performance.now() - began;
    expect(elapsed).toBeGreaterThanOrEqual(tcpIdleMs - 50);
    // closed at the idle time; ten times that leaves room for a loaded machine, and is far from the trickle's 10 s
    expect(elapsed).toBeLessThan(tcpIdleMs * 10);
    expect(trickler.answers).toEqual([]);
    await waitUntil(() => responder.tcpOpen === 0, 2_000, "both connections released");
  });

  test("a query answered restarts the idle time", async () => {
    // long enough that a loaded machine's stalls (the suite runs files in parallel) stay inside each half
    const tcpIdleMs = 2_000;
    using responder = await start({ limits: { tcpIdleMs } });
    using client = await tcpClient(responder.tcpPort);
    for (let id = 1; id <= 4; id++) {
      client.socket.write(framed(query(id)));
      await waitUntil(() => client.answers.length === id, 10_000, `answer ${id}`);
      await Bun.sleep(tcpIdleMs / 2); // four of these outlast one idle time
    }
    expect(client.isClosed()).toBe(false);
  });

  test("connections over the per-client limit are closed at once; closing one makes room", async () => {
    using responder = await start({ limits: { tcpPerClient: 2 } });
    const first = await tcpClient(responder.tcpPort);
    using second = await tcpClient(responder.tcpPort);
    await waitUntil(() => responder.tcpOpen === 2, 2_000, "two connections open");
    using third = await tcpClient(responder.tcpPort);
    await within(third.closed, 2_000, "the third connection closed");
    expect(responder.counters.refused).toBe(1);
    first.socket.end();
    await waitUntil(() => responder.tcpOpen === 1, 2_000, "the first connection released");
    using fourth = await tcpClient(responder.tcpPort);
    fourth.socket.write(framed(query(5)));
    await waitUntil(() => fourth.answers.length === 1, 2_000, "the fourth connection answered");
    expect(second.isClosed()).toBe(false);
  });

  test("a client over the answer rate is closed after its burst", async () => {
    using responder = await start();
    using client = await tcpClient(responder.tcpPort);
    const burst = DEFAULT_DNS_LIMITS.perClientBurst;
    client.socket.write(Buffer.concat(Array.from({ length: burst * 2 }, (_, i) => framed(query(i)))));
    await within(client.closed, 2_000, "the server closing the connection");
    expect(client.answers.length).toBeLessThanOrEqual(burst + 1);
    expect(responder.counters.limited).toBe(1);
  });

  test("stop() closes open connections and frees the port for UDP and TCP", async () => {
    const responder = await start();
    using client = await tcpClient(responder.tcpPort);
    await waitUntil(() => responder.tcpOpen === 1, 2_000, "the connection open");
    responder.stop();
    await within(client.closed, 2_000, "the connection closed by stop()");
    using again = await start({ port: responder.udpPort });
    expect(again.tcpPort).toBe(responder.udpPort);
  });
});
