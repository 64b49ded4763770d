/**
 * TLS passed through by name (`burrow tls`): a real nginx with a
 * certificate of its own behind the tunnel, reached with curl and openssl
 * through the server's --tls-port and through its public HTTPS port. The
 * visitor verifies the local service's certificate (not the server's), HTTP/2
 * and a gRPC call work end to end, and the server never decrypts: names it does not know
 * get TLS's unrecognized_name alert, bytes that are no ClientHello are
 * closed, a hello split in many pieces still routes. Who may open one
 * (`allowed_protocols` gains `tls`, PROTOCOL_DENIED) and a server that
 * passes nothing through (TLS_UNAVAILABLE) are checked too.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Socket } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, tunnelFetch } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { captureHello } from "../harness/client-hello.ts";
import { grpcSay, startGrpcEcho } from "../harness/grpc.ts";
import { startNginx, type TestNginx } from "../harness/nginx.ts";
import { freeRange } from "../harness/ports.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { sample, scrape } from "../harness/metrics.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { parseClientHello, type ClientHello } from "../../src/tls/client-hello.ts";
import { ja4 } from "../../src/tls/ja4.ts";

let dir: string;
/** The local service's certificate (svc.localhost, other.localhost), also the visitors' trust anchor. */
let serviceCa: string;
let nginx: TestNginx;
/** nginx's TLS port, and its TLS port that expects a PROXY protocol header first. */
let tlsPort: number;
let proxiedPort: number;
let server: TestServer;
let api: AdminClient;
let token: string;

/** Runs a program to its end without blocking this process (whose own servers may be the ones it talks to). */
async function run(cmd: string[], input?: string): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn(cmd, { stdin: input === undefined ? "ignore" : Buffer.from(input), stdout: "pipe", stderr: "pipe", timeout: 20_000 });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** curl to https://NAME:PORT/ resolved to 127.0.0.1, trusting `ca`. */
function curl(name: string, port: number, ca: string, extra: string[] = []) {
  return run(["curl", "-sS", "--max-time", "10", "--resolve", `${name}:${port}:127.0.0.1`, "--cacert", ca, ...extra, `https://${name}:${port}/`]);
}

