/**
 * An HTTP/2 visitor on one node reaches a tunnel held by another: each
 * stream is relayed as an HTTP/1.1 request on an "h1" stream with the
 * visitor's address as judged on its node, and the tunnel's rules are
 * applied on the agent's node (relayed-http door), stream by stream: a
 * stream without the password is refused there, one with it passes, on the
 * same h2 connection; and the warning is shown there, after them.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { headers, settingsAck } from "../harness/h2-frames.ts";
import { rawH2 } from "../harness/h2-raw.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

setDefaultTimeout(120_000);

const SECRET = "h2-relay-secret-for-tests-0123456789abc";
let pg: TestPostgres;
let nodes: TestServer[] = [];
let agent: TestAgent | undefined;
const seen: { path: string; xff: string | null; realIp: string | null }[] = [];
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const url = new URL(req.url);
    seen.push({ path: url.pathname, xff: req.headers.get("x-forwarded-for"), realIp: req.headers.get("x-real-ip") });
    if (url.pathname === "/echo") return new Response(await req.arrayBuffer());
    return new Response(`on r1: ${url.pathname}`);
  },
});

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["r1", "r2"].map((id, i) =>
      startServer({ args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET] }),
    ),
  );
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("relayed-h2"));
  // the tunnel on r1, with a password; visitors come to r2
  agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "far", "--basic-auth", "erin:pw-far"] });
});
afterAll(async () => {
  await agent?.stop();
  await Promise.all(nodes.map((n) => n.stop()));
  upstream.stop(true);
  await pg?.stop();
});

describe("an h2 visitor on another node", () => {
  test("each stream is judged on the tunnel's node: without the password refused, with it through", async () => {
    const port = nodes[1]!.edgePort;
    const host = `far.localhost:${port}`;
    await using c = await rawH2(port);
    const get = (id: number, extra: [string, string][]) => headers(id, [[":method", "GET"], [":scheme", "http"], [":authority", host], [":path", `/s${id}`], ["user-agent", "curl/8"], ...extra]);
    c.send(settingsAck(), get(1, []), get(3, [["authorization", `Basic ${btoa("erin:pw-far")}`]]), get(5, [["authorization", `Basic ${btoa("erin:nope")}`]]));
    await c.until(() => [1, 3, 5].every((id) => c.frames.status(id) !== undefined && c.frames.body(id) !== ""), 10_000, "three answers");
    expect([c.frames.status(1), c.frames.status(3), c.frames.status(5)]).toEqual(["401", "200", "401"]);
    expect(c.frames.body(3)).toBe("on r1: /s3");
    expect(seen.map((s) => s.path)).toEqual(["/s3"]);
    // the visitor's address as r2 judged it
    expect(seen[0]!.realIp).toBe("127.0.0.1");
    // a browser's stream past the password: the warning, shown by r1 after its rules
    c.send(headers(7, [[":method", "GET"], [":scheme", "http"], [":authority", host], [":path", "/s7"], ["user-agent", "Mozilla/5.0 Chrome/126.0"], ["accept", "text/html"], ["authorization", `Basic ${btoa("erin:pw-far")}`]]));
    await c.until(() => c.frames.body(7).includes("</html>"), 10_000, "the warning");
    expect(c.frames.body(7)).toContain("This site is served through a tunnel");
    expect(seen.map((s) => s.path)).toEqual(["/s3"]);
  });

  test("a 1 MiB body through the relay and back, over h2", async () => {
    const port = nodes[1]!.edgePort;
    const host = `far.localhost:${port}`;
    const body = new Uint8Array(1024 * 1024).map((_, i) => (i * 13) & 0xff);
    const proc = Bun.spawn(["curl", "-sS", "--http2-prior-knowledge", "-u", "erin:pw-far", "--resolve", `${host}:127.0.0.1`, "--data-binary", "@-", "-w", "", `http://${host}/echo`], { stdin: body, stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    const back = new Uint8Array(await new Response(proc.stdout).arrayBuffer());
    expect(await proc.exited).toBe(0);
    expect(back.byteLength).toBe(body.byteLength);
    expect(Bun.hash(back)).toBe(Bun.hash(body));
  });
});
