/**
 * Request bodies the edge reads for a traffic policy (the class: a body
 * held at the edge for verify-webhook grows memory, holds a connection
 * forever, or is read as something else than what the service gets). A
 * body trickled in is cut at --policy-body-timeout with 408; bodies read
 * at once never hold more than --policy-body-memory (the one past it gets
 * 503); a malformed chunked body is a 400 and the end of the connection;
 * and the bytes after a body are the next request, judged as one, however
 * they came: in the same packet as the body, after its last chunk. A body
 * is read only when a request's run comes to an action that needs it: one
 * refused before (the tunnel's IP flags, a rule before that action) is
 * answered without a byte of its body read, and one that never comes to
 * it streams through unread, with no body deadline.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createHmac } from "node:crypto";
import { withPolicy, type PolicyTunnel } from "../traffic-policy/rig.ts";
import { Raw } from "./raw-connection.ts";

const SECRET = "whsec_bounds_0123456789";
const LIMIT = 65_536;
let reached: string[] = [];
let t: PolicyTunnel;

beforeAll(async () => {
  t = await withPolicy(
    `
on_http_request:
  - expressions: ["req.url.path == '/closed'"]
    actions: [{ type: deny }]
  - expressions: ["req.url.path == '/hook'"]
    actions: [{ type: verify-webhook, config: { provider: github, secret: "${SECRET}" } }]
  - expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: deny }]
`,
    {
      upstream: async (req) => {
        reached.push(`${req.method} ${new URL(req.url).pathname} ${(await req.arrayBuffer()).byteLength}`);
        return new Response("ok");
      },
      server: { args: ["--policy-body-limit", String(LIMIT), "--policy-body-timeout", "1", "--policy-body-memory", "1048576"] },
    },
  );
}, 30_000);
afterAll(() => t?.close());

const host = () => `${t.agent.subdomain}.localhost`;
const sign = (body: string) => `sha256=${createHmac("sha256", SECRET).update(body).digest("hex")}`;
/** The status codes of the answers on a connection, in order (a body without a line break runs into the next status line). */
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]!);
const head = (length: number, extra = "") => `POST /hook HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: ${length}\r\n${extra}\r\n`;

describe("a body read for the policy", () => {
  test("trickled in: 408 at --policy-body-timeout, the connection closed, the service never reached", async () => {
    reached = [];
    using raw = new Raw(t.server.edgePort);
    await raw.send(head(1000, `X-Hub-Signature-256: ${sign("x".repeat(1000))}\r\n`) + "x".repeat(10));
    // a byte now and then does not keep it alive
    await Bun.sleep(300);
    await raw.send("x");
    await raw.whenClosed("the slow body to be cut");
    expect(raw.text).toStartWith("HTTP/1.1 408");
    expect(reached).toEqual([]);
  });

  test("bodies read at once hold at most --policy-body-memory: the one past it gets 503; once they go, the room is back", async () => {
    reached = [];
    const held: Raw[] = [];
    try {
      // 60,000 bytes of each 65,000-byte body sent, the rest never: 17 of them fill 1 MiB
      for (let i = 0; i < 20; i++) {
        const raw = new Raw(t.server.edgePort);
        held.push(raw);
        await raw.send(head(65_000, "X-Hub-Signature-256: sha256=00\r\n") + "y".repeat(60_000));
      }
      await held.at(-1)!.until((text) => text.startsWith("HTTP/1.1 503"), "a body past the budget to be refused");
      const busy = held.filter((r) => r.text.startsWith("HTTP/1.1 503"));
      expect(busy.length).toBeGreaterThanOrEqual(3);
      expect(busy[0]!.text.toLowerCase()).toContain("retry-after: 1");
    } finally {
      for (const r of held) r[Symbol.dispose]();
    }
    // the visitors left: what their bodies held is given back, and a body is read again
    const body = "z".repeat(50_000);
    using raw = new Raw(t.server.edgePort);
    await raw.send(head(body.length, `X-Hub-Signature-256: ${sign(body)}\r\n`) + body);
    await raw.until((text) => /^HTTP\/1\.1 200/.test(text), "a signed body to pass once the room is back");
    expect(reached).toEqual([`POST /hook ${body.length}`]);
  });

  test("a malformed chunked body: 400, and nothing more is read from the connection", async () => {
    reached = [];
    using raw = new Raw(t.server.edgePort);
    await raw.send(`POST /hook HTTP/1.1\r\nHost: ${host()}\r\nTransfer-Encoding: chunked\r\nX-Hub-Signature-256: sha256=00\r\n\r\nzz\r\nnot a chunk\r\n`);
    await raw.whenClosed("the connection to close");
    expect(raw.text).toStartWith("HTTP/1.1 400");
    expect(reached).toEqual([]);
  });
});

