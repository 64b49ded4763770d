/**
 * The inspector's parts on their own: the body cap, the store's bounds and
 * its batched news, the live stream's slow-client drop, the decoded view,
 * the Host and cross-site rules, replay's edits, the flags, and the page's
 * pure helpers (views, hex, curl).
 */
import { describe, expect, test } from "bun:test";
import * as zlib from "node:zlib";
import { BodyCapture } from "../../src/agent/inspector/body.ts";
import { decodeBody } from "../../src/agent/inspector/decode.ts";
import { isOwnHost, refusal } from "../../src/agent/inspector/guard.ts";
import { MAX_DECODED_BYTES } from "../../src/agent/inspector/limits.ts";
import { LiveStreams } from "../../src/agent/inspector/live.ts";
import { replayRequest } from "../../src/agent/inspector/replay.ts";
import { CaptureStore, type StoreNews } from "../../src/agent/inspector/store.ts";
import type { TappedRequest } from "../../src/agent/inspector/tap.ts";
import type { TunnelView } from "../../src/agent/output.ts";
import { inspectChoice } from "../../src/cli/inspect-flags.ts";
import { curlCommand, hexDump, viewBody } from "../../src/agent/inspector/web/format.ts";
import { waitUntil } from "../harness/wait.ts";
import { MASK, wsFrame } from "../http/ws-frames.ts";

const tunnel: TunnelView = { name: "web", id: "t1", protocol: "http", url: "http://web.example", local: "localhost:3000", target: { host: "localhost", port: 3000 }, inspect: true };
const meta = (path: string, extra: Partial<TappedRequest> = {}): TappedRequest => ({ method: "GET", path, headers: [["Host", "web.example"]], websocket: false, remote: "1.2.3.4:5", ...extra });

describe("BodyCapture", () => {
  test("keeps copies of the first `cap` bytes and counts the rest", () => {
    const body = new BodyCapture(10);
    const chunk = new Uint8Array([1, 2, 3, 4, 5, 6]);
    expect(body.add(chunk)).toBe(6);
    chunk.fill(9); // the transport reuses its buffer: the copy is unchanged
    expect(body.add(new Uint8Array([7, 8, 9, 10, 11, 12]))).toBe(4);
    expect(body.add(new Uint8Array(100))).toBe(0);
    expect([...body.bytes()]).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect({ size: body.size, captured: body.captured, truncated: body.truncated }).toEqual({ size: 112, captured: 10, truncated: true });
  });
});

