/**
 * close-connection through a real server, agent and local service: in
 * on_http_request an HTTP/1.1 connection is closed with no byte answered,
 * an HTTP/2 stream (curl --http2-prior-knowledge) fails with no answer and
 * its connection takes no new stream, and a request relayed from another
 * node is closed by the node that holds the visitor; in on_tcp_connect a
 * tcp tunnel's connection is closed before the service hears of it.
 * Requests the rule does not match are answered as before.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import * as http2 from "node:http2";
import { connect } from "node:net";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { signedIn } from "../harness/admin.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import type { TestServer } from "../harness/server.ts";
import { withTunnel } from "../harness/tunnel.ts";
import { waitUntil } from "../harness/wait.ts";
import { curl } from "./curl.ts";
import { policyFile, withPolicy, type PolicyTunnel } from "./rig.ts";

const CLOSE_DC = `
on_http_request:
  - name: close
    expressions: ["req.url.path.startsWith('/dc')"]
    actions:
      - type: close-connection
      - type: custom-response
        config: { status_code: 200, body: "after the close" }
`;

/** What a raw HTTP/1.1 request on its own connection got back before the connection closed (bounded in time). */
function rawExchange(port: number, request: string): Promise<{ bytes: string; closed: boolean }> {
  return new Promise((resolve) => {
    let bytes = "";
    const sock = connect(port, "127.0.0.1", () => sock.write(request));
    const timer = setTimeout(() => (sock.destroy(), resolve({ bytes, closed: false })), 10_000);
    sock.on("data", (d) => (bytes += d.toString("latin1")));
    sock.on("close", () => (clearTimeout(timer), resolve({ bytes, closed: true })));
    sock.on("error", () => {});
  });
}

/** curl's exit code, stdout and stderr (it is expected to fail). */
async function curlRun(args: string[]): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn(["curl", "-sS", "--max-time", "10", ...args], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

describe("close-connection in on_http_request", () => {
  let release: () => void = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let t: PolicyTunnel;
  let reached: string[] = [];
  beforeAll(async () => {
    t = await withPolicy(CLOSE_DC, {
      upstream: async (req) => {
        const path = new URL(req.url).pathname;
        reached.push(path);
        // held in flight until the test has seen the other stream of its connection closed
        if (path === "/slow") await gate;
        return new Response("service");
      },
    });
  }, 30_000);
  afterAll(() => t?.close());
  const host = () => `${t.agent.subdomain}.localhost:${t.server.edgePort}`;

  test("HTTP/1.1: the connection is closed with no byte answered; the service never hears of it", async () => {
    reached = [];
    const r = await rawExchange(t.server.edgePort, `GET /dc/x HTTP/1.1\r\nHost: ${host()}\r\n\r\n`);
    expect(r).toEqual({ bytes: "", closed: true });
    expect(reached).toEqual([]);
    // the request before it on a kept-alive connection was answered; nothing after the close is
    const kept = await rawExchange(t.server.edgePort, `GET /ok HTTP/1.1\r\nHost: ${host()}\r\n\r\nGET /dc HTTP/1.1\r\nHost: ${host()}\r\n\r\nGET /later HTTP/1.1\r\nHost: ${host()}\r\n\r\n`);
    expect(kept.closed).toBe(true);
    expect([...kept.bytes.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))).toEqual([200]);
    expect(reached).toEqual(["/ok"]);
  }, 20_000);

  test("curl over HTTP/1.1 fails with an empty reply; a request the rule does not match is answered", async () => {
    const closed = await curlRun([t.url("/dc")]);
    expect([52, 56]).toContain(closed.code); // an empty reply, or the connection reset under it
    expect(closed.out).toBe("");
    expect((await curl(t.url("/fine"))).status).toBe(200);
  }, 20_000);

  test("HTTP/2 (h2c, prior knowledge): the stream fails with no answer; other requests are answered", async () => {
    reached = [];
    const closed = await curlRun(["--http2-prior-knowledge", t.url("/dc")]);
    expect(closed.code).not.toBe(0);
    expect(closed.out).toBe("");
    expect(reached).toEqual([]);
    const open = await curlRun(["--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_version} %{http_code}", t.url("/fine")]);
    expect(open).toEqual({ code: 0, out: "2 200", err: "" });
  }, 20_000);

  test("HTTP/2: the stream is reset and the connection sent GOAWAY; a stream in flight on it still gets its answer", async () => {
    reached = [];
    const session = http2.connect(`http://127.0.0.1:${t.server.edgePort}`);
    session.on("error", () => {});
    try {
      const authority = host();
      let goaway = false;
      session.on("goaway", () => (goaway = true));
      const slow = session.request({ ":path": "/slow", ":authority": authority });
      const slowAnswer = new Promise<{ status: number; body: string } | string>((resolve) => {
        let status = 0;
        let body = "";
        slow.on("response", (h) => (status = Number(h[":status"])));
        slow.on("data", (d: Buffer) => (body += d.toString()));
        slow.on("end", () => resolve({ status, body }));
        slow.on("error", (e: Error) => resolve(String(e)));
      });
      // the first stream is in flight at the service before the second is judged
      await waitUntil(async () => reached.includes("/slow"), 5_000, "the first stream at the service", 25);
      const dc = session.request({ ":path": "/dc", ":authority": authority });
      const dcEnd = await new Promise<string>((resolve) => {
        dc.on("response", (h) => resolve(`answered ${h[":status"]}`));
        dc.on("error", (e: Error) => resolve(String(e)));
        dc.on("close", () => resolve(`closed ${dc.rstCode}`));
      });
      expect(dcEnd).not.toContain("answered");
      expect(dc.rstCode).toBe(http2.constants.NGHTTP2_CANCEL);
      release();
      expect(await slowAnswer).toEqual({ status: 200, body: "service" });
      expect(goaway).toBe(true);
      expect(reached).toEqual(["/slow"]);
    } finally {
      release();
      session.destroy();
    }
  }, 20_000);
});

