/**
 * sse-find-replace in on_event_stream_message at the edge, through a real
 * server, a real agent and a real SSE service on a bare socket, read by
 * curl -N: each event rewritten (data and retry, capture groups, CRLF, an
 * event cut across the service's writes), comments and events without
 * data as they came, over HTTP/1.1 (chunked and close-delimited from the
 * service), to an HTTP/1.0 visitor and over HTTP/2, compressed after
 * when compress-response says so; streamed, not held
 * (the first event reaches curl before the service sends the last); left
 * alone: a response that is not an event stream, an encoded one; the
 * layers' order (the tunnel's own rules, then an operator's); and the
 * bounds: an event over --policy-sse-event-limit (as it came, the next one
 * rewritten), a pattern of exponential cost for a backtracking engine, a
 * stream that never ends, a replacement that grows an event too far (the
 * stream cut after the events before it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { waitUntil } from "../harness/wait.ts";
import { withPolicy, type PolicyTunnel } from "./rig.ts";
import { curlStream, expectStreamed, REDACT_RULES, REWRITTEN, sseService, type SseService } from "./sse-service.ts";

const EVENT_LIMIT = 1024;
const LONG = "b".repeat(200);

const policy = `
on_http_response:
  - expressions: ["req.url.query == 'compressed'"]
    actions:
      - type: compress-response
        config: { algorithms: [gzip] }
on_event_stream_message:
  - expressions: ["req.url.path != '/grow'"]
    actions:${REDACT_RULES}  - expressions: ["req.url.path == '/grow'"]
    actions:
      - type: sse-find-replace
        config: { replacements: [{ from: 'a', to: '${LONG}' }] }
  - expressions: ["req.url.path == '/exponential'"]
    actions:
      - type: sse-find-replace
        config: { replacements: [{ from: '(a+)+$', to: 'x' }] }
`;

const AS_SENT = ": connected\n\nevent: token\nid: 1\ndata: the key is sk-12345678 ok\n\nretry: 3000\ndata: line one\r\ndata: sk-999 on line two\r\n\r\ndata: done\n\n";

let svc: SseService;
let t: PolicyTunnel;
beforeAll(async () => {
  svc = await sseService();
  t = await withPolicy(policy, { upstream: svc.port, server: { args: ["--policy-sse-event-limit", String(EVENT_LIMIT)] } });
}, 30_000);
afterAll(async () => {
  await t?.close();
  svc?.stop();
});

async function read(path: string, args: string[] = []) {
  const c = curlStream(t.url(path), ["-D", "-", ...args]);
  const code = await c.exited;
  const all = c.text();
  const split = all.indexOf("\r\n\r\n");
  return { code, head: all.slice(0, split), body: all.slice(split + 4) };
}

describe("sse-find-replace", () => {
  for (const [carrier, query, args] of [
    ["HTTP/1.1, the service's stream chunked", "", []],
    ["HTTP/1.1, the service's stream ended by its close", "?framing=close", []],
    ["HTTP/1.1, the service's stream with a Content-Length", "?framing=length", []],
    ["HTTP/1.0", "", ["--http1.0"]],
    ["HTTP/2", "", ["--http2-prior-knowledge"]],
    ["HTTP/2, the service's stream ended by its close", "?framing=close", ["--http2-prior-knowledge"]],
  ] as const) {
    test(`${carrier}: each event's data and retry rewritten, events cut across writes read whole, comments and the rest as they came`, async () => {
      const r = await read(`/stream${query}`, [...args]);
      expect(r.code).toBe(0);
      expect(r.head).toMatch(/^HTTP\/[\d.]+ 200/);
      expect(r.head.toLowerCase()).toContain("content-type: text/event-stream");
      expect(r.head.toLowerCase()).not.toContain("content-length");
      expect(r.body).toBe(REWRITTEN);
    });
  }

  for (const [carrier, args] of [["HTTP/1.1", []], ["HTTP/2", ["--http2-prior-knowledge"]]] as const) {
    test(`${carrier}: streamed, not held: the first event reaches curl before the service sends the last`, async () => {
      await expectStreamed(svc, t.url("/gated"), args);
    });
  }

  test("compress-response on the same stream: each event rewritten, then compressed", async () => {
    const r = await read("/stream?compressed", ["--compressed"]);
    expect(r.code).toBe(0);
    expect(r.head.toLowerCase()).toContain("content-encoding: gzip");
    expect(r.body).toBe(REWRITTEN);
  });

  test("left alone: a response that is not an event stream, and an encoded event stream", async () => {
    expect((await read("/stream?type=text/plain")).body).toBe(AS_SENT);
    const encoded = await read("/stream?encoding=x-custom");
    expect(encoded.body).toBe(AS_SENT);
  });

  test("an event over --policy-sse-event-limit goes as it came, with a log line; the next is rewritten", async () => {
    const r = await read("/big");
    expect(r.body).toBe(`data: sk-1 ${"x".repeat(3000)}\n\ndata: after sk-2***\n\n`);
    await t.server.output.waitFor(/traffic policy's event not rewritten.*--policy-sse-event-limit/, 5_000);
  });

  test("a pattern of exponential cost for a backtracking engine: done in linear time", async () => {
    const started = performance.now();
    const r = await read("/exponential");
    expect(r.body).toBe(`data: ${"a".repeat(5000)}!\n\ndata: sk-1***\n\n`);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  test("a replacement that grows an event past its cap cuts the stream after the events before it, with a log line", async () => {
    const r = await read("/grow");
    expect(r.code).not.toBe(0);
    expect(r.body).toBe("data: first sk-1\n\n");
    await t.server.output.waitFor(/traffic policy's response failed.*grow past/, 5_000);
    // the edge goes on serving
    expect((await read("/layers")).body).toBe("data: sk-1***\n\n");
  });

  test("a stream that never ends: events rewritten as they come until the visitor leaves, then the service's stream is let go", async () => {
    const c = curlStream(t.url("/forever"), [], 2);
    await c.exited;
    const ticks = c.text().match(/data: tick \d+ sk-\d\*\*\*\n\n/g) ?? [];
    expect(ticks.length).toBeGreaterThan(5);
    expect(c.text()).not.toMatch(/sk-\d\d/);
    await waitUntil(() => svc.foreverOpen() === 0, 10_000, "the service's endless stream to be closed");
  });

  test("layers: the tunnel's own rules run first, an operator's after them, on what they made", async () => {
    const made = await t.api.post("/api/policies", {
      name: "sse-operator",
      policy: "on_event_stream_message:\n  - expressions: [\"req.url.path == '/layers'\"]\n    actions:\n      - type: sse-find-replace\n        config: { replacements: [{ from: 'sk-1\\*\\*\\*', to: 'checked' }] }\n",
    });
    expect(made.status).toBe(201);
    try {
      await waitUntil(async () => (await read("/layers")).body === "data: checked\n\n", 10_000, "the operator's rule to apply after the tunnel's");
    } finally {
      await t.api.delete(`/api/policies/${made.body.id}`);
    }
  });
});
