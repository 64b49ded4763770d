/**
 * Traffic policy bypass (the class: a request or connection that reaches
 * the service without meeting the tunnel's policy rules, because it came
 * another way). Every rule holds on every entry path: a WebSocket upgrade,
 * an absolute-form target (its path and authority are what the rules
 * read), a path written to look like another, the second request of a
 * kept-alive connection and pipelined ones, an HTTP/2 stream's response
 * (on_http_response holds on the stream, each of a connection's streams),
 * a tcp tunnel's connection (on_tcp_connect), and a request relayed from
 * another node of a cluster, judged where the tunnel's rules live.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { selfSignedCertificate } from "../harness/certs.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { signedIn } from "../harness/admin.ts";
import { startTwoNodes, type TwoNodes } from "../harness/cluster.ts";
import { rawHttp } from "../harness/raw-http.ts";
import type { TestServer } from "../harness/server.ts";
import { withServer, withTunnel } from "../harness/tunnel.ts";
import { NGHTTP, nghttp2Available, run } from "../harness/nghttp2.ts";
import { curl } from "../traffic-policy/curl.ts";
import { policyFile, withPolicy, type PolicyTunnel } from "../traffic-policy/rig.ts";

const DENY_ADMIN = `
on_http_request:
  - name: no admin
    expressions: ["req.url.path.startsWith('/admin')"]
    actions: [{ type: deny }]
`;

describe("an http tunnel's rules on every way in", () => {
  let t: PolicyTunnel;
  let reached: string[] = [];
  beforeAll(async () => {
    t = await withPolicy(DENY_ADMIN, {
      upstream: (req) => {
        reached.push(new URL(req.url).pathname);
        return new Response("service", { headers: { "content-length": "7" } });
      },
    });
  });
  afterAll(() => t?.close());
  const host = () => `${t.agent.subdomain}.localhost:${t.server.edgePort}`;

  test("a WebSocket upgrade to a refused path is refused, and never switched", async () => {
    reached = [];
    const r = await rawHttp(
      t.server.edgePort,
      `GET /admin/ws HTTP/1.1\r\nHost: ${host()}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
      2_000, // the refusal keeps the connection: what came by then
    );
    expect(r.status).toBe(403);
    expect(r.head).not.toContain("101");
    expect(reached).toEqual([]);
  }, 15_000);

  test("an absolute-form target is judged by its own path and authority, whatever Host says", async () => {
    reached = [];
    const r = await rawHttp(t.server.edgePort, `GET http://${host()}/admin/x HTTP/1.1\r\nHost: elsewhere.example\r\nConnection: close\r\n\r\n`);
    expect(r.status).toBe(403);
    expect(reached).toEqual([]);
  });

  test("paths that read as /admin once made normal are refused: dot segments, encoded letters, double slashes", async () => {
    reached = [];
    for (const path of ["/x/../admin", "/%61dmin/panel", "/./admin", "/admin%2F..%2Fx"]) {
      const r = await rawHttp(t.server.edgePort, `GET ${path} HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
      expect([403, 400]).toContain(r.status);
    }
    expect(reached).toEqual([]);
  });

  test("on a kept-alive connection, and pipelined, each request is judged", async () => {
    reached = [];
    const replies = await new Promise<string>((resolve, reject) => {
      const sock = connect(t.server.edgePort, "127.0.0.1", () => {
        sock.write(`GET /ok HTTP/1.1\r\nHost: ${host()}\r\n\r\nGET /admin HTTP/1.1\r\nHost: ${host()}\r\n\r\nGET /fine HTTP/1.1\r\nHost: ${host()}\r\nConnection: close\r\n\r\n`);
      });
      let got = "";
      sock.on("data", (d) => (got += d.toString("latin1")));
      sock.on("close", () => resolve(got));
      sock.on("error", reject);
      setTimeout(() => (sock.destroy(), resolve(got)), 10_000);
    });
    expect([...replies.matchAll(/HTTP\/1\.1 (\d{3})/g)].map((m) => Number(m[1]))).toEqual([200, 403, 200]);
    expect(reached).toEqual(["/ok", "/fine"]);
  });
});

describe("an HTTP/2 stream's response", () => {
  const HIDE = `
on_http_response:
  - actions: [{ type: remove-headers, config: { headers: [x-internal-secret] } }]
  - expressions: ["req.url.path.startsWith('/private')"]
    actions: [{ type: custom-response, config: { status_code: 404, body: "not here" } }]
`;
  let t: PolicyTunnel;
  beforeAll(async () => {
    if (!nghttp2Available()) throw new Error("nghttp is not installed: install Debian's nghttp2-client package (.ci/run installs it)");
    t = await withPolicy(HIDE, { upstream: () => new Response("service secret", { headers: { "x-internal-secret": "s3cr3t" } }) });
  });
  afterAll(() => t?.close());

  test("h2c prior knowledge (curl): the response rules hold on the stream itself, not only over HTTP/1.1", async () => {
    const h2c = (path: string) => run(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", "-D", "-", "-w", "\n%{http_version}", t.url(path)], 30_000);
    const hidden = await h2c("/private/x");
    expect(hidden.stdout).toStartWith("HTTP/2 404");
    expect(hidden.stdout).toEndWith("\r\n\r\nnot here\n2");
    const open = await h2c("/open");
    expect(open.stdout).toStartWith("HTTP/2 200");
    expect(open.stdout).toEndWith("\r\n\r\nservice secret\n2");
    expect(open.stdout.toLowerCase()).not.toContain("x-internal-secret");
  });

  test("every stream of one connection (nghttp, concurrent and on kept tunnel streams) meets them", async () => {
    const host = `${t.agent.subdomain}.localhost:${t.server.edgePort}`;
    const paths = Array.from({ length: 12 }, (_, i) => (i % 2 === 0 ? `/open/${i}` : `/private/${i}`));
    const r = await run([NGHTTP, "-v", "-H", `:authority: ${host}`, ...paths.map((p) => `http://127.0.0.1:${t.server.edgePort}${p}`)], 60_000);
    expect(r.code).toBe(0);
    expect(r.stdout).not.toContain("x-internal-secret");
    expect(r.stdout.match(/service secret/g)?.length).toBe(6);
    expect(r.stdout.match(/not here/g)?.length).toBe(6);
  });
});

describe("an http tunnel's on_tcp_connect", () => {
  test("a connection its rules close gets no answer, whatever the request; one they let through is served, each request after the first too", async () => {
    let reached = 0;
    await using closed = await withPolicy("on_tcp_connect:\n  - actions: [{ type: restrict-ips, config: { deny: [127.0.0.0/8] } }]\n", { upstream: () => (reached++, new Response("service")) });
    const host = `${closed.agent.subdomain}.localhost:${closed.server.edgePort}`;
    for (const request of [`GET / HTTP/1.1\r\nHost: ${host}\r\n\r\n`, `GET http://${host}/x HTTP/1.1\r\nHost: ${host}\r\n\r\n`]) {
      const r = await rawHttp(closed.server.edgePort, request);
      expect(r.status).toBe(0);
      expect(r.closed).toBe(true);
    }
    expect(reached).toBe(0);
    await using open = await withPolicy("on_tcp_connect:\n  - actions: [{ type: restrict-ips, config: { allow: [127.0.0.0/8] } }]\n");
    const h = `${open.agent.subdomain}.localhost:${open.server.edgePort}`;
    const both = await rawHttp(open.server.edgePort, `GET /1 HTTP/1.1\r\nHost: ${h}\r\n\r\nGET /2 HTTP/1.1\r\nHost: ${h}\r\nConnection: close\r\n\r\n`);
    expect((both.head + both.body).match(/HTTP\/1\.1 200/g)?.length).toBe(2);
  });
});

describe("a tcp tunnel's on_tcp_connect", () => {
  test("a connection its rules close is closed before a byte reaches the service; one they let through is carried", async () => {
    using refused = policyFile("on_tcp_connect:\n  - actions: [{ type: restrict-ips, config: { deny: [127.0.0.0/8] } }]\n");
    await using t = await withTunnel({ kind: "tcp", upstream: { echo: true }, args: ["--policy-file", refused.path] });
    const got = await talk(t.agent.port!, "hello");
    expect(got).toBe("");
    using allowed = policyFile("on_tcp_connect:\n  - actions: [{ type: restrict-ips, config: { allow: [127.0.0.0/8] } }]\n");
    const agent = await t.startAgent({ kind: "tcp", target: t.upstreamPort, args: ["--policy-file", allowed.path] });
    expect(await talk(agent.port!, "hello")).toBe("ready\nhello");
  });

  test("rate-limit in on_tcp_connect: past the capacity, connections are closed", async () => {
    using file = policyFile("on_tcp_connect:\n  - actions: [{ type: rate-limit, config: { name: c, algorithm: sliding_window, capacity: 2, rate: 60s, bucket_key: [conn.client_ip] } }]\n");
    await using t = await withTunnel({ kind: "tcp", upstream: { echo: true }, args: ["--policy-file", file.path] });
    const got = [];
    for (let i = 0; i < 4; i++) got.push(await talk(t.agent.port!, "x"));
    expect(got).toEqual(["ready\nx", "ready\nx", "", ""]);
  });
});

describe("a tls tunnel's on_tcp_connect", () => {
  test("a TLS connection its rules close never reaches the service; one they let through shakes hands with it", async () => {
    const dir = mkdtempSync(join(tmpdir(), "burrow-tls-policy-"));
    const cert = await selfSignedCertificate({ names: ["tlsruled.localhost", "tlsopen.localhost"], ca: true, commonName: "the local service" });
    const ca = join(dir, "ca.pem");
    writeFileSync(ca, cert.certPem);
    const service = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: () => new Response("tls service\n") });
    using refused = policyFile("on_tcp_connect:\n  - actions: [{ type: restrict-ips, config: { deny: [127.0.0.0/8] } }]\n");
    using allowed = policyFile("on_tcp_connect:\n  - actions: [{ type: restrict-ips, config: { allow: [127.0.0.0/8] } }]\n");
    try {
      await using rig = await withServer({ server: { args: ["--tls-port", "0"] }, user: { allowed_protocols: "http,tls" } });
      await rig.startAgent({ kind: "tls", target: service.port!, args: ["--subdomain", "tlsruled", "--policy-file", refused.path] });
      await rig.startAgent({ kind: "tls", target: service.port!, args: ["--subdomain", "tlsopen", "--policy-file", allowed.path] });
      const via = async (name: string) => {
        const p = Bun.spawn(["curl", "-sS", "--max-time", "10", "--resolve", `${name}:${rig.server.tlsPort}:127.0.0.1`, "--cacert", ca, `https://${name}:${rig.server.tlsPort}/`], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
        const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
        return { out, code };
      };
      const closed = await via("tlsruled.localhost");
      expect(closed.code).not.toBe(0);
      expect(closed.out).toBe("");
      expect(await via("tlsopen.localhost")).toEqual({ out: "tls service\n", code: 0 });
    } finally {
      service.stop(true);
      rmSync(dir, { recursive: true, force: true });
    }
  }, 30_000);
});

/** Connects, sends `text` once the service said hello (or after 1 s), reads until the echo or the close; what came back. */
function talk(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    let got = "";
    const sock = connect(port, "127.0.0.1");
    const done = () => (clearTimeout(timer), sock.destroy(), resolve(got));
    const timer = setTimeout(done, 5_000);
    let sent = false;
    const send = () => {
      if (sent) return;
      sent = true;
      sock.write(text);
    };
    sock.on("connect", () => setTimeout(send, 300));
    sock.on("data", (d) => {
      got += d.toString();
      if (got.startsWith("ready\n")) send();
      if (got.endsWith(text) && sent) done();
    });
    sock.on("close", done);
    sock.on("error", done);
  });
}

