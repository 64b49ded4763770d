/**
 * A response whose policy rules only add and remove fields is judged in
 * its head and passed on in place (edge/traffic-policy/response-head-rules.ts):
 * the head as the rules left it, the body as it came, whether the head
 * came in one piece or in several.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server, type Socket } from "node:net";
import { rawHttp } from "../harness/raw-http.ts";
import { withPolicy } from "./rig.ts";

const POLICY = `
on_http_response:
  - actions:
      - type: remove-headers
        config: { headers: [x-secret] }
      - type: add-headers
        config: { headers: { x-seen: yes } }
`;

/** A service that writes its response head in three parts, a moment apart, then the body; the head larger than one frame of the agent's link, so the edge gets it in pieces however the agent reads it. */
let service: Server;
let port = 0;
const sockets = new Set<Socket>();

beforeAll(async () => {
  service = createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    let text = "";
    sock.on("data", async (d) => {
      text += d.toString("latin1");
      while (text.includes("\r\n\r\n")) {
        text = text.slice(text.indexOf("\r\n\r\n") + 4);
        const parts = ["HTTP/1.1 200 OK\r\nContent-Le", `ngth: 5\r\nX-Large: ${"l".repeat(40_000)}\r\nX-Secret: s3cret\r\nX-Ke`, "pt: 1\r\n\r\nhello"];
        for (const p of parts) {
          sock.write(p);
          await Bun.sleep(30);
        }
      }
    });
  });
  await new Promise<void>((resolve) => service.listen(0, "127.0.0.1", resolve));
  port = (service.address() as { port: number }).port;
});

afterAll(() => {
  for (const s of sockets) s.destroy();
  service.close();
});

describe("a response judged in its head", () => {
  test("a head the service writes in pieces, larger than a frame of the agent's link: the field removed, the one added, the rest and the body as they came", async () => {
    await using t = await withPolicy(POLICY, { upstream: port });
    const host = `${t.agent.subdomain}.localhost:${t.server.edgePort}`;
    for (let i = 0; i < 2; i++) {
      const r = await rawHttp(t.server.edgePort, `GET /x HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      expect(r.status).toBe(200);
      const head = r.head.toLowerCase();
      expect(head).not.toContain("x-secret");
      expect(head).toContain("x-kept: 1");
      expect(head).toContain("x-seen: yes");
      expect(head).toContain("content-length: 5");
      expect(head).toContain(`x-large: ${"l".repeat(40_000)}\r\n`);
      expect(r.body).toBe("hello");
    }
  }, 30_000);

  test("the same through curl, whose head comes in one piece from an ordinary service", async () => {
    await using t = await withPolicy(POLICY, { upstream: () => new Response("body", { headers: { "x-secret": "no", "x-kept": "1" } }) });
    const r = await t.curl("/");
    expect(r.status).toBe(200);
    expect(r.headers["x-secret"]).toBeUndefined();
    expect(r.headers["x-kept"]).toBe("1");
    expect(r.headers["x-seen"]).toBe("yes");
    expect(r.body).toBe("body");
  });
});