describe("CaptureStore", () => {
  test("keeps the newest N; older ids are gone; a tunnel with inspect off is not captured", () => {
    const store = new CaptureStore(3);
    for (let i = 0; i < 5; i++) store.begin(tunnel, meta(`/${i}`))!.done();
    expect(store.list().map((c) => c.head.path)).toEqual(["/4", "/3", "/2"]);
    expect(store.get(1)).toBeUndefined();
    expect(store.list({ limit: 1 }).map((c) => c.id)).toEqual([5]);
    expect(store.list({ tunnel: "other" })).toEqual([]);
    expect(store.begin({ ...tunnel, inspect: false }, meta("/off"))).toBeUndefined();
    store.clear();
    expect(store.size).toBe(0);
  });

  test("bodies together stay under the byte budget: the oldest leave first, and what still passes an evicted one is not copied", () => {
    const store = new CaptureStore(1000, 3000);
    const first = store.begin(tunnel, meta("/a"))!;
    first.requestChunk(new Uint8Array(2000));
    const second = store.begin(tunnel, meta("/b"))!;
    second.requestChunk(new Uint8Array(2000));
    expect(store.list().map((c) => c.head.path)).toEqual(["/b"]);
    expect(store.heldBytes).toBe(2000);
    first.responseChunk(new Uint8Array(2000)); // still streaming, but no longer kept
    expect(first.responseBody.captured).toBe(0);
    expect(store.heldBytes).toBe(2000);
  });

  test("WebSocket messages, read from the bytes that pass, count against the budget too, and leave with their capture", () => {
    const store = new CaptureStore(2);
    const ws = store.begin(tunnel, meta("/ws", { websocket: true }))!;
    ws.switchedBytes("visitor", wsFrame({ opcode: 1, payload: "x".repeat(100), mask: MASK }));
    ws.switchedBytes("service", wsFrame({ opcode: 2, payload: new Uint8Array(50) }));
    expect(ws.ws?.last.map((m) => [m.from, m.text, m.size])).toEqual([["visitor", true, 100], ["service", false, 50]]);
    expect(Buffer.from(ws.ws!.last[0]!.data).toString()).toBe("x".repeat(100));
    expect(store.heldBytes).toBe(150);
    store.begin(tunnel, meta("/a"));
    store.begin(tunnel, meta("/b")); // keep 2: the WebSocket's capture leaves
    expect(store.heldBytes).toBe(0);
  });

  test("news comes in batches, only while someone listens: first as new, then as changed", async () => {
    const store = new CaptureStore(10);
    const quiet = store.begin(tunnel, meta("/nobody-listening"))!;
    quiet.done();
    const news: StoreNews[] = [];
    const stop = store.subscribe((n) => news.push(n));
    const c = store.begin(tunnel, meta("/x"))!;
    c.response(200, []);
    c.done();
    await waitUntil(() => news.length === 1, 2_000, "one batch");
    expect(news[0]!.kind === "changed" && news[0]!.captures.map((x) => [x.head.path, x.state])).toEqual([["/x", "done"]]);
    expect(c.announced).toBe(true);
    store.clear();
    expect(news.at(-1)).toEqual({ kind: "cleared" });
    stop();
  });
});

describe("LiveStreams", () => {
  test("a client that does not read is dropped once its queue is full, not buffered without end", async () => {
    const store = new CaptureStore(1000);
    const live = new LiveStreams(store);
    const fakeServer = { timeout() {} } as any;
    const controller = new AbortController();
    const res = live.open(new Request("http://x/api/requests/stream", { signal: controller.signal }), fakeServer, {});
    expect(live.count).toBe(1);
    // long paths make each event large; nobody reads the body
    for (let round = 0; round < 40 && live.count > 0; round++) {
      for (let i = 0; i < 100; i++) store.begin(tunnel, meta(`/${"p".repeat(2000)}${round}-${i}`))!.done();
      await Bun.sleep(120);
    }
    expect(live.count).toBe(0);
    await res.body?.cancel().catch(() => {});
  });
});

describe("decodeBody", () => {
  const text = Buffer.from("hello inspector ".repeat(50));
  test.each([
    ["gzip", zlib.gzipSync(text)],
    ["br", zlib.brotliCompressSync(text)],
    ["deflate", zlib.deflateSync(text)],
    ["deflate", zlib.deflateRawSync(text)],
  ] as const)("%s", (encoding, bytes) => {
    const d = decodeBody(bytes, encoding);
    expect(d && "bytes" in d && Buffer.from(d.bytes).toString()).toBe(text.toString());
  });
  test("identity or none is not decoded; gzip then br is undone in reverse; nonsense and bombs are reported", () => {
    expect(decodeBody(text, undefined)).toBeUndefined();
    expect(decodeBody(text, "identity")).toBeUndefined();
    const twice = zlib.brotliCompressSync(zlib.gzipSync(text));
    const d = decodeBody(twice, "gzip, br");
    expect(d && "bytes" in d && Buffer.from(d.bytes).toString()).toBe(text.toString());
    expect(decodeBody(text, "gzip")).toMatchObject({ error: expect.stringContaining("not valid gzip") });
    expect(decodeBody(text, "compress")).toMatchObject({ error: "unknown content-encoding compress" });
    const bomb = zlib.gzipSync(new Uint8Array(MAX_DECODED_BYTES * 2));
    expect(decodeBody(bomb, "gzip")).toMatchObject({ error: expect.stringContaining("larger than") });
  });
});