describe("close-connection in on_tcp_connect", () => {
  test("a tcp tunnel's connection is closed before the service hears of it", async () => {
    let heard = 0;
    const service = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => (heard++, void s.write("ready\n")), data: (s, d) => void s.write(d) } });
    using closing = policyFile("on_tcp_connect:\n  - actions: [{ type: close-connection }]\n");
    try {
      await using t = await withTunnel({ kind: "tcp", upstream: service.port, args: ["--policy-file", closing.path] });
      const r = await rawExchange(t.agent.port!, "hello");
      expect(r).toEqual({ bytes: "", closed: true });
      expect(heard).toBe(0);
    } finally {
      service.stop(true);
    }
  }, 30_000);
});

describe("close-connection for a request relayed from another node", () => {
  const SECRET = "close-relay-secret-0123456789abcdef";
  let cluster: TwoNodes | undefined;
  let nodes: TestServer[] = [];
  let agent: TestAgent | undefined;
  let reached: string[] = [];
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => (reached.push(new URL(req.url).pathname), new Response("service")) });
  const file = policyFile(CLOSE_DC);

  beforeAll(async () => {
    cluster = await startTwoNodes({ ids: ["c1", "c2"], secret: SECRET });
    nodes = cluster.nodes;
    const api = await signedIn(nodes[0]!);
    const token = await api.createToken(await api.createUser("closer", { skip_warning: true }));
    agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "closer", "--policy-file", file.path] });
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    await cluster?.stop();
    upstream.stop(true);
    file[Symbol.dispose]();
  });

  test("the node that holds the visitor closes its connection unanswered, over HTTP/1.1 and HTTP/2; other requests pass", async () => {
    reached = [];
    const other = nodes[1]!;
    const r = await rawExchange(other.edgePort, `GET /dc HTTP/1.1\r\nHost: closer.localhost:${other.edgePort}\r\n\r\n`);
    expect(r).toEqual({ bytes: "", closed: true });
    const h2 = await curlRun(["--http2-prior-knowledge", `http://closer.localhost:${other.edgePort}/dc`]);
    expect(h2.code).not.toBe(0);
    expect(h2.out).toBe("");
    expect(reached).toEqual([]);
    expect((await curl(`http://closer.localhost:${other.edgePort}/fine`)).status).toBe(200);
    expect(reached).toEqual(["/fine"]);
  }, 30_000);
});