describe("the bytes after a body that was read", () => {
  test("a request in the same packet as a signed body is the next request, judged as one", async () => {
    reached = [];
    const body = '{"event":"push"}';
    using raw = new Raw(t.server.edgePort);
    await raw.send(head(body.length, `X-Hub-Signature-256: ${sign(body)}\r\n`) + body + `GET /admin/users HTTP/1.1\r\nHost: ${host()}\r\n\r\n`);
    await raw.until((text) => statuses(text).length === 2, "two answers");
    expect(statuses(raw.text)).toEqual(["200", "403"]);
    expect(reached).toEqual([`POST /hook ${body.length}`]);
  });

  test("a request after a chunked body's last chunk is the next request, not the body's", async () => {
    reached = [];
    const body = '{"event":"release"}';
    using raw = new Raw(t.server.edgePort);
    const chunked = `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    await raw.send(`POST /hook HTTP/1.1\r\nHost: ${host()}\r\nTransfer-Encoding: chunked\r\nX-Hub-Signature-256: ${sign(body)}\r\n\r\n${chunked}GET /admin HTTP/1.1\r\nHost: ${host()}\r\n\r\n`);
    await raw.until((text) => statuses(text).length === 2, "two answers");
    expect(statuses(raw.text)).toEqual(["200", "403"]);
    expect(reached).toEqual([`POST /hook ${body.length}`]);
  });
});

describe("a body is read only for the action that needs it", () => {
  test("a request a rule before that action refuses is answered at once, its body never read (no 100 Continue, no body deadline)", async () => {
    reached = [];
    using raw = new Raw(t.server.edgePort);
    await raw.send(`POST /closed HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n`);
    await raw.until((text) => statuses(text).length > 0, "an answer");
    expect(statuses(raw.text)).toEqual(["403"]);
    expect(reached).toEqual([]);
  });

  test("a request whose rules come to no such action streams through unread: a slow upload outlasts --policy-body-timeout and reaches the service whole", async () => {
    reached = [];
    using raw = new Raw(t.server.edgePort);
    await raw.send(`POST /upload HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: 20\r\n\r\n` + "u".repeat(10));
    // past the 1 s a body read for the policy may take
    await Bun.sleep(1_500);
    await raw.send("u".repeat(10));
    await raw.until((text) => statuses(text).length > 0, "an answer");
    expect(statuses(raw.text)).toEqual(["200"]);
    expect(reached).toEqual(["POST /upload 20"]);
  });

  test("an address the tunnel's IP flags refuse gets their 403 before any of its body is read", async () => {
    const before = reached.length;
    await using fenced = await withPolicy(`on_http_request: [{ actions: [{ type: verify-webhook, config: { provider: github, secret: "${SECRET}" } }] }]`, {
      server: t.server,
      username: "fenced-owner",
      args: ["--deny-cidr", "127.0.0.0/8"],
      upstream: async () => (reached.push("fenced"), new Response("ok")),
    });
    using raw = new Raw(t.server.edgePort);
    await raw.send(`POST /hook HTTP/1.1\r\nHost: ${fenced.agent.subdomain}.localhost\r\nContent-Length: 1000\r\nExpect: 100-continue\r\n\r\n`);
    await raw.until((text) => statuses(text).length > 0, "an answer");
    expect(statuses(raw.text)).toEqual(["403"]);
    expect(raw.text).toContain("Not from this address");
    expect(reached.length).toBe(before);
  });
});
