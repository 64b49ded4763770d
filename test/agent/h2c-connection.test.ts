/**
 * The agent's one HTTP/2 connection to an h2c service, under load and when
 * things go wrong: every request a stream of the one connection, no more
 * streams at once than the service's SETTINGS allow (the rest wait their
 * turn), another connection when the service closes or leaves one, a
 * request the service resets answered 502 with why (and one it never
 * processed sent once more), and credit both ways: the bytes the agent
 * holds for a visitor who does not read, or for a service that does not,
 * stay within the windows. The services are the HTTP/2 engine of
 * src/http2/ (a real peer with its own limits) and a hand-made one.
 */
import { describe, expect, test } from "bun:test";
import { createHash } from "node:crypto";
import { data, ErrorCode, goaway, headers, rstStream } from "../harness/h2-frames.ts";
import { startH2Echo } from "../harness/h2-echo.ts";
import { rawH2Server } from "../harness/h2-raw-server.ts";
import type { H2Service } from "../../src/agent/local-http/h2-services.ts";
import { DEFAULT_H2_CLIENT_LIMITS } from "../../src/http2/client-limits.ts";
import { within } from "../protocol/support.ts";
import { cleanedUp, fetchThrough, requestHead, until, visit, WAIT_MS, type TestTunnel } from "./raw-service.ts";

const { tunnel } = cleanedUp();
const h2c = (port: number): TestTunnel => tunnel(port, { target: { upstreamProtocol: "h2c" } });
/** The tunnel's HTTP/2 connection(s) to the service on `port`. */
const serviceOf = (t: TestTunnel, port: number): H2Service => t.pool.h2.of({ host: "127.0.0.1", port, upstreamProtocol: "h2c" });
const sha = (b: Uint8Array | string) => createHash("sha256").update(b).digest("hex");

/** A chunked response's body, de-chunked. */
function bodyOf(bytes: Buffer): Buffer {
  let at = bytes.indexOf("\r\n\r\n") + 4;
  const parts: Buffer[] = [];
  for (let guard = 0; guard < 1_000_000; guard++) {
    const nl = bytes.indexOf("\r\n", at);
    const size = parseInt(bytes.subarray(at, nl).toString("latin1"), 16);
    if (size === 0) return Buffer.concat(parts);
    parts.push(bytes.subarray(nl + 2, nl + 2 + size));
    at = nl + 2 + size + 2;
  }
  throw new Error("too many chunks");
}

describe("one connection, many streams", () => {
  test("concurrent requests go as streams of one connection", async () => {
    await using echo = await startH2Echo();
    const t = h2c(echo.port);
    const answers = await Promise.all(Array.from({ length: 30 }, (_, i) => fetchThrough(t, { head: requestHead("GET", `/n/${i}`) })));
    expect(answers.map((a) => bodyOf(a.bytes).toString())).toEqual(Array.from({ length: 30 }, (_, i) => `GET /n/${i}\n`));
    expect(serviceOf(t, echo.port).opened).toBe(1);
    expect(echo.requests).toBe(30);
  });

  test("past the service's SETTINGS_MAX_CONCURRENT_STREAMS requests wait their turn instead of being refused", async () => {
    await using echo = await startH2Echo({ limits: { maxConcurrentStreams: 2 } });
    const t = h2c(echo.port);
    // uploads left open: each holds its stream until its body ends
    const visits = Array.from({ length: 6 }, (_, i) =>
      visit(t, { head: requestHead("POST", `/up/${i}`, [["Host", "h"], ["Transfer-Encoding", "chunked"]]), body: [`1\r\n${i}\r\n`], end: false }),
    );
    const service = serviceOf(t, echo.port);
    const open = () => [...echo.connections].reduce((n, c) => n + c.streams.size, 0);
    await until(() => open() === 2 && service.queued === 4, "two streams open at the service, four requests waiting");
    for (const v of visits) v.stream.write(Buffer.from("0\r\n\r\n", "latin1")), v.stream.end();
    const outcomes = await within(Promise.all(visits.map((v) => v.outcome)), WAIT_MS, "every upload's answer");
    expect(outcomes.map((o) => bodyOf(o.bytes).toString())).toEqual(["0", "1", "2", "3", "4", "5"]);
    expect(echo.resets).toEqual([]);
    expect(service.opened).toBe(1);
  });

  test("a connection the service closes is opened again for the next request", async () => {
    await using echo = await startH2Echo();
    const t = h2c(echo.port);
    expect((await fetchThrough(t)).status).toBe(200);
    const service = serviceOf(t, echo.port);
    for (const c of echo.connections) c.close();
    await until(() => service.connections === 0, "the agent to see its connection closed");
    expect((await fetchThrough(t)).status).toBe(200);
    expect(service.opened).toBe(2);
  });

  test("GOAWAY: the request in flight finishes on the old connection, the next one goes on a new connection", async () => {
    await using echo = await startH2Echo();
    const t = h2c(echo.port);
    const upload = visit(t, { head: requestHead("POST", "/up", [["Host", "h"], ["Content-Length", "4"]]), body: ["ab"], end: false });
    await until(() => [...echo.connections].some((c) => c.streams.size === 1), "the upload's stream at the service");
    for (const c of echo.connections) c.goAway();
    const service = serviceOf(t, echo.port);
    const next = await fetchThrough(t, { head: requestHead("GET", "/after") });
    expect(bodyOf(next.bytes).toString()).toBe("GET /after\n");
    expect(service.opened).toBe(2);
    upload.stream.write(Buffer.from("cd"));
    upload.stream.end();
    const first = await within(upload.outcome, WAIT_MS, "the upload's answer");
    expect(first.reset).toBeUndefined();
    expect(bodyOf(first.bytes).toString()).toBe("abcd");
  });
});