describe("the guard", () => {
  const at = { host: "127.0.0.1", port: 4040 };
  test.each([
    ["127.0.0.1:4040", true],
    ["localhost:4040", true],
    ["[::1]:4040", true],
    ["127.0.0.2:4040", true],
    ["localhost:4041", false],
    ["localhost", false],
    ["evil.example:4040", false],
    ["127.0.0.1.nip.io:4040", false],
    ["", false],
  ] as const)("Host %p -> %p", (host, ok) => expect(isOwnHost(host, at)).toBe(ok));

  test("an address given explicitly is its own host too; a wildcard one takes addresses but never names", () => {
    expect(isOwnHost("192.168.1.5:4040", { host: "192.168.1.5", port: 4040 })).toBe(true);
    expect(isOwnHost("10.0.0.7:4040", { host: "0.0.0.0", port: 4040 })).toBe(true);
    expect(isOwnHost("evil.example:4040", { host: "0.0.0.0", port: 4040 })).toBe(false);
  });

  test("writes from another site's page are refused; reads, same-origin pages and scripts pass", () => {
    const req = (method: string, headers: Record<string, string>) => new Request("http://127.0.0.1:4040/api/requests", { method, headers: { host: "127.0.0.1:4040", ...headers } });
    expect(refusal(req("DELETE", { origin: "http://evil.example" }), at)?.code).toBe("CROSS_SITE");
    expect(refusal(req("DELETE", { "sec-fetch-site": "same-site" }), at)?.code).toBe("CROSS_SITE");
    expect(refusal(req("GET", { origin: "http://evil.example" }), at)).toBeUndefined();
    expect(refusal(req("DELETE", { origin: "http://127.0.0.1:4040", "sec-fetch-site": "same-origin" }), at)).toBeUndefined();
    expect(refusal(req("DELETE", {}), at)).toBeUndefined();
  });
});

describe("replayRequest", () => {
  const store = new CaptureStore(10);
  const original = store.begin(tunnel, meta("/orig", { method: "POST", headers: [["Host", "web.example"], ["X-A", "1"], ["Transfer-Encoding", "chunked"], ["Expect", "100-continue"]] }))!;
  original.requestChunk(new TextEncoder().encode("hello"));

  test("as captured (names' case kept), its body whole with its length as it is", () => {
    const r = replayRequest(original, {});
    expect(r.head).toBe("POST /orig HTTP/1.1\r\nHost: web.example\r\nX-A: 1\r\nContent-Length: 5\r\n\r\n");
    expect(new TextDecoder().decode(r.body)).toBe("hello");
  });

  test("edited: an object sets (in place) and removes names, a list replaces them all, the body's length follows", () => {
    const merged = replayRequest(original, { method: "PUT", headers: { "x-a": null, "x-b": "2", host: "other.example" }, body: new TextEncoder().encode("longer body") });
    expect(merged.head).toBe("PUT /orig HTTP/1.1\r\nhost: other.example\r\nx-b: 2\r\nContent-Length: 11\r\n\r\n");
    const replaced = replayRequest(original, { headers: [["Host", "h"], ["X-Only", "this"]], body: new Uint8Array(0) });
    expect(replaced.head).toBe("POST /orig HTTP/1.1\r\nHost: h\r\nX-Only: this\r\nContent-Length: 0\r\n\r\n");
    const get = replayRequest(original, { method: "GET", body: new Uint8Array(0) });
    expect(get.head).toBe("GET /orig HTTP/1.1\r\nHost: web.example\r\nX-A: 1\r\n\r\n");
  });

  test("a request the agent could not send (no Host left) is refused with why", () => {
    expect(() => replayRequest(original, { headers: [["X-Only", "this"]] })).toThrow("The Host header is missing.");
  });

  test("a truncated body or a WebSocket is refused as not replayable", () => {
    const big = store.begin(tunnel, meta("/big", { method: "POST" }))!;
    big.requestChunk(new Uint8Array(1024 * 1024 + 1));
    expect(() => replayRequest(big, {})).toThrow("captured only up to");
    expect(replayRequest(big, { body: new Uint8Array(1) }).body.byteLength).toBe(1);
    const ws = store.begin(tunnel, meta("/ws", { websocket: true }))!;
    expect(() => replayRequest(ws, {})).toThrow("WebSocket");
  });
});

