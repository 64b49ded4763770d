/**
 * Bodies a traffic policy rewrites (the class: a body whose length the
 * edge changes smuggles a request past the rules, or its holding and
 * rewriting take the edge's memory or CPU). A request rewritten by
 * request-body-find-replace, grown or shrunk, framed by a length or by
 * chunks, reaches the service as exactly its new body, and the bytes after
 * it are the next request, judged as one (a denied path stays denied);
 * response bodies held for response-body-find-replace are bounded together
 * by --policy-body-memory (one past it passes unchanged, and the room comes
 * back); a rewrite cannot grow a body past twice its size (1 MiB more for a
 * small one); a pattern of quadratic cost on a crafted body is stopped by
 * its steps at once.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { withPolicy, type PolicyTunnel } from "../traffic-policy/rig.ts";
import { Raw } from "./raw-connection.ts";

const POLICY = `
on_http_request:
  - expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: deny }]
  - expressions: ["req.url.path == '/grow'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: 'a', to: 'aaaa' }] }
  - expressions: ["req.url.path == '/shrink'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: 'secret:[a-z]*' }] }
  - expressions: ["req.url.path == '/grow-a-lot'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: '.', to: '${"x".repeat(1024)}' }] }
  - expressions: ["req.url.path == '/quadratic'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: '(a*c)?', to: 'x' }] }
on_http_response:
  - actions:
      - type: response-body-find-replace
        config: { replacements: [{ from: 'internal', to: 'public' }] }
`;

/** What the service got: method, path and body, in order. */
let reached: string[] = [];
const BIG = "internal ".repeat((2 * 1024 * 1024) / 9);

async function service(req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  reached.push(`${req.method} ${path} ${await req.text()}`);
  if (path === "/big") return new Response(BIG);
  return new Response("an internal page\n");
}

let t: PolicyTunnel;
beforeAll(async () => {
  // the memory every held body shares at its least: one 2 MiB response does not fit, under a 4 MiB limit of its own
  t = await withPolicy(POLICY, { upstream: service, server: { args: ["--policy-body-memory", "1048576", "--policy-response-body-limit", "4194304"] } });
}, 30_000);
afterAll(() => t?.close());

const host = () => new URL(t.url("/")).host;
const statuses = (text: string) => [...text.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => m[1]);

describe("a rewritten request's length", () => {
  test("a body grown by the rewrite (Content-Length), a request after it in the same packet: the service gets the grown body, the request after is judged (denied)", async () => {
    reached = [];
    using raw = new Raw(t.server.edgePort);
    await raw.send(`POST /grow HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: 3\r\n\r\nbabGET /admin/users HTTP/1.1\r\nHost: ${host()}\r\n\r\n`);
    await raw.until((text) => statuses(text).length === 2, "two answers");
    expect(statuses(raw.text)).toEqual(["200", "403"]);
    expect(reached).toEqual(["POST /grow baaaab"]);
  });

  test("a chunked body shrunk by the rewrite, a request after its last chunk: the service gets the shrunk body alone, the request after is judged (denied)", async () => {
    reached = [];
    using raw = new Raw(t.server.edgePort);
    const body = "x=1 secret:abc y=2";
    const chunked = `5\r\n${body.slice(0, 5)}\r\n${(body.length - 5).toString(16)}\r\n${body.slice(5)}\r\n0\r\n\r\n`;
    await raw.send(`POST /shrink HTTP/1.1\r\nHost: ${host()}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}GET /admin HTTP/1.1\r\nHost: ${host()}\r\n\r\n`);
    await raw.until((text) => statuses(text).length === 2, "two answers");
    expect(statuses(raw.text)).toEqual(["200", "403"]);
    expect(reached).toEqual(["POST /shrink x=1  y=2"]);
  });

  test("a body whose old length would reach into a smuggled request: the service reads only the new body, and the smuggled text is the next request, judged", async () => {
    reached = [];
    using raw = new Raw(t.server.edgePort);
    // shrunk from 40 bytes to 10: were the old length sent with the new body, the service would read the GET as a request of its own
    const body = `before \nsecret:aaaaaaaaaaaaaaaaaaaaa \nend`;
    await raw.send(`POST /shrink HTTP/1.1\r\nHost: ${host()}\r\nContent-Length: ${body.length}\r\n\r\n${body}GET /admin/keys HTTP/1.1\r\nHost: ${host()}\r\n\r\n`);
    await raw.until((text) => statuses(text).length === 2, "two answers");
    expect(statuses(raw.text)).toEqual(["200", "403"]);
    expect(reached).toEqual(["POST /shrink before \n \nend"]);
  });
});

describe("the edge's memory and CPU", () => {
  test("response bodies held to be rewritten share --policy-body-memory: one past it passes unchanged, and the room comes back for the next", async () => {
    const big = await fetch(t.url("/big"));
    const text = await big.text();
    expect(text.length).toBe(BIG.length);
    expect(text.startsWith("internal ")).toBe(true);
    const small = await fetch(t.url("/page"));
    expect(await small.text()).toBe("an public page\n");
  });

  test("a rewrite that would make 60 MB of a 60 KB body stops at its bound (1 MiB more): 500 at once, nothing reaches the service", async () => {
    reached = [];
    const r = await fetch(t.url("/grow-a-lot"), { method: "POST", body: "a".repeat(60_000) });
    expect(r.status).toBe(500);
    expect(reached).toEqual([]);
  });

  test("a pattern of quadratic cost under replace-all on a crafted body is stopped by its steps: 500 at once", async () => {
    const started = performance.now();
    const r = await fetch(t.url("/quadratic"), { method: "POST", body: "a".repeat(200_000) });
    expect(r.status).toBe(500);
    // liveness only: unbounded, 2e10 steps
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});