describe("what the service refuses or breaks off", () => {
  test("a stream the service resets before answering is the 502 page's reason", async () => {
    await using svc = rawH2Server({ onHead: (conn, head) => conn.send(rstStream(head.stream, ErrorCode.INTERNAL_ERROR)) });
    const t = h2c(svc.port);
    const res = await fetchThrough(t, { head: requestHead("GET", "/boom") });
    expect(res.replied).toBe(false);
    expect(res.reset).toMatch(/UPSTREAM_FAILED.*the service reset the stream \(INTERNAL_ERROR\)/);
    expect(t.logs).toEqual([expect.objectContaining({ path: "/boom", status: "502 (the service reset the stream (INTERNAL_ERROR))" })]);
  });

  test("a stream reset in the middle of its answer cuts the visitor's response", async () => {
    await using svc = rawH2Server({ onHead: (conn, head) => conn.send(headers(head.stream, [[":status", "200"]], false), data(head.stream, "part"), rstStream(head.stream, ErrorCode.CANCEL)) });
    const res = await fetchThrough(h2c(svc.port));
    expect(res.replied).toBe(true);
    expect(res.text).toStartWith("HTTP/1.1 200 OK\r\n");
    expect(res.reset).toMatch(/UPSTREAM_FAILED.*CANCEL/);
  });

  test("REFUSED_STREAM (never processed): the request goes once more; refused twice, it is a 502", async () => {
    let heads = 0;
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        // the first request is refused once; the second always
        const path = head.fields.find(([n]) => n === ":path")![1];
        if ((path === "/once" && ++heads === 1) || path === "/always") return conn.send(rstStream(head.stream, ErrorCode.REFUSED_STREAM));
        conn.send(headers(head.stream, [[":status", "200"], ["content-length", "2"]], false), data(head.stream, "ok", true));
      },
    });
    const t = h2c(svc.port);
    expect((await fetchThrough(t, { head: requestHead("GET", "/once") })).text).toEndWith("\r\n\r\nok");
    const refused = await fetchThrough(t, { head: requestHead("GET", "/always") });
    expect(refused.reset).toMatch(/REFUSED_STREAM/);
    expect(svc.conns.flatMap((c) => c.sent.heads).map((h) => h.fields.find(([n]) => n === ":path")![1])).toEqual(["/once", "/once", "/always", "/always"]);
  });

  test("a GOAWAY that leaves a request out: it goes on the service's next connection", async () => {
    await using svc = rawH2Server({
      onHead: (conn, head) => {
        if (conn === svc.conns[0]) return conn.send(goaway(0, ErrorCode.NO_ERROR));
        conn.send(headers(head.stream, [[":status", "200"], ["content-length", "3"]], false), data(head.stream, "new", true));
      },
    });
    const res = await fetchThrough(h2c(svc.port));
    expect(res.text).toEndWith("\r\n\r\nnew");
    expect(svc.conns).toHaveLength(2);
  });

  test("a service that is not there is the 502 page's reason", async () => {
    const gone = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
    const port = gone.port;
    gone.stop(true);
    const res = await fetchThrough(h2c(port));
    expect(res.reset).toMatch(/UPSTREAM_FAILED.*connection refused/);
  });

  test("a service that answers in HTTP/1.1 is told apart: the 502 says it does not speak h2c, and each request is told", async () => {
    await using svc = rawH2Server({ settings: "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" });
    const t = h2c(svc.port);
    const answers = await Promise.all([fetchThrough(t), fetchThrough(t)]);
    for (const a of answers) expect(a.reset).toMatch(/UPSTREAM_FAILED the service answered in HTTP\/1\.1: it does not speak HTTP\/2 with prior knowledge \(h2c\)/);
  });
});

