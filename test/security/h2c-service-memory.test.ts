/**
 * Memory an HTTP/2 service (--upstream-protocol h2c) can make the agent
 * hold. The agent's connection to the service is bounded whatever the
 * service sends: a header block that decodes to a huge list (an HPACK
 * bomb) is refused while it decodes, a header block that never ends (a
 * CONTINUATION flood) ends the connection, DATA past a window the agent
 * gave is a flow-control error, and a service that does not read the
 * request body leaves the upload waiting in the visitor's tunnel stream,
 * within its credit, not in the agent. Each case is a 502 (or a cut
 * answer) that says why, and the connection serves on where HTTP/2 allows.
 */
import { describe, expect, test } from "bun:test";
import { DEFAULT_H2_CLIENT_LIMITS } from "../../src/http2/client-limits.ts";
import { data, frame, FrameType, headers, literalBlock } from "../harness/h2-frames.ts";
import { rawH2Server, type RawServerConn } from "../harness/h2-raw-server.ts";
import { cleanedUp, fetchThrough, offerInto, requestHead, until, visit } from "../agent/raw-service.ts";
import { within } from "../protocol/support.ts";

const { tunnel } = cleanedUp();
const h2c = (port: number) => tunnel(port, { target: { upstreamProtocol: "h2c" } });
const pathOf = (fields: [string, string][]) => fields.find(([n]) => n === ":path")![1];
const fine = (conn: RawServerConn, stream: number) => conn.send(headers(stream, [[":status", "200"], ["content-length", "2"]], false), data(stream, "ok", true));

/** A header block that adds one entry of `size` bytes to the table (literal with incremental indexing), then names it `times` times. */
function hpackBomb(size: number, times: number): Uint8Array {
  const name = "x-bomb";
  const value = "a".repeat(size);
  const head = [0x40, name.length, ...Buffer.from(name), 0x7f, ...lengthRest(value.length - 127), ...Buffer.from(value)];
  return Buffer.concat([literalBlock([[":status", "200"]]), Buffer.from(head), Buffer.alloc(times, 0x80 | 62)]);
}

/** The continuation octets of an HPACK integer past a 7-bit prefix's 127. */
function lengthRest(n: number): number[] {
  const out: number[] = [];
  while (n >= 128) {
    out.push((n % 128) | 0x80);
    n = Math.floor(n / 128);
  }
  out.push(n);
  return out;
}

