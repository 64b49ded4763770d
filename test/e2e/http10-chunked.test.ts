/**
 * A local service that answers an HTTP/1.0 visitor with a chunked body,
 * which an HTTP/1.0 client cannot read: the edge, the server facing that
 * client, sends the body close-delimited (RFC 9112 §6.1): the chunks' data
 * without their framing, no Transfer-Encoding, the connection closed after
 * it. An HTTP/1.1 visitor gets the chunks as the service sent them.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rawHttp } from "../harness/raw-http.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

const CHUNKED = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nX-Service: yes\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n";

/** A service that answers every request with CHUNKED, whatever the request's version, and keeps its connection. */
const service = Bun.listen({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    data(socket, data) {
      if (data.toString("latin1").includes("\r\n\r\n")) socket.write(CHUNKED);
    },
  },
});

let t: Tunnel;
beforeAll(async () => {
  t = await withTunnel({ upstream: service.port, args: ["--subdomain", "tenfour"] });
});
afterAll(async () => {
  await t?.[Symbol.asyncDispose]();
  service.stop(true);
});

const host = () => `tenfour.localhost:${t.server.edgePort}`;

test("an HTTP/1.0 visitor gets a chunked answer's data close-delimited: no Transfer-Encoding, no framing, the connection closed after it", async () => {
  const r = await rawHttp(t.server.edgePort, `GET / HTTP/1.0\r\nHost: ${host()}\r\n\r\n`);
  expect(r.status).toBe(200);
  expect(r.closed).toBe(true);
  expect(r.head.toLowerCase()).not.toContain("transfer-encoding");
  expect(r.head).toContain("X-Service: yes");
  expect(r.head).toMatch(/\r\nConnection: close$/);
  expect(r.body).toBe("hello world");
}, 30_000);

test("an HTTP/1.0 visitor that asked for keep-alive still gets the body close-delimited, and the connection closes", async () => {
  const r = await rawHttp(t.server.edgePort, `GET / HTTP/1.0\r\nHost: ${host()}\r\nConnection: keep-alive\r\n\r\n`);
  expect(r.closed).toBe(true);
  expect(r.body).toBe("hello world");
}, 30_000);

test("an HTTP/1.1 visitor gets the chunks as the service sent them", async () => {
  const r = await rawHttp(t.server.edgePort, `GET / HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
  expect(r.status).toBe(200);
  expect(r.head).toContain("Transfer-Encoding: chunked");
  expect(r.body).toBe("5\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n");
}, 30_000);
