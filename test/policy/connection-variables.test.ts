/**
 * ngrok's `conn.server_ip`, `conn.tls.version`, `conn.tls.cipher_suite`,
 * `conn.tls.sni`, `conn.tls.negotiated_alpn`, `conn.tls.session_resumed`,
 * `endpoint.id` and `endpoint.addr`: their values from a
 * run's facts in expressions (the compiled fast path and CEL alike) and in
 * interpolation, empty where the edge does not know them (plain http, a
 * relayed request); every phase has them, and a name ngrok has that burrow
 * does not (conn.tls.client.*) is refused at load. Then the edge's
 * side: the facts a door's sockets give (the public socket's address, not
 * the internal TLS listener's; the handshake only for an https visitor).
 */
import { describe, expect, test } from "bun:test";
import type { PolicyInput } from "../../src/policy/index.ts";
import type { TlsFacts } from "../../src/policy/facts.ts";
import { connectFacts } from "../../src/edge/traffic-policy/connect.ts";
import { requestFacts, serverIpOf, serverPortOf, tlsOf, type ConnectionEnds } from "../../src/edge/traffic-policy/http-request.ts";
import { parseRequestHead, isRefusal } from "../../src/http/request-head.ts";
import type { Tunnel } from "../../src/edge/registry.ts";
import { parseClientHello, type ClientHello } from "../../src/tls/client-hello.ts";
import { ja4 } from "../../src/tls/ja4.ts";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const TLS: TlsFacts = { version: "1.3", cipherSuite: "TLS_AES_128_GCM_SHA256", sni: "app.tunnels.example.com", negotiatedAlpn: "h2", sessionResumed: true };

/** A request's facts with the connection's server address and TLS, and the tunnel's id. */
function withConnection(serverIp: string | undefined, tls: TlsFacts | undefined): PolicyInput {
  const input = requestInput();
  input.conn = { ...input.conn, serverIp, tls };
  input.tunnel = { ...input.tunnel, id: "4b1c9a52-7d1e-4c55-9a0e-0f1f2e3d4c5b" };
  return input;
}

const ECHO_ALL = `
on_http_request:
  - actions:
      - type: custom-response
        config:
          status_code: 200
          body: "\${conn.server_ip}|\${conn.tls.version}|\${conn.tls.cipher_suite}|\${conn.tls.sni}|\${conn.tls.negotiated_alpn}|\${conn.tls.session_resumed}|\${endpoint.id}|\${endpoint.addr}"
`;

describe("the values", () => {
  test("interpolated from the connection's facts and the tunnel's", async () => {
    const out = await policyOf(ECHO_ALL).run("on_http_request", withConnection("198.51.100.7", TLS));
    expect(answered(out)?.body).toBe("198.51.100.7|1.3|TLS_AES_128_GCM_SHA256|app.tunnels.example.com|h2|true|4b1c9a52-7d1e-4c55-9a0e-0f1f2e3d4c5b|app.tunnels.example.com:443");
  });

  test("empty strings where the edge does not know them (no TLS, no server address), as ngrok's unknown", async () => {
    const input = requestInput({ scheme: "http" });
    const out = await policyOf(ECHO_ALL).run("on_http_request", input);
    expect(answered(out)?.body).toBe("||||" + "|false|" + "|app.tunnels.example.com:443");
  });

  test("in conditions: the compiled comparisons and CEL's functions read the same values", async () => {
    const p = policyOf(`
on_http_request:
  - expressions:
      - "conn.server_ip == '198.51.100.7'"
      - "conn.tls.version == '1.3'"
      - "conn.tls.cipher_suite.startsWith('TLS_AES')"
      - "conn.tls.sni == req.url.host"
      - "conn.tls.negotiated_alpn == 'h2'"
      - "conn.tls.session_resumed"
      - "endpoint.id != ''"
      - "endpoint.addr.endsWith(':443')"
      - "inCidrRange(conn.server_ip, '198.51.100.0/24')"
    actions: [{ type: custom-response, config: { status_code: 200, body: matched } }]
`);
    expect(answered(await p.run("on_http_request", withConnection("198.51.100.7", TLS)))?.body).toBe("matched");
    expect(answered(await p.run("on_http_request", withConnection("198.51.100.7", { ...TLS, version: "1.2" })))).toBeUndefined();
    expect(answered(await p.run("on_http_request", withConnection(undefined, TLS)))).toBeUndefined();
    expect(answered(await p.run("on_http_request", withConnection("198.51.100.7", { ...TLS, negotiatedAlpn: "http/1.1" })))).toBeUndefined();
    expect(answered(await p.run("on_http_request", withConnection("198.51.100.7", { ...TLS, sessionResumed: false })))).toBeUndefined();
  });

  test("endpoint.addr brackets an IPv6 host", async () => {
    const input = requestInput();
    input.endpoint = { host: "2001:db8::1", port: 8443, protocol: "tcp", url: "tcp://[2001:db8::1]:8443" };
    const out = await policyOf(ECHO_ALL).run("on_http_request", input);
    expect(answered(out)?.body.split("|").at(-1)).toBe("[2001:db8::1]:8443");
  });
});

