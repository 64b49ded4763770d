/**
 * TLS-ALPN-01 (--acme-challenge tls-alpn-01), against a real ACME CA
 * (Debian's Pebble) that validates on the server's HTTPS port only: nothing
 * listens where Pebble would look for HTTP-01. The domain gets its
 * certificate at start, a custom hostname when its tunnel goes live; a
 * visitor that offers acme-tls/1 with no challenge in flight meets the
 * server's own certificate, never a challenge one.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { signedIn } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { startPebble, pebbleSkipReason, type Pebble } from "../harness/pebble.ts";
import { freeRange } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const DOMAIN = "burrow.test";
const skip = pebbleSkipReason();
if (skip) console.error(`acme tests skipped: ${skip}`);

/** A TLS handshake to the edge as `serverName`, trusting only `ca`: the names of the certificate it got, or why it failed. */
function handshake(port: number, serverName: string, ca: string, alpn = ["http/1.1"]): Promise<{ ok: true; names: string; protocol: string | false } | { ok: false; error: string }> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, servername: serverName, ca, ALPNProtocols: alpn });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ ok: false, error: "timeout" });
    }, 5_000);
    socket.once("secureConnect", () => {
      clearTimeout(timer);
      resolve({ ok: true, names: socket.getPeerCertificate().subjectaltname ?? "", protocol: socket.alpnProtocol ?? false });
      socket.destroy();
    });
    socket.once("error", (err) => {
      clearTimeout(timer);
      resolve({ ok: false, error: err.message });
    });
  });
}

/** The handshake once the edge presents a certificate that verifies (it swaps listeners right after "certificate installed"): up to 3 s. */
async function verifiedHandshake(port: number, serverName: string, ca: string) {
  const deadline = Date.now() + 3_000;
  for (;;) {
    const got = await handshake(port, serverName, ca);
    if (got.ok || Date.now() > deadline) return got;
    await Bun.sleep(50);
  }
}

describe.skipIf(Boolean(skip))("TLS-ALPN-01 on the HTTPS port, with nothing where HTTP-01 would be looked for", () => {
  let pebble: Pebble;
  let server: TestServer;
  let roots: string;
  const work = mkdtempSync(join(tmpdir(), "burrow-acme-alpn-"));
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`upstream saw ${new URL(req.url).pathname}`) });

  beforeAll(async () => {
    const ports = freeRange(3);
    // Pebble would ask for HTTP-01 on ports.first, where nothing listens; TLS-ALPN-01 on the server's HTTPS port
    pebble = await startPebble({ httpPort: ports.first, tlsPort: ports.first + 1 });
    const caFile = join(work, "pebble-ca.pem");
    writeFileSync(caFile, pebble.serverCa);
    roots = pebble.rootPem + pebble.intermediatePem;
    server = await startServer({
      args: [
        ...["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile],
        ...["--acme-challenge", "tls-alpn-01", "--https-port", String(ports.first + 1), "--http-port", String(ports.first + 2), "--dns-port", "off"],
      ],
    });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await pebble?.[Symbol.asyncDispose]();
    upstream.stop(true);
    rmSync(work, { recursive: true, force: true });
  });

  test("the domain gets its certificate at start, proven on the HTTPS port", async () => {
    await server.output.waitFor(new RegExp(`certificate installed cert=${DOMAIN.replace(".", "\\.")} `), 30_000);
    const got = await verifiedHandshake(server.edgePort, DOMAIN, roots);
    expect(got.ok && got.names).toBe(`DNS:${DOMAIN}`);
    expect(server.output.text()).not.toMatch(/acme .*failed/);
  }, 60_000);

  test("a custom hostname gets its certificate when its tunnel goes live, and is served over HTTPS", async () => {
    const api = await signedIn(server);
    const owner = await api.createUser("alpn-owner");
    expect((await api.post("/api/hostnames", { hostname: "alpn.custom.test", user_id: owner, verified: true })).status).toBe(201);
    await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${server.edgePort}`, token: await api.createToken(owner), args: ["--hostname", "alpn.custom.test", "--insecure"] });
    await server.output.waitFor(/certificate installed cert=alpn\.custom\.test /, 30_000);
    const got = await verifiedHandshake(server.edgePort, "alpn.custom.test", roots);
    expect(got.ok && got.names).toBe("DNS:alpn.custom.test");
  }, 60_000);

  test("a visitor offering acme-tls/1 with no challenge in flight gets the server's own certificate, not a challenge's", async () => {
    const got = await handshake(server.edgePort, DOMAIN, roots, ["acme-tls/1", "http/1.1"]);
    expect(got.ok && got.names).toBe(`DNS:${DOMAIN}`);
    expect(got.ok && got.protocol).toBe("http/1.1");
  });
});