describe("inspectChoice", () => {
  test("defaults, explicit values, and the test-only port range", () => {
    expect(inspectChoice({}, {})).toEqual({ on: true, address: undefined, keep: 1000, memoryBytes: 256 * 1024 * 1024, ports: { first: 4040, last: 4049 } });
    expect(inspectChoice({ "inspect-memory": "16" }, {})).toMatchObject({ memoryBytes: 16 * 1024 * 1024 });
    expect(() => inspectChoice({ "inspect-memory": "0" }, {})).toThrow("--inspect-memory must be a number of MiB from 1 to 65536");
    expect(() => inspectChoice({ "inspect-memory": "1g" }, {})).toThrow("--inspect-memory must be a number of MiB");
    expect(() => inspectChoice({ "no-inspect": true, "inspect-memory": "16" }, {})).toThrow("--no-inspect turns the inspector off");
    expect(inspectChoice({ "no-inspect": true }, {})).toEqual({ on: false });
    expect(inspectChoice({ "inspect-addr": "[::1]:4050", "inspect-keep": "50" }, {})).toMatchObject({ address: { host: "::1", port: 4050 }, keep: 50 });
    expect(inspectChoice({ "inspect-addr": "4051" }, {})).toMatchObject({ address: { host: "127.0.0.1", port: 4051 } });
    expect(inspectChoice({}, { BURROW_TEST_INSPECT_PORTS: "5000-5002" })).toMatchObject({ ports: { first: 5000, last: 5002 } });
    expect(() => inspectChoice({ "inspect-keep": "100001" }, {})).toThrow("--inspect-keep");
    expect(() => inspectChoice({ "inspect-addr": "a b:1" }, {})).toThrow("--inspect-addr");
  });
});

describe("the page's helpers", () => {
  const enc = (s: string) => new TextEncoder().encode(s);
  test("viewBody picks JSON, form fields, image, text or hex", () => {
    expect(viewBody(enc('{"a":[1]}'), "application/json")).toEqual({ kind: "json", text: '{\n  "a": [\n    1\n  ]\n}' });
    expect(viewBody(enc("a=1&b=two+words"), "application/x-www-form-urlencoded")).toEqual({ kind: "form", fields: [["a", "1"], ["b", "two words"]] });
    expect(viewBody(new Uint8Array([0x89, 0x50]), "image/png").kind).toBe("image");
    expect(viewBody(enc("plain"), "text/plain")).toEqual({ kind: "text", text: "plain" });
    expect(viewBody(new Uint8Array([0, 1, 2, 0xff]), null).kind).toBe("hex");
    expect(viewBody(new Uint8Array(0), null)).toEqual({ kind: "empty" });
    expect(viewBody(enc("{not json"), "application/json")).toEqual({ kind: "text", text: "{not json" });
  });

  test("hexDump: offset, 16 bytes in two groups, printable ASCII", () => {
    expect(hexDump(enc("Hello, inspector!\n"))).toBe(
      "00000000  48 65 6c 6c 6f 2c 20 69  6e 73 70 65 63 74 6f 72  |Hello, inspector|\n00000010  21 0a                                             |!.|",
    );
  });

  test("curlCommand: the public URL, the visitor's headers (not Host or length), the body safely quoted", () => {
    expect(curlCommand("http://web.example/", "POST", "/a?b=1", [["host", "x"], ["content-length", "9"], ["x-q", "it's"]], enc("it's body"))).toBe(
      `curl -X 'POST' 'http://web.example/a?b=1' -H 'x-q: it'\\''s' --data-binary 'it'\\''s body'`,
    );
    expect(curlCommand("http://w", "GET", "/", [], new Uint8Array(0))).toBe("curl 'http://w/'");
    expect(curlCommand("http://w", "PUT", "/b", [], new Uint8Array([0, 255]))).toBe(`printf '%b' '\\x00\\xff' | curl -X 'PUT' 'http://w/b' --data-binary @-`);
  });
});
