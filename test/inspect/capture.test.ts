/**
 * What the inspector captures of h1 streams as they pass through the agent
 * (the in-memory rig of test/agent, with a capture store as its
 * inspector): a request and its response with their heads as sent and
 * their bodies without the chunked framing, a failure with its reason, a
 * WebSocket's messages both ways read from the piped bytes, and a replay
 * served through the same path.
 */
import { afterEach, describe, expect, test } from "bun:test";
import type { Server } from "bun";
import { replay } from "../../src/agent/inspector/replay.ts";
import { CaptureStore } from "../../src/agent/inspector/store.ts";
import { closeTunnel, fetchThrough, RawService, requestHead, tunnelTo, visit, WAIT_MS, type TestTunnel } from "../agent/raw-service.ts";
import { waitUntil } from "../harness/wait.ts";
import { MASK, wsFrame } from "../http/ws-frames.ts";
import { within } from "../protocol/support.ts";

const services: RawService[] = [];
const servers: Server<undefined>[] = [];
const tunnels: TestTunnel[] = [];

afterEach(() => {
  for (const t of tunnels.splice(0)) closeTunnel(t);
  for (const s of services.splice(0)) s.stop();
  for (const s of servers.splice(0)) s.stop(true);
});

function inspected(port: number, store: CaptureStore): TestTunnel {
  const t = tunnelTo(port, { inspector: store });
  tunnels.push(t);
  return t;
}

const text = (b: Uint8Array) => Buffer.from(b).toString("latin1");

describe("h1 exchanges", () => {
  test("a request and its response: heads as sent, bodies without their chunked framing", async () => {
    const svc = new RawService((_req, socket) => {
      socket.write("HTTP/1.1 201 Made It\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n");
      setTimeout(() => socket.write("6;x=y\r\n there\r\n0\r\nX-Trailer: 1\r\n\r\n"), 10);
    });
    services.push(svc);
    const store = new CaptureStore(10);
    const t = inspected(svc.port, store);
    const head = requestHead("POST", "/form?a=1", [["Host", "web.example"], ["X-Mixed", "Case"], ["Transfer-Encoding", "chunked"]]);
    const res = await fetchThrough(t, { head, body: ["3\r\nabc\r\n", "2\r\nde\r\n0\r\n\r\n"] });
    expect(res.status).toBe(201);
    const [c] = store.list();
    expect(c).toMatchObject({ kind: "http", state: "done", status: 201, remote: "127.0.0.1:50000" });
    expect({ method: c!.head.method, path: c!.head.path, headers: c!.head.headers }).toEqual({ method: "POST", path: "/form?a=1", headers: [["Host", "web.example"], ["X-Mixed", "Case"], ["Transfer-Encoding", "chunked"]] });
    expect(text(c!.requestBody.bytes())).toBe("abcde");
    expect(c!.responseHeaders).toEqual([["Content-Type", "text/plain"], ["Transfer-Encoding", "chunked"]]);
    expect(text(c!.responseBody.bytes())).toBe("hello there");
  });

  test("a request that found no answer is captured as failed, with why", async () => {
    const svc = new RawService((_req, socket) => void socket.end());
    services.push(svc);
    const store = new CaptureStore(10);
    const t = inspected(svc.port, store);
    await fetchThrough(t, { head: requestHead("GET", "/nothing") });
    expect(store.list()[0]).toMatchObject({ state: "failed", error: "the local service closed the connection without answering", status: undefined });
  });

  test("a replay goes through the same path, captured as a new request naming its original", async () => {
    const svc = new RawService((req, socket) => void socket.write(`HTTP/1.1 200 OK\r\nContent-Length: ${req.body.length}\r\n\r\n${req.body}`));
    services.push(svc);
    const store = new CaptureStore(10);
    const t = inspected(svc.port, store);
    await fetchThrough(t, { head: requestHead("PUT", "/doc", [["Host", "web.example"], ["Content-Length", "5"]]), body: ["first"] });
    const original = store.list()[0]!;
    const again = await replay(store, original, original.tunnel, { body: new TextEncoder().encode("second") });
    expect(again).toMatchObject({ replayOf: original.id, state: "done", status: 200 });
    expect(text(again.responseBody.bytes())).toBe("second");
    expect(svc.requests[1]!.head).toBe("PUT /doc HTTP/1.1\r\nHost: web.example\r\nContent-Length: 6\r\n\r\n");
  });
});

describe("WebSockets", () => {
  test("messages both ways are read from the piped bytes, and the capture ends when the connection does", async () => {
    const upstream = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      websocket: {
        open: (ws) => void ws.send("hello from the service"),
        message: (ws, message) => void ws.send(typeof message === "string" ? `echo: ${message}` : message),
      },
      fetch: (req, srv) => (srv.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 400 })),
    });
    servers.push(upstream);
    const store = new CaptureStore(10);
    const t = inspected(upstream.port!, store);
    const head = requestHead("GET", "/ws", [
      ["Host", "web.example"],
      ["Connection", "Upgrade"],
      ["Upgrade", "websocket"],
      ["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="],
      ["Sec-WebSocket-Version", "13"],
    ]);
    const v = visit(t, { head, body: [], end: false });
    await within(v.replied, WAIT_MS, "the 101");
    v.stream.write(wsFrame({ opcode: 1, payload: "hi", mask: MASK }));
    v.stream.write(wsFrame({ opcode: 2, payload: new Uint8Array([9, 8, 7]), fin: false, mask: MASK }));
    v.stream.write(wsFrame({ opcode: 0, payload: new Uint8Array([6]), mask: MASK }));
    const c = store.list()[0]!;
    await waitUntil(() => (c.ws?.fromService ?? 0) >= 3, WAIT_MS, "the echoes");
    const shown = c.ws!.last.map((m) => [m.from, m.text ? text(m.data) : [...m.data]]);
    expect(shown).toContainEqual(["service", "hello from the service"]);
    expect(shown.filter(([from]) => from === "visitor")).toEqual([
      ["visitor", "hi"],
      ["visitor", [9, 8, 7, 6]],
    ]);
    expect(shown).toContainEqual(["service", "echo: hi"]);
    expect(shown).toContainEqual(["service", [9, 8, 7, 6]]);
    expect(c).toMatchObject({ kind: "ws", status: 101, state: "pending" });
    // the visitor closes: the service answers the close and ends the connection
    v.stream.write(wsFrame({ opcode: 8, payload: new Uint8Array([0x03, 0xe8]), mask: MASK }));
    v.stream.end();
    await within(v.outcome, WAIT_MS, "the service's end");
    await waitUntil(() => c.state !== "pending", WAIT_MS, "the capture's end");
    expect(c.state).toBe("done");
    expect(t.logs).toEqual([expect.objectContaining({ path: "/ws", status: "101 websocket", kind: "ws" })]);
  });
});
