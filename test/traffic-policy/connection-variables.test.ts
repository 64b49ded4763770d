/**
 * ngrok's `conn.server_ip`, `conn.tls.*`, `endpoint.id` and
 * `endpoint.addr` through the real server, agent and service, read by
 * curl: an add-headers action interpolates them into the request, and the
 * service sees the address and port the visitor reached (over HTTPS the
 * public port's, not the internal listener's TLS is terminated on), the
 * TLS handshake's version, cipher suite, server name and the protocol ALPN
 * agreed on for an https visitor on HTTP/1.1 and on HTTP/2 (none when curl
 * offers none), whether its handshake resumed an earlier session (curl's
 * second connection in one run does), nothing of TLS for a plain one, and
 * the tunnel's id as the admin API lists it.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { run } from "../harness/nghttp2.ts";
import type { Rig } from "../harness/tunnel.ts";
import type { Echoed, PolicyTunnel } from "./rig.ts";
import { plainAndSecure, type PlainAndSecure } from "./tls-rig.ts";

setDefaultTimeout(60_000);

const POLICY = `
on_http_request:
  - actions:
      - type: add-headers
        config:
          headers:
            x-server-ip: "ip=\${conn.server_ip}"
            x-server-port: "port=\${conn.server_port}"
            x-client-port: "port=\${conn.client_port}"
            x-tls-version: "version=\${conn.tls.version}"
            x-tls-cipher: "cipher=\${conn.tls.cipher_suite}"
            x-tls-sni: "sni=\${conn.tls.sni}"
            x-tls-alpn: "alpn=\${conn.tls.negotiated_alpn}"
            x-tls-resumed: "resumed=\${conn.tls.session_resumed}"
            x-endpoint-id: "id=\${endpoint.id}"
            x-endpoint-addr: "addr=\${endpoint.addr}"
`;

let plain: PolicyTunnel;
let secure: Rig;
let rig: PlainAndSecure;

/** The id the admin API gives the one tunnel of the rig's agents. */
async function tunnelId(rig: Rig): Promise<string> {
  const agents = (await rig.api.get("/api/agents")).body as { tunnels: { id: string }[] }[];
  const ids = agents.flatMap((a) => a.tunnels.map((t) => t.id));
  expect(ids).toHaveLength(1);
  return ids[0]!;
}

beforeAll(async () => {
  rig = await plainAndSecure(POLICY, "vars");
  ({ plain, secure } = rig);
});

afterAll(() => rig?.close());

describe("over plain HTTP", () => {
  test("the server's address and port, no TLS, the tunnel's id and address", async () => {
    const r = await plain.curl("/vars");
    expect(r.status).toBe(200);
    const seen = (JSON.parse(r.body) as Echoed).headers;
    const port = plain.server.edgePort;
    expect(seen["x-server-ip"]).toBe("ip=127.0.0.1");
    expect(seen["x-server-port"]).toBe(`port=${port}`);
    expect(seen["x-tls-version"]).toBe("version=");
    expect(seen["x-tls-cipher"]).toBe("cipher=");
    expect(seen["x-tls-sni"]).toBe("sni=");
    expect(seen["x-tls-alpn"]).toBe("alpn=");
    expect(seen["x-tls-resumed"]).toBe("resumed=false");
    expect(seen["x-endpoint-id"]).toBe(`id=${await tunnelId(plain)}`);
    expect(seen["x-endpoint-addr"]).toBe(`addr=plainvars.localhost:${port}`);
  });
});

describe("over HTTPS", () => {
  const host = () => `tlsvars.localhost:${secure.server.edgePort}`;
  const curlTls = async (...args: string[]) => {
    const r = await run(["curl", "-sSk", "--max-time", "20", "--resolve", `${host()}:127.0.0.1`, ...args, `https://${host()}/vars`]);
    expect(r.code).toBe(0);
    return (JSON.parse(r.stdout) as Echoed).headers;
  };

  for (const [name, args, alpn] of [
    ["HTTP/1.1", ["--http1.1", "--tlsv1.3"], "http/1.1"],
    ["HTTP/2", ["--http2", "--tlsv1.3"], "h2"],
  ] as const) {
    test(`${name}: the public port (not the TLS listener's inside), the handshake curl made, the SNI it sent`, async () => {
      const seen = await curlTls(...args);
      expect(seen["x-server-ip"]).toBe("ip=127.0.0.1");
      expect(seen["x-server-port"]).toBe(`port=${secure.server.edgePort}`);
      expect(seen["x-tls-version"]).toBe("version=1.3");
      expect(seen["x-tls-cipher"]).toMatch(/^cipher=TLS_(AES_128_GCM_SHA256|AES_256_GCM_SHA384|CHACHA20_POLY1305_SHA256)$/);
      expect(seen["x-tls-sni"]).toBe("sni=tlsvars.localhost");
      expect(seen["x-tls-alpn"]).toBe(`alpn=${alpn}`);
      expect(seen["x-tls-resumed"]).toBe("resumed=false");
      expect(seen["x-endpoint-id"]).toBe(`id=${await tunnelId(secure)}`);
      expect(seen["x-endpoint-addr"]).toBe(`addr=${host()}`);
    });
  }

  test("a visitor that offers no ALPN: the protocol is empty (it is served HTTP/1.1 all the same)", async () => {
    const seen = await curlTls("--http1.1", "--no-alpn");
    expect(seen["x-tls-alpn"]).toBe("alpn=");
    expect(seen["x-tls-version"]).toBe("version=1.3");
  });

  test("a second connection that resumes the first's session says so; the first does not", async () => {
    // one curl run keeps its TLS session: with the connection closed after each request, the second URL reconnects and resumes
    const url = `https://${host()}/vars`;
    const out = [join(rig.dir, "first.json"), join(rig.dir, "second.json")];
    const r = await run(["curl", "-sSk", "--max-time", "20", "--http1.1", "--tlsv1.3", "--resolve", `${host()}:127.0.0.1`, "-H", "Connection: close", "-o", out[0]!, url, "-o", out[1]!, url]);
    expect(r.code).toBe(0);
    const [first, second] = out.map((f) => (JSON.parse(readFileSync(f, "utf8")) as Echoed).headers);
    expect(first!["x-tls-resumed"]).toBe("resumed=false");
    expect(second!["x-tls-resumed"]).toBe("resumed=true");
    expect(second!["x-tls-alpn"]).toBe("alpn=http/1.1");
    expect(second!["x-client-port"]).not.toBe(first!["x-client-port"]);
  });

  test("TLS 1.2 is told as 1.2, with its suite's IANA name", async () => {
    const seen = await curlTls("--http1.1", "--tlsv1.2", "--tls-max", "1.2");
    expect(seen["x-tls-version"]).toBe("version=1.2");
    expect(seen["x-tls-cipher"]).toMatch(/^cipher=TLS_ECDHE_(ECDSA|RSA)_WITH_[A-Z0-9_]+$/);
  });
});