/** The SHA-256 fingerprint of the certificate `openssl s_client` is shown at 127.0.0.1:`port` for `name`. */
async function servedFingerprint(port: number, name: string): Promise<string> {
  const shown = await run(["openssl", "s_client", "-connect", `127.0.0.1:${port}`, "-servername", name], "");
  return (await run(["openssl", "x509", "-noout", "-fingerprint", "-sha256"], shown.out)).out.trim();
}
const fileFingerprint = async (file: string) => (await run(["openssl", "x509", "-noout", "-fingerprint", "-sha256", "-in", file])).out.trim();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-tls-passthrough-"));
  const cert = await selfSignedCertificate({ names: ["svc.localhost", "other.localhost", "proxied.localhost", "split.localhost", "grpc.localhost"], ca: true, commonName: "the local service" });
  serviceCa = join(dir, "service.pem");
  writeFileSync(serviceCa, cert.certPem);
  writeFileSync(join(dir, "service-key.pem"), cert.keyPem);
  const ports = freeRange(2);
  tlsPort = ports.first;
  proxiedPort = ports.last;
  const tls = `ssl_certificate ${serviceCa}; ssl_certificate_key ${join(dir, "service-key.pem")};`;
  nginx = await startNginx(
    `server { listen 127.0.0.1:${tlsPort} ssl http2; ${tls}
      location / { return 200 "nginx over tls: $ssl_server_name $server_protocol\\n"; } }
    server { listen 127.0.0.1:${proxiedPort} ssl proxy_protocol; ${tls}
      location / { return 200 "visitor=$proxy_protocol_addr:$proxy_protocol_port\\n"; } }`,
    tlsPort,
  );
  server = await startServer({ args: ["--tls-port", "0"] });
  api = await signedIn(server);
  token = await api.createToken(await api.createUser("tls-user", { allowed_protocols: "http,tls" }));
});
afterAll(async () => {
  await server?.stop();
  await nginx?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("on --tls-port", () => {
  test("the visitor verifies the local service's own certificate through burrow, and the ready line names the port", async () => {
    expect(server.tlsPort).toBeGreaterThan(0);
    await using agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc"] });
    expect(agent.publicUrl).toBe(`tls://svc.localhost:${server.tlsPort}`);
    for (let i = 0; i < 3; i++) {
      const r = await curl("svc.localhost", server.tlsPort!, serviceCa, ["--http1.1"]);
      expect(r.err).toBe("");
      expect(r.out).toBe("nginx over tls: svc.localhost HTTP/1.1\n");
    }
    // the certificate shown is the service's, byte for byte: the server holds none for the name
    expect(await servedFingerprint(server.tlsPort!, "svc.localhost")).toBe(await fileFingerprint(serviceCa));
  });

  test("HTTP/2 end to end: ALPN is the service's to answer", async () => {
    await using _agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc"] });
    const r = await curl("svc.localhost", server.tlsPort!, serviceCa, ["--http2", "-w", "%{http_version}"]);
    expect(r.out).toBe("nginx over tls: svc.localhost HTTP/2.0\n2");
  });

  test("a name no tls tunnel has, or none at all, gets TLS's unrecognized_name alert", async () => {
    await using _agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc"] });
    const nobody = await run(["openssl", "s_client", "-connect", `127.0.0.1:${server.tlsPort}`, "-servername", "nobody.localhost"], "");
    expect(nobody.out + nobody.err).toMatch(/unrecognized name/i);
    const nameless = await run(["openssl", "s_client", "-connect", `127.0.0.1:${server.tlsPort}`, "-noservername"], "");
    expect(nameless.out + nameless.err).toMatch(/unrecognized name/i);
  });

  test("bytes that are no ClientHello are closed, with nothing said", async () => {
    const reply = await rawHttp(server.tlsPort!, "GET / HTTP/1.1\r\nHost: svc.localhost\r\n\r\n");
    expect(reply.closed).toBe(true);
    expect(reply.status).toBe(0);
    expect(reply.head).toBe("");
  });

  test("a ClientHello sent a few bytes at a time still finds its tunnel", async () => {
    await using _agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "split"] });
    // a proxy in the way that passes the visitor's bytes on in order, its first 2 KiB 5 bytes a write
    let sent = 0;
    const trickle = Bun.listen<{ up: Promise<Socket<undefined>>; chain: Promise<void> }>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open(s) {
          const up = Bun.connect({ hostname: "127.0.0.1", port: server.tlsPort!, socket: { data: (_u, d) => void s.write(d), close: () => void s.end() } });
          s.data = { up, chain: up.then(() => undefined) };
        },
        data(s, d) {
          const bytes = d.slice();
          s.data.chain = s.data.chain.then(async () => {
            const up = await s.data.up;
            for (let at = 0; at < bytes.byteLength; ) {
              const n = sent < 2048 ? 5 : bytes.byteLength - at;
              up.write(bytes.subarray(at, at + n));
              at += n;
              sent += n;
              if (sent < 2048) await Bun.sleep(1);
            }
          });
        },
        close: (s) => void s.data?.up.then((u) => u.end()),
      },
    });
    try {
      const r = await curl("split.localhost", trickle.port, serviceCa, ["--http1.1"]);
      expect(r.out).toBe("nginx over tls: split.localhost HTTP/1.1\n");
    } finally {
      trickle.stop(true);
    }
  });

  test("--proxy-protocol: the service behind TLS sees the visitor's address and port", async () => {
    await using _agent = await startAgent({ kind: "tls", target: proxiedPort, server: server.edgeUrl, token, args: ["--subdomain", "proxied", "--proxy-protocol"] });
    const local = freeRange(1).first;
    const r = await curl("proxied.localhost", server.tlsPort!, serviceCa, ["--local-port", String(local)]);
    expect(r.out).toBe(`visitor=127.0.0.1:${local}\n`);
  });

  test("a gRPC call (Debian's python3-grpcio, over its own TLS) works end to end", async () => {
    const port = freeRange(1).first;
    await using _service = await startGrpcEcho(port, serviceCa, join(dir, "service-key.pem"));
    await using _agent = await startAgent({ kind: "tls", target: port, server: server.edgeUrl, token, args: ["--subdomain", "grpc"] });
    expect(await grpcSay(server.tlsPort!, serviceCa, "grpc.localhost", "through burrow")).toBe("echo: through burrow");
    // and straight to it, the same: the tunnel changes nothing
    expect(await grpcSay(port, serviceCa, "grpc.localhost", "direct")).toBe("echo: direct");
  });

  test("a plain HTTP request for the tls tunnel's name gets a 421 page saying where it is", async () => {
    await using _agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc"] });
    const res = await tunnelFetch(server.edgePort, "svc", "/");
    expect(res.status).toBe(421);
    expect(await res.text()).toContain(`svc.localhost:${server.tlsPort}`);
  });

  test("the name is one of the names http tunnels have: an http tunnel cannot take it meanwhile", async () => {
    await using _agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc"] });
    expect(await refusal({ kind: "http", target: 9, server: server.edgeUrl, token, args: ["--subdomain", "svc"] })).toContain("SUBDOMAIN_TAKEN");
  });

  test("IP rules are the tunnel's: a denied visitor is closed before anything reaches the agent; an allowed one passes", async () => {
    await using denied = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc", "--deny-cidr", "127.0.0.0/8", "--log", "text"] });
    const r = await curl("svc.localhost", server.tlsPort!, serviceCa, ["--http1.1"]);
    expect(r.out).toBe("");
    expect(r.err).not.toBe("");
    await Bun.sleep(200);
    expect(denied.output.text()).not.toContain("connection from");
    await denied.stop();
    await using allowed = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc", "--allow-cidr", "127.0.0.1/32", "--log", "text"] });
    expect((await curl("svc.localhost", server.tlsPort!, serviceCa, ["--http1.1"])).out).toBe("nginx over tls: svc.localhost HTTP/1.1\n");
    await allowed.output.waitFor(/connection from 127\.0\.0\.1:\d+/, 5_000);
  });

  test("on_tcp_connect reads conn.tls.sni as the visitor's hello named it and endpoint.host as the tunnel's whole name; the version, suite and ALPN, never decrypted here, are empty, and no session resumed", async () => {
    const file = join(dir, "sni-policy.yml");
    // one policy for two tunnels: svc's name is refused by it, other's passes; a version the edge knew would refuse both
    writeFileSync(
      file,
      `on_tcp_connect:
  - expressions: ["(conn.tls.sni.startsWith('svc.') && endpoint.host == 'svc.localhost') || conn.tls.version != '' || conn.tls.cipher_suite != '' || conn.tls.negotiated_alpn != '' || conn.tls.session_resumed"]
    actions: [{ type: deny }]
`,
    );
    await using _svc = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc", "--policy-file", file] });
    await using _other = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "other", "--policy-file", file] });
    const refused = await curl("svc.localhost", server.tlsPort!, serviceCa, ["--http1.1"]);
    expect(refused.out).toBe("");
    expect(refused.err).not.toBe("");
    const passed = await curl("other.localhost", server.tlsPort!, serviceCa, ["--http1.1"]);
    expect(passed.err).toBe("");
    expect(passed.out).toBe("nginx over tls: other.localhost HTTP/1.1\n");
  });

  test("on_tcp_connect reads conn.tls.ja4_fingerprint: the JA4 of the visitor's hello (made by src/tls/ja4.ts of the hello the same curl sends to a recording socket); another hello's passes", async () => {
    const args = ["--http1.1"];
    const bytes = await captureHello(async (port) => void (await curl("svc.localhost", port, serviceCa, args)));
    const expected = ja4(parseClientHello(bytes, true) as ClientHello);
    expect(expected).toMatch(/^t1[0-3]d\d{4}[a-z0-9]{2}_[0-9a-f]{12}_[0-9a-f]{12}$/);
    const file = join(dir, "ja4-policy.yml");
    writeFileSync(file, `on_tcp_connect:\n  - expressions: ["conn.tls.ja4_fingerprint == '${expected}'"]\n    actions: [{ type: deny }]\n`);
    await using _svc = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc", "--policy-file", file] });
    const refused = await curl("svc.localhost", server.tlsPort!, serviceCa, args);
    expect(refused.out).toBe("");
    expect(refused.err).not.toBe("");
    // TLS 1.2 at most: another hello, another fingerprint
    const passed = await curl("svc.localhost", server.tlsPort!, serviceCa, [...args, "--tls-max", "1.2"]);
    expect(passed.err).toBe("");
    expect(passed.out).toBe("nginx over tls: svc.localhost HTTP/1.1\n");
  });

  test("its traffic is counted both ways, the ClientHello included", async () => {
    await using _agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc"] });
    expect((await curl("svc.localhost", server.tlsPort!, serviceCa, ["--http1.1"])).out).toStartWith("nginx over tls");
    const res = await api.call("GET", "/api/tunnels/active");
    const row = (res.body as { protocol: string; subdomain?: string; bytes_in: number; bytes_out: number }[]).find((t) => t.protocol === "tls" && t.subdomain === "svc");
    // a hello and a request one way, a certificate and an answer the other: a few hundred bytes at least each way
    expect(row?.bytes_in).toBeGreaterThan(300);
    expect(row?.bytes_out).toBeGreaterThan(300);
  });

  test("the active tunnels list it as tls, with its name", async () => {
    await using _agent = await startAgent({ kind: "tls", target: tlsPort, server: server.edgeUrl, token, args: ["--subdomain", "svc"] });
    const res = await api.call("GET", "/api/tunnels/active");
    expect(res.body.tunnels ?? res.body).toContainEqual(expect.objectContaining({ protocol: "tls", subdomain: "svc", username: "tls-user" }));
    // and the metrics count it under its own protocol
    const metrics = await scrape(server.adminUrl, { Cookie: api.cookie! });
    expect(sample(metrics, 'burrow_tunnels_active{protocol="tls"}')).toBe(1);
  });

  test("--tls-hello-timeout holds on --tls-port too: a peer that never sends its ClientHello is closed", async () => {
    await using quick = await startServer({ args: ["--tls-port", "0", "--tls-hello-timeout", "1"] });
    const opened = performance.now();
    const reply = await rawHttp(quick.tlsPort!, new Uint8Array(0), 15_000);
    expect(reply.closed).toBe(true);
    // closed by the timeout, not at once (the liveness bound above is fifteen times the flag)
    expect(performance.now() - opened).toBeGreaterThan(900);
  });
});