describe("memory a hostile h2c service can make the agent hold", () => {
  test("an HPACK bomb (a 4 KB block naming a 4 KB entry a thousand times) is refused while it decodes; the connection serves on", async () => {
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        if (pathOf(head.fields) === "/bomb") return conn.send(headers(head.stream, hpackBomb(4000, 1000), true));
        fine(conn, head.stream);
      },
    });
    const t = h2c(svc.port);
    const bomb = await fetchThrough(t, { head: requestHead("GET", "/bomb") });
    expect(bomb.reset).toMatch(new RegExp(`UPSTREAM_FAILED the service's response head is larger than ${DEFAULT_H2_CLIENT_LIMITS.maxHeaderListBytes} bytes`));
    // the block was read for the table, which stays in step: the next answer on the same connection decodes
    expect((await fetchThrough(t, { head: requestHead("GET", "/after") })).text).toEndWith("\r\n\r\nok");
    expect(svc.conns).toHaveLength(1);
  });

  test("a header block that never ends (CONTINUATION frames, one after another) ends the connection, and the request is a 502", async () => {
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        conn.send(frame(FrameType.HEADERS, 0, head.stream, literalBlock([[":status", "200"]])));
        for (let i = 0; i < 200; i++) conn.send(frame(FrameType.CONTINUATION, 0, head.stream, new Uint8Array(1000)));
      },
    });
    const res = await fetchThrough(h2c(svc.port));
    expect(res.reset).toMatch(/UPSTREAM_FAILED the service broke HTTP\/2 \(ENHANCE_YOUR_CALM: a header block in more than 64 CONTINUATION frames\)/);
  });

  test("DATA past the window the agent gave the stream is a flow-control error: the answer is cut", async () => {
    // a visitor who does not read: the agent reopens the stream's window only as far as the tunnel stream takes the bytes (512 KiB)
    const frames = Math.ceil((512 * 1024 + DEFAULT_H2_CLIENT_LIMITS.streamWindow) / 16_384) + 4;
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        conn.send(headers(head.stream, [[":status", "200"]], false));
        for (let i = 0; i < frames; i++) conn.send(frame(FrameType.DATA, 0, head.stream, new Uint8Array(16_384)));
      },
    });
    const v = visit(h2c(svc.port), {}, false);
    await svc.until(() => svc.conns[0]?.sent.resets().size === 1, 5_000, "the agent's RST_STREAM");
    expect([...svc.conns[0]!.sent.resets().values()]).toEqual([0x3]); // FLOW_CONTROL_ERROR
    const res = await within(v.outcome, 5_000, "the visitor's stream");
    expect(res.replied).toBe(true);
    expect(res.reset).toMatch(/UPSTREAM_FAILED the service sent past the stream's window/);
  });

  test("a service that does not read a chunked body, its framing in writes of its own: the upload waits in the tunnel stream too", async () => {
    await using svc = rawH2Server({ onHead: (conn, head) => pathOf(head.fields) !== "/upload" && fine(conn, head.stream) });
    const t = h2c(svc.port);
    const upload = visit(t, { head: requestHead("PUT", "/upload", [["Host", "h"], ["Transfer-Encoding", "chunked"]]), body: [], end: false });
    // a chunk's size line, its data and its CRLF, each a write (a chunk of the stream) of its own
    const block = new Uint8Array(16 * 1024);
    let offered = 0;
    const offering = (async () => {
      for (let i = 0; i < 500; i++) {
        for (const piece of [Buffer.from(`${block.length.toString(16)}\r\n`), block, Buffer.from("\r\n")]) {
          offered += piece.byteLength;
          if (!upload.stream.write(piece) && !(await upload.stream.whenDrained())) return;
        }
      }
    })();
    const sent = () => svc.conns[0]?.sent.of(FrameType.DATA).reduce((n, f) => n + f.payload.byteLength, 0) ?? 0;
    await until(() => sent() === 65_535, "the service's window filled");
    for (let i = 0; i < 16; i++) expect((await fetchThrough(t, { head: requestHead("GET", `/other/${i}`) })).text).toEndWith("ok");
    expect(offered).toBeLessThanOrEqual(65_535 + 512 * 1024 + 32 * 1024);
    upload.stream.reset();
    await offering;
  });

  test("a service that does not read the body: the upload waits in the visitor's tunnel stream, not in the agent", async () => {
    // the service's window for the request body stays the protocol's first 65,535 bytes: it never opens it
    await using svc = rawH2Server({ onHead: (conn, head) => pathOf(head.fields) !== "/upload" && fine(conn, head.stream) });
    const t = h2c(svc.port);
    const upload = visit(t, { head: requestHead("PUT", "/upload", [["Host", "h"], ["Content-Length", String(8_000_000)]]), body: [], end: false });
    const offer = offerInto(upload.stream, 8_000_000, new Uint8Array(32 * 1024));
    offer.done.catch(() => {}); // it never ends: the visitor gives up below
    const sent = () => svc.conns[0]?.sent.of(FrameType.DATA).reduce((n, f) => n + f.payload.byteLength, 0) ?? 0;
    await until(() => sent() === 65_535, "the service's window filled");
    // requests on the same tunnel and connection, one after another, each answered: the credit the agent
    // returned before one had reached the visitor's side before its answer did
    for (let i = 0; i < 16; i++) expect((await fetchThrough(t, { head: requestHead("GET", `/other/${i}`) })).text).toEndWith("ok");
    // what the visitor could send: the service's window, the tunnel stream's credit (512 KiB), one block more
    expect(offer.offered()).toBeLessThanOrEqual(65_535 + 512 * 1024 + 32 * 1024);
    expect(sent()).toBe(65_535);
    upload.stream.reset();
  });
});