describe("at load", () => {
  test("every phase has them", () => {
    for (const phase of ["on_tcp_connect", "on_http_request", "on_http_response"]) {
      const action = phase === "on_http_response" ? "custom-response, config: { status_code: 403 }" : "deny";
      policyOf(`${phase}:\n  - expressions: ["conn.server_ip != '' && conn.tls.version != '' && conn.tls.cipher_suite != '' && conn.tls.sni != '' && conn.tls.negotiated_alpn != '' && !conn.tls.session_resumed && endpoint.id != '' && endpoint.addr != ''"]\n    actions: [{ type: ${action} }]\n`);
    }
  });

  test("ngrok's TLS variables burrow cannot answer are refused with their name", () => {
    for (const name of ["conn.tls.client.subject"]) {
      const errors = errorsOf(`on_http_request:\n  - expressions: ["${name} == 'x'"]\n    actions: [{ type: deny }]\n`);
      expect(errors.map((e) => e.message).join("\n")).toContain(name);
    }
  });

  test("the ALPN is a string and the resumption a bool: used as another type, refused at load", () => {
    for (const wrong of ["conn.tls.negotiated_alpn", "conn.tls.session_resumed.startsWith('t')", "size(conn.tls.session_resumed) > 0", "conn.tls.negotiated_alpn && true"]) {
      const errors = errorsOf(`on_http_request:\n  - expressions: ["${wrong}"]\n    actions: [{ type: deny }]\n`);
      expect(errors.map((e) => e.code)).toContain("CEL_TYPE");
    }
    policyOf(`on_tcp_connect:\n  - expressions: ["conn.tls.session_resumed || conn.tls.negotiated_alpn.startsWith('h2')"]\n    actions: [{ type: deny }]\n`);
  });

  test("a request's variable beside them stays refused in on_tcp_connect", () => {
    const errors = errorsOf(`on_tcp_connect:\n  - expressions: ["conn.tls.sni == req.host"]\n    actions: [{ type: deny }]\n`);
    expect(errors.map((e) => e.message).join("\n")).toContain("req.host");
  });
});

/** A socket as Bun gives it: its local end, and its handshake when it has one. */
function socketOf(localAddress: string, localPort: number, tls?: { version: string; cipher: string; sni?: string; alpn?: string | false; resumed?: boolean }): ConnectionEnds["socket"] {
  return {
    localAddress,
    localPort,
    alpnProtocol: tls ? (tls.alpn ?? false) : null,
    isSessionReused: () => tls?.resumed ?? false,
    getTLSVersion: () => tls?.version ?? null,
    getCipher: () => (tls ? { name: tls.cipher, standardName: tls.cipher } : undefined),
    getServername: () => tls?.sni,
  };
}

const TUNNEL = { id: "t-1", subdomain: "app", protocol: "http", username: "alice" } as unknown as Tunnel;

function head(text: string) {
  const h = parseRequestHead(text);
  if (isRefusal(h)) throw new Error("bad head");
  return h;
}

