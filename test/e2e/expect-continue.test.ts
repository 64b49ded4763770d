/**
 * `Expect: 100-continue` through a tunnel, against a raw local service that
 * refuses the upload from its head alone (401, as a service checking
 * credentials does). The expectation travels to the service, whose answer
 * decides: the client gets no 100 Continue, sends no body, and gets the 401
 * as it would directly; the tunnel serves the next request as before.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { connect } from "node:net";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

let tunnel: Tunnel;
/** Body bytes the service received for refused uploads. */
let bodyBytesSeen = 0;

/** A raw HTTP/1.1 service: an upload with Expect is refused at its head; anything else gets 200. */
const service = Bun.listen<{ head: string; refused: boolean }>({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    open: (s) => void (s.data = { head: "", refused: false }),
    data(s, chunk) {
      if (s.data.refused) return void (bodyBytesSeen += chunk.byteLength);
      s.data.head += chunk.toString("latin1");
      const end = s.data.head.indexOf("\r\n\r\n");
      if (end < 0) return;
      if (/^expect:\s*100-continue/im.test(s.data.head)) {
        s.data.refused = true;
        bodyBytesSeen += s.data.head.length - end - 4;
        s.write("HTTP/1.1 401 Unauthorized\r\nContent-Type: text/plain\r\nContent-Length: 6\r\nConnection: close\r\n\r\ndenied");
        s.end();
        return;
      }
      s.data.head = "";
      s.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    },
  },
});

beforeAll(async () => {
  tunnel = await withTunnel({ username: "uploader", upstream: service.port, args: ["--subdomain", "upload"] });
});
afterAll(async () => {
  await tunnel?.close();
  service.stop(true);
});

/**
 * Sends an upload of `size` bytes with Expect: 100-continue the way curl
 * does: the head, then the body once 100 Continue (or up to 1 s) has passed,
 * in 64 KiB chunks, stopping as soon as a final status arrives.
 */
function upload(size: number): Promise<{ interim: string[]; final: string; sent: number }> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => (sock.destroy(), reject(new Error("no final answer within 10 s"))), 10_000);
    let got = "";
    let sent = 0;
    let finalSeen = false;
    const sock = connect({ host: "127.0.0.1", port: tunnel.server.edgePort }, () => {
      sock.write(`POST /upload HTTP/1.1\r\nHost: upload.localhost:${tunnel.server.edgePort}\r\nExpect: 100-continue\r\nContent-Length: ${size}\r\n\r\n`);
      setTimeout(pump, 1_000); // curl's wait for a 100 that does not come
    });
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    // a chunk every 5 ms at most (some 10 MB/s): the refusal, which takes milliseconds, must come back
    // while the body is still going, however fast a loopback would swallow 20 MiB at once
    let pumping = false;
    const pump = () => {
      if (pumping || finalSeen || sent >= size || sock.destroyed) return;
      pumping = true;
      const n = Math.min(chunk.length, size - sent);
      sent += n;
      const next = () => ((pumping = false), setTimeout(pump, 5));
      if (sock.write(chunk.subarray(0, n))) next();
      else sock.once("drain", next);
    };
    const finish = () => {
      clearTimeout(timer);
      const responses = got.split(/(?=HTTP\/1\.1 )/);
      resolve({ interim: responses.filter((r) => r.startsWith("HTTP/1.1 1")).map((r) => r.split("\r\n")[0]!), final: responses.find((r) => !r.startsWith("HTTP/1.1 1")) ?? "", sent });
    };
    sock.on("data", (d) => {
      got += d.toString("latin1");
      if (got.includes(" 100 Continue") && !finalSeen && sent === 0) pump();
      if (/HTTP\/1\.1 [2-5]\d\d[^]*\r\n\r\n[^]*denied/.test(got)) {
        finalSeen = true;
        sock.destroy();
        finish();
      }
    });
    sock.on("error", () => {});
    sock.on("close", () => (finalSeen ? undefined : finish()));
  });
}

test("a service that refuses an upload at its head: the client gets the 401 it sent, not a 502 or a hang", async () => {
  const result = await upload(20 * 1024 * 1024);
  console.log(`upload: sent ${result.sent} B before the 401; the service saw ${bodyBytesSeen} B of it`);
  expect(result.final).toStartWith("HTTP/1.1 401 Unauthorized");
  expect(result.final).toContain("denied");
  // the service said no before any 100 Continue: as directly, no body went and none arrived
  expect(result.interim).toEqual([]);
  expect(result.sent).toBe(0);
  expect(bodyBytesSeen).toBe(0);
});

test("the tunnel serves the next request as before", async () => {
  const res = await tunnel.fetch("/after");
  expect(res.status).toBe(200);
  expect(await res.text()).toBe("ok");
});

test("directly, the same service gives the same 401 and receives no body at all", async () => {
  const before = bodyBytesSeen;
  const answer = await new Promise<string>((resolve, reject) => {
    let got = "";
    const sock = connect({ host: "127.0.0.1", port: service.port }, () => {
      sock.write(`POST /upload HTTP/1.1\r\nHost: local\r\nExpect: 100-continue\r\nContent-Length: 1048576\r\n\r\n`);
    });
    const timer = setTimeout(() => reject(new Error("no answer")), 5_000);
    sock.on("data", (d) => (got += d.toString()));
    sock.on("close", () => (clearTimeout(timer), resolve(got)));
    sock.on("error", () => {});
  });
  expect(answer).toStartWith("HTTP/1.1 401 Unauthorized");
  expect(bodyBytesSeen - before).toBe(0);
});