describe("who may open one", () => {
  test("allowed_protocols takes tls, in any case and order, stored in its fixed order", async () => {
    const res = await api.call("POST", "/api/users", { username: "tls-mixed", password: "password-123", allowed_protocols: "TLS, http" });
    expect(res.status).toBe(201);
    expect(res.body.allowed_protocols).toBe("http,tls");
    const bad = await api.call("POST", "/api/users", { username: "tls-bad", password: "password-123", allowed_protocols: "tls,quic" });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain("http, tcp, tls");
  });

  test("a user whose require_auth is on cannot open one: AUTH_REQUIRED, as for a tcp tunnel", async () => {
    const id = await api.createUser("tls-strict", { allowed_protocols: "tls" });
    expect((await api.call("PUT", `/api/users/${id}`, { require_auth: true })).status).toBe(200);
    const strict = await api.createToken(id);
    expect(await refusal({ kind: "tls", target: tlsPort, server: server.edgeUrl, token: strict })).toMatch(/AUTH_REQUIRED.*a tls tunnel cannot carry/);
  });

  test("a user without tls in allowed_protocols (the default) is refused with PROTOCOL_DENIED", async () => {
    const plain = await api.createToken(await api.createUser("no-tls"));
    expect(await refusal({ kind: "tls", target: tlsPort, server: server.edgeUrl, token: plain })).toContain("PROTOCOL_DENIED");
  });

  test("a server that passes no TLS through (no TLS of its own, no --tls-port) refuses with TLS_UNAVAILABLE", async () => {
    await using plain = await startServer();
    const admin = await signedIn(plain);
    const t = await admin.createToken(await admin.createUser("tls-nowhere", { allowed_protocols: "tls" }));
    expect(await refusal({ kind: "tls", target: tlsPort, server: plain.edgeUrl, token: t })).toContain("TLS_UNAVAILABLE");
  });
});