describe("the edge's facts", () => {
  test("the server address is the public socket's (not the internal TLS listener's), IPv4-mapped written as IPv4", () => {
    const terminated: ConnectionEnds = { socket: socketOf("127.0.0.1", 41000), peer: { localAddress: "::ffff:192.0.2.9", localPort: 443 } };
    expect(serverIpOf(terminated)).toBe("192.0.2.9");
    expect(serverPortOf(terminated)).toBe(443);
    const plain: ConnectionEnds = { socket: socketOf("2001:db8:0:0::5", 80), peer: {} };
    expect(serverIpOf(plain)).toBe("2001:db8::5");
    expect(serverPortOf(plain)).toBe(80);
    expect(serverIpOf(undefined)).toBeUndefined();
  });

  test("the handshake as ngrok writes it; none on a plain socket", () => {
    expect(tlsOf({ socket: socketOf("127.0.0.1", 1, { version: "TLSv1.3", cipher: "TLS_AES_256_GCM_SHA384", sni: "app.example.com", alpn: "h2", resumed: true }) })).toEqual({ version: "1.3", cipherSuite: "TLS_AES_256_GCM_SHA384", sni: "app.example.com", negotiatedAlpn: "h2", sessionResumed: true });
    // no ALPN agreed (Bun's false): empty, as ngrok's default
    expect(tlsOf({ socket: socketOf("127.0.0.1", 1, { version: "TLSv1", cipher: "ECDHE-RSA-AES128-SHA" }) })).toEqual({ version: "1.0", cipherSuite: "ECDHE-RSA-AES128-SHA", sni: "", negotiatedAlpn: "", sessionResumed: false });
    expect(tlsOf({ socket: socketOf("127.0.0.1", 1) })).toBeUndefined();
  });

  test("a request's facts read them when asked: TLS only for an https visitor, nothing for a relayed request", () => {
    const socket = socketOf("10.0.0.2", 443, { version: "TLSv1.2", cipher: "ECDHE-ECDSA-AES128-GCM-SHA256", sni: "app.example.com", alpn: "http/1.1" });
    const base = { client: "203.0.113.1", clientPort: 5000, serverPort: 443, openedAt: 0, host: "app.example.com", head: head("GET / HTTP/1.1\r\nHost: app.example.com") };
    const https = requestFacts(TUNNEL, { ...base, secure: true, ends: { socket } });
    expect(https.conn.serverIp).toBe("10.0.0.2");
    expect(https.conn.tls).toEqual({ version: "1.2", cipherSuite: "ECDHE-ECDSA-AES128-GCM-SHA256", sni: "app.example.com", negotiatedAlpn: "http/1.1", sessionResumed: false });
    expect(https.tunnel.id).toBe("t-1");
    expect(requestFacts(TUNNEL, { ...base, secure: false, ends: { socket } }).conn.tls).toBeUndefined();
    const relayed = requestFacts(TUNNEL, { ...base, secure: true });
    expect(relayed.conn.serverIp).toBeUndefined();
    expect(relayed.conn.tls).toBeUndefined();
  });

  test("on_tcp_connect's facts: the socket's address; TLS only for https (a tls tunnel's is not the edge's)", () => {
    const socket = socketOf("10.0.0.3", 443, { version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256", sni: "app.example.com" });
    const https = connectFacts(TUNNEL, { client: "203.0.113.1", clientPort: 5000, serverPort: 443, ends: { socket }, host: "app.example.com", protocol: "https" });
    expect(https.conn.serverIp).toBe("10.0.0.3");
    expect(https.conn.tls?.version).toBe("1.3");
    const passedOn = connectFacts(TUNNEL, { client: "203.0.113.1", clientPort: 5000, serverPort: 443, ends: { socket }, host: "app.example.com", protocol: "tls", serverName: "app.example.com" });
    expect(passedOn.conn.tls).toEqual({ version: "", cipherSuite: "", sni: "app.example.com", negotiatedAlpn: "", sessionResumed: false });
    const tls = connectFacts(TUNNEL, { client: "203.0.113.1", clientPort: 5000, serverPort: 443, ends: { socket }, host: "app.example.com", protocol: "tls" });
    expect(tls.conn.serverIp).toBe("10.0.0.3");
    expect(tls.conn.tls).toBeUndefined();
  });
  test("conn.tls.ja4_fingerprint: made of the hello the front kept with the connection (https), or the tls tunnel's hello, or the string another node sent; empty without", async () => {
    // a hello by hand: TLS 1.2, one suite, a server name
    const name = [...Buffer.from("app.example.com")];
    const ext = [0, 0, 0, name.length + 5, 0, name.length + 3, 0, 0, name.length, ...name];
    const body = [3, 3, ...new Array(32).fill(1), 0, 0, 2, 0x13, 0x01, 1, 0, 0, ext.length, ...ext];
    const bytes = new Uint8Array([22, 3, 1, 0, body.length + 4, 1, 0, 0, body.length, ...body]);
    const hello = parseClientHello(bytes, true) as ClientHello;
    const expected = ja4(hello);
    expect(expected).toMatch(/^t12d010100_[0-9a-f]{12}_000000000000$/);
    const socket = socketOf("10.0.0.2", 443, { version: "TLSv1.3", cipher: "TLS_AES_128_GCM_SHA256", sni: "app.example.com" });
    const base = { client: "203.0.113.1", clientPort: 5000, serverPort: 443, openedAt: 0, host: "app.example.com", head: head("GET / HTTP/1.1\r\nHost: app.example.com") };
    const https = requestFacts(TUNNEL, { ...base, secure: true, ends: { socket, peer: { hello } } });
    expect(https.conn.tls?.ja4).toBe(expected);
    const echoed = await policyOf(`on_http_request:\n  - actions: [{ type: custom-response, config: { status_code: 200, body: "\${conn.tls.ja4_fingerprint}" } }]\n`).run("on_http_request", https);
    expect(answered(echoed)?.body).toBe(expected);
    expect(requestFacts(TUNNEL, { ...base, secure: true, ends: { socket } }).conn.tls?.ja4).toBeUndefined();
    const connect = { client: "203.0.113.1", clientPort: 5000, serverPort: 443, ends: { socket, peer: { hello } }, host: "app.example.com" };
    expect(connectFacts(TUNNEL, { ...connect, protocol: "https" }).conn.tls?.ja4).toBe(expected);
    expect(connectFacts(TUNNEL, { ...connect, protocol: "tls", serverName: "app.example.com", hello }).conn.tls?.ja4).toBe(expected);
    expect(connectFacts(TUNNEL, { ...connect, protocol: "tls", serverName: "app.example.com", hello: "t13d1516h2_8daaf6152771_e5627efa2ab1" }).conn.tls?.ja4).toBe("t13d1516h2_8daaf6152771_e5627efa2ab1");
    const plain = await policyOf(`on_http_request:\n  - actions: [{ type: custom-response, config: { status_code: 200, body: "[\${conn.tls.ja4_fingerprint}]" } }]\n`).run("on_http_request", requestInput({ scheme: "http" }));
    expect(answered(plain)?.body).toBe("[]");
  });
});