describe("credit, both ways", () => {
  test("a visitor who does not read: the agent takes no more of the service's answer than the windows allow", async () => {
    await using echo = await startH2Echo();
    const t = h2c(echo.port);
    const total = 4_000_000;
    const v = visit(t, { head: requestHead("GET", `/bytes/${total}`) }, false);
    const stalled = () => [...echo.connections].flatMap((c) => [...c.streams.values()]).find((s) => s.pendingBytes > 0 && s.sendWindow <= 0);
    await until(() => stalled() !== undefined, "the service's stream waiting on its window");
    // requests on the same connection one after another, each answered: a WINDOW_UPDATE the agent sent before one
    // reached the service before it, and the DATA it let go came back before its answer (frames keep their order)
    for (let i = 0; i < 16; i++) expect((await fetchThrough(t, { head: requestHead("GET", `/meanwhile/${i}`) })).status).toBe(200);
    // the tunnel stream's credit (512 KiB) and the agent's window for the stream: nothing more
    expect(stalled()).toBeDefined();
    expect(stalled()!.bytesSent).toBeLessThanOrEqual(512 * 1024 + DEFAULT_H2_CLIENT_LIMITS.streamWindow + 16_384);
    const got: Buffer[] = [];
    v.stream.onData = (chunk) => {
      got.push(Buffer.from(chunk));
      v.stream.consumed(chunk.byteLength);
    };
    await within(v.outcome, WAIT_MS, "the whole answer once the visitor reads");
    expect(Buffer.concat(got).subarray(Buffer.concat(got).indexOf("\r\n\r\n") + 4).length).toBe(total);
  });

  test("an upload larger than every window reaches the service whole, and its echo comes back whole", async () => {
    await using echo = await startH2Echo();
    const t = h2c(echo.port);
    const body = Buffer.alloc(3_000_000);
    for (let i = 0; i < body.length; i++) body[i] = (i * 7) & 0xff;
    const pieces = Array.from({ length: 30 }, (_, i) => body.subarray(i * 100_000, (i + 1) * 100_000));
    const res = await fetchThrough(t, { head: requestHead("PUT", "/echo", [["Host", "h"], ["Content-Length", String(body.length)]]), body: pieces });
    expect(sha(bodyOf(res.bytes))).toBe(sha(body));
  });

  test("both directions stream: each piece of the body is echoed back before the next is sent", async () => {
    await using echo = await startH2Echo();
    const t = h2c(echo.port);
    const v = visit(t, { head: requestHead("POST", "/chat", [["Host", "h"], ["Transfer-Encoding", "chunked"]]), body: [], end: false }, false);
    let got = "";
    v.stream.onData = (chunk) => {
      got += Buffer.from(chunk).toString("latin1");
      v.stream.consumed(chunk.byteLength);
    };
    for (const word of ["one", "two", "three"]) {
      v.stream.write(Buffer.from(`${word.length.toString(16)}\r\n${word}\r\n`, "latin1"));
      await until(() => got.includes(`\r\n${word}\r\n`), `the echo of '${word}' while the request is still open`);
    }
    v.stream.write(Buffer.from("0\r\n\r\n", "latin1"));
    v.stream.end();
    await within(v.outcome, WAIT_MS, "the answer's end");
    expect(bodyOf(Buffer.from(got, "latin1")).toString()).toBe("onetwothree");
  });
});