describe("on the public HTTPS port, next to http tunnels", () => {
  test("one port: an http tunnel's name is decrypted with the server's certificate, a tls tunnel's passes through to the service's", async () => {
    const edgeCert = await selfSignedCertificate({ names: ["web.localhost", "localhost"], ca: true, commonName: "the burrow server" });
    const edgeCa = join(dir, "edge.pem");
    writeFileSync(edgeCa, edgeCert.certPem);
    writeFileSync(join(dir, "edge-key.pem"), edgeCert.keyPem);
    await using https = await startServer({ args: ["--tls-cert", edgeCa, "--tls-key", join(dir, "edge-key.pem")] });
    const admin = await signedIn(https);
    const t = await admin.createToken(await admin.createUser("both-kinds", { allowed_protocols: "http,tls" }));
    const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("an http tunnel\n") });
    try {
      await using _svc = await startAgent({ kind: "tls", target: tlsPort, server: `https://localhost:${https.edgePort}`, token: t, args: ["--subdomain", "svc"], env: { NODE_EXTRA_CA_CERTS: edgeCa } });
      await using _web = await startAgent({ kind: "http", target: web.port!, server: `https://localhost:${https.edgePort}`, token: t, args: ["--subdomain", "web", "--skip-warning"], env: { NODE_EXTRA_CA_CERTS: edgeCa } });
      expect(_svc.publicUrl).toBe(`tls://svc.localhost:${https.edgePort}`);
      expect((await curl("svc.localhost", https.edgePort, serviceCa, ["--http1.1"])).out).toBe("nginx over tls: svc.localhost HTTP/1.1\n");
      expect(await servedFingerprint(https.edgePort, "svc.localhost")).toBe(await fileFingerprint(serviceCa));
      const web2 = await curl("web.localhost", https.edgePort, edgeCa);
      expect(web2.err).toBe("");
      expect(web2.out).toBe("an http tunnel\n");
      expect(await servedFingerprint(https.edgePort, "web.localhost")).toBe(await fileFingerprint(edgeCa));
    } finally {
      web.stop(true);
    }
  });
});