describe("a request relayed from another node", () => {
  const SECRET = "policy-relay-secret-0123456789abcdef";
  let cluster: TwoNodes | undefined;
  let nodes: TestServer[] = [];
  let agent: TestAgent | undefined;
  let reached = 0;
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (reached++, new Response("service", { headers: { "x-from-service": "yes" } })) });
  const file = policyFile(`${DENY_ADMIN}
  - name: limited
    actions:
      - type: rate-limit
        config: { name: all, algorithm: sliding_window, capacity: 3, rate: 60s }
on_http_response:
  - actions: [{ type: add-headers, config: { headers: { x-policy: "on the agent's node" } } }]
`);

  beforeAll(async () => {
    cluster = await startTwoNodes({ ids: ["p1", "p2"], secret: SECRET });
    nodes = cluster.nodes;
    const api = await signedIn(nodes[0]!);
    const token = await api.createToken(await api.createUser("relayed", { skip_warning: true }));
    agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "ruled", "--policy-file", file.path] });
  }, 60_000);
  afterAll(async () => {
    await agent?.stop();
    await cluster?.stop();
    upstream.stop(true);
    file[Symbol.dispose]();
  });

  test("a visitor on the other node meets the tunnel's rules: the deny, the rate limit (one count for both nodes' visitors), the response's headers", async () => {
    const via = (n: TestServer, path: string) => curl(`http://ruled.localhost:${n.edgePort}${path}`);
    expect((await via(nodes[1]!, "/admin")).status).toBe(403);
    const first = await via(nodes[1]!, "/a");
    expect(first.status).toBe(200);
    expect(first.headers["x-policy"]).toBe("on the agent's node");
    expect((await via(nodes[0]!, "/b")).status).toBe(200);
    expect((await via(nodes[1]!, "/c")).status).toBe(200);
    const over = await via(nodes[1]!, "/d");
    expect(over.status).toBe(429);
    expect(reached).toBe(3);
  });
});
