/**
 * HTTPS by itself, against a real ACME CA (Debian's Pebble) on loopback:
 *
 * - without any DNS record (--dns-port off): the domain gets a certificate by
 *   HTTP-01 on the plain port at start, a tunnel's name when it goes live;
 *   a name a visitor merely sends gets none; plain HTTP is sent to HTTPS;
 *   an agent verifies the server with Pebble's root, through a SOCKS proxy
 *   that resolves the test domain;
 * - with burrow's own DNS answering DNS-01: one certificate for the domain
 *   and its wildcard, renewed (Pebble's certificates here live seconds) and
 *   swapped in while a connection made before goes on being served.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect, type TLSSocket } from "node:tls";
import { signedIn } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { startPebble, pebbleSkipReason, type Pebble } from "../harness/pebble.ts";
import { freeRange } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startSocksProxy } from "../harness/socks-proxy.ts";

const DOMAIN = "burrow.test";
const skip = pebbleSkipReason();
if (skip) console.error(`acme tests skipped: ${skip}`);

const work = mkdtempSync(join(tmpdir(), "burrow acme "));
afterAll(() => rmSync(work, { recursive: true, force: true }));

/** A TLS handshake to the edge as `serverName`, trusting only `ca`: the certificate it got, or why it failed. */
async function handshake(port: number, serverName: string, ca: string): Promise<{ ok: true; names: string; serial: string; socket: TLSSocket } | { ok: false; error: string }> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, servername: serverName, ca, ALPNProtocols: ["http/1.1"] });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ ok: false, error: "timeout" });
    }, 5_000);
    socket.once("secureConnect", () => {
      clearTimeout(timer);
      const cert = socket.getPeerCertificate();
      resolve({ ok: true, names: cert.subjectaltname ?? "", serial: cert.serialNumber, socket });
    });
    socket.once("error", (err) => {
      clearTimeout(timer);
      resolve({ ok: false, error: err.message });
    });
  });
}

/**
 * The handshake once the edge presents a certificate that verifies (it swaps
 * listeners right after the "certificate installed" line): tried for up to 3 s.
 */
async function verifiedHandshake(port: number, serverName: string, ca: string, notSerial?: string) {
  const deadline = Date.now() + 3_000;
  for (;;) {
    const got = await handshake(port, serverName, ca);
    if ((got.ok && got.serial !== notSerial) || Date.now() > deadline) return got;
    if (got.ok) got.socket.destroy();
    await Bun.sleep(50);
  }
}

/** One HTTP/1.1 request on an open TLS socket (keep-alive), the status line back. */
async function requestOn(socket: TLSSocket, host: string, path: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const timer = setTimeout(() => reject(new Error(`no answer on the kept connection (got ${JSON.stringify(got)})`)), 5_000);
    const onData = (chunk: Buffer) => {
      got += chunk.toString("latin1");
      if (got.includes("\r\n\r\n")) {
        clearTimeout(timer);
        socket.off("data", onData);
        resolve(got.split("\r\n")[0]!);
      }
    };
    socket.on("data", onData);
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${host}\r\n\r\n`);
  });
}

describe.skipIf(Boolean(skip))("without a DNS record: certificates per name by HTTP-01", () => {
  let pebble: Pebble;
  let server: TestServer;
  let httpPort: number;
  let caFile: string;
  let roots: string;
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`upstream saw ${new URL(req.url).pathname}`) });

  beforeAll(async () => {
    httpPort = freeRange(1).first;
    pebble = await startPebble({ httpPort });
    caFile = join(work, "pebble ca.pem");
    writeFileSync(caFile, pebble.serverCa);
    roots = pebble.rootPem + pebble.intermediatePem;
    server = await startServer({
      args: ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--http-port", String(httpPort), "--https-port", "0", "--dns-port", "off"],
    });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await pebble?.[Symbol.asyncDispose]();
    upstream.stop(true);
  });

  test("the domain itself gets its certificate at start, and the edge presents it, verified by Pebble's root", async () => {
    await server.output.waitFor(new RegExp(`certificate installed cert=${DOMAIN.replace(".", "\\.")} `), 30_000);
    const got = await verifiedHandshake(server.edgePort, DOMAIN, roots);
    expect(got.ok && got.names).toBe(`DNS:${DOMAIN}`);
    if (got.ok) got.socket.destroy();
  }, 40_000);

  test("the agents' direct port presents the same certificate for the domain", async () => {
    expect(server.agentPort).toBeDefined();
    const got = await verifiedHandshake(server.agentPort!, DOMAIN, roots);
    expect(got.ok && got.names).toBe(`DNS:${DOMAIN}`);
    if (got.ok) got.socket.destroy();
  });

  test("a tunnel's name gets a certificate of its own when it goes live; a name a visitor sends gets none", async () => {
    const api = await signedIn(server);
    const token = await api.createToken(await api.createUser("acme-user"));
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${server.edgePort}`, token, args: ["--subdomain", "live", "--insecure"] });
    await server.output.waitFor(/certificate installed cert=live\.burrow\.test /, 30_000);
    const live = await verifiedHandshake(server.edgePort, `live.${DOMAIN}`, roots);
    expect(live.ok && live.names).toBe(`DNS:live.${DOMAIN}`);
    if (live.ok) {
      expect(await requestOn(live.socket, `live.${DOMAIN}`, "/over-https")).toBe("HTTP/1.1 200 OK");
      live.socket.destroy();
    }
    // a visitor's made-up name: the edge presents its pending certificate and asks the CA for nothing
    const made = await handshake(server.edgePort, `made-up.${DOMAIN}`, roots);
    expect(made.ok).toBe(false);
    await Bun.sleep(500);
    expect(server.output.text()).not.toContain("made-up");
    const certs = await api.get("/api/certificates");
    if (certs.status === 200) expect(JSON.stringify(certs.body)).not.toContain("made-up");
    expect(agent.output.text()).toContain(`https://live.${DOMAIN}`);
  }, 60_000);

  test("a tunnel's verified custom hostname gets a certificate of its own when the tunnel goes live, and is served over HTTPS", async () => {
    const api = await signedIn(server);
    const owner = await api.createUser("hostname-acme");
    expect((await api.post("/api/hostnames", { hostname: "demo.custom.test", user_id: owner, verified: true })).status).toBe(201);
    const token = await api.createToken(owner);
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${server.edgePort}`, token, args: ["--hostname", "demo.custom.test", "--insecure"] });
    await server.output.waitFor(/certificate installed cert=demo\.custom\.test /, 30_000);
    const got = await verifiedHandshake(server.edgePort, "demo.custom.test", roots);
    expect(got.ok && got.names).toBe("DNS:demo.custom.test");
    if (got.ok) {
      expect(await requestOn(got.socket, "demo.custom.test", "/custom")).toBe("HTTP/1.1 200 OK");
      got.socket.destroy();
    }
    const certs = await api.get("/api/certificates");
    expect(JSON.stringify(certs.body)).toContain("demo.custom.test");
    expect(agent.publicUrl).toContain("https://demo.custom.test");
  }, 60_000);

  test("a name gets its certificate as soon as it is reserved, with no tunnel yet", async () => {
    const api = await signedIn(server);
    const owner = await api.createUser("reserving-user");
    expect((await api.post("/api/domains", { subdomain: "shop", user_id: owner })).status).toBe(201);
    await server.output.waitFor(/certificate installed cert=shop\.burrow\.test /, 30_000);
    const got = await verifiedHandshake(server.edgePort, `shop.${DOMAIN}`, roots);
    expect(got.ok && got.names).toBe(`DNS:shop.${DOMAIN}`);
    if (got.ok) got.socket.destroy();
  }, 40_000);

  test("plain HTTP is sent to the same URL over HTTPS with a 308", async () => {
    const res = await fetch(`http://127.0.0.1:${httpPort}/a/path?x=1`, { headers: { host: `live.${DOMAIN}` }, redirect: "manual" });
    expect(res.status).toBe(308);
    expect(res.headers.get("location")).toBe(`https://live.${DOMAIN}:${server.edgePort}/a/path?x=1`);
    // a token no challenge has is not an answer: it is sent on like any path
    const stray = await fetch(`http://127.0.0.1:${httpPort}/.well-known/acme-challenge/${"x".repeat(43)}`, { headers: { host: DOMAIN }, redirect: "manual" });
    expect(stray.status).toBe(308);
    // no usable Host: a clear 400, never a redirect to somewhere made up
    const bad = await fetch(`http://127.0.0.1:${httpPort}/`, { headers: { host: "bad host!" }, redirect: "manual" });
    expect(bad.status).toBe(400);
  });

  test("an agent pointed at the plain HTTP port is told to use https://", async () => {
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: `http://127.0.0.1:${httpPort}`, token: "brw_" + "0".repeat(43), waitFor: /reconnecting/ });
    expect(agent.output.text()).toContain("the server redirects to HTTPS; use --server https://");
  });

  test("an agent that verifies the server (Pebble's root trusted, no --insecure) connects and carries a request", async () => {
    await using proxy = await startSocksProxy({ hosts: { [DOMAIN]: "127.0.0.1" } });
    const rootsFile = join(work, "pebble roots.pem");
    writeFileSync(rootsFile, roots);
    const api = await signedIn(server);
    const token = await api.createToken(await api.createUser("verifying-user"));
    await using agent = await startAgent({
      kind: "http",
      target: upstream.port!,
      server: `https://${DOMAIN}:${server.edgePort}`,
      token,
      args: ["--subdomain", "verified", "--proxy", proxy.url],
      env: { NODE_EXTRA_CA_CERTS: rootsFile },
    });
    expect(agent.output.text()).toContain(`https://verified.${DOMAIN}`);
    expect(proxy.connects.some((c) => c.startsWith(`${DOMAIN}:`))).toBe(true);
  }, 30_000);
});

describe.skipIf(Boolean(skip))("with burrow's own DNS: the wildcard by DNS-01, renewed and swapped live", () => {
  let pebble: Pebble;
  let server: TestServer;
  let roots: string;

  beforeAll(async () => {
    const dnsPort = freeRange(1).first;
    const httpPort = freeRange(1).first;
    pebble = await startPebble({ httpPort, dnsServer: `127.0.0.1:${dnsPort}`, certValiditySeconds: 12 });
    const caFile = join(work, "pebble ca 2.pem");
    writeFileSync(caFile, pebble.serverCa);
    roots = pebble.rootPem + pebble.intermediatePem;
    server = await startServer({
      args: ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--http-port", String(httpPort), "--https-port", "0", "--dns-port", String(dnsPort), "--acme-retry-min", "2"],
    });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await pebble?.[Symbol.asyncDispose]();
  });

  test("one certificate covers the domain and every name under it", async () => {
    await server.output.waitFor(/certificate installed cert=\*\.burrow\.test /, 30_000);
    for (const name of [DOMAIN, `anything.${DOMAIN}`]) {
      const got = await verifiedHandshake(server.edgePort, name, roots);
      expect(got.ok && got.names).toBe(`DNS:*.${DOMAIN}, DNS:${DOMAIN}`);
      if (got.ok) got.socket.destroy();
    }
  }, 40_000);

  test("a renewal is presented to new connections, and a connection made before it is still served", async () => {
    const before = await verifiedHandshake(server.edgePort, `keep.${DOMAIN}`, roots);
    if (!before.ok) throw new Error(before.error);
    const from = server.output.lines.length;
    // 12 s certificates renew at 8 s
    await server.output.waitFor(/certificate installed cert=\*\.burrow\.test /, 30_000, from);
    const after = await verifiedHandshake(server.edgePort, `new.${DOMAIN}`, roots, before.serial);
    expect(after.ok).toBe(true);
    if (after.ok) {
      expect(after.serial).not.toBe(before.serial);
      after.socket.destroy();
    }
    // the old connection: served by the listener that let go of the port, not cut
    expect(await requestOn(before.socket, `nobody.${DOMAIN}`, "/")).toMatch(/^HTTP\/1\.1 404/);
    before.socket.destroy();
  }, 45_000);
});

describe.skipIf(Boolean(skip))("names on demand are counted, and the count outlives a restart", () => {
  let pebble: Pebble;
  let httpPort: number;
  let caFile: string;
  const dataDir = mkdtempSync(join(work, "data "));
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
  const args = () => ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--http-port", String(httpPort), "--https-port", "0", "--dns-port", "off", "--acme-names-per-week", "1"];

  beforeAll(async () => {
    httpPort = freeRange(1).first;
    pebble = await startPebble({ httpPort });
    caFile = join(work, "pebble ca 3.pem");
    writeFileSync(caFile, pebble.serverCa);
  }, 60_000);
  afterAll(async () => {
    await pebble?.[Symbol.asyncDispose]();
    upstream.stop(true);
  });

  async function tunnel(server: TestServer, name: string) {
    const api = await signedIn(server);
    const token = await api.createToken(await api.createUser(`${name}-user`));
    return startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${server.edgePort}`, token, args: ["--subdomain", name, "--insecure"] });
  }

  test("past --acme-names-per-week a live name waits, with RATE_LIMITED as its last error, also after a restart", async () => {
    {
      await using server = await startServer({ dataDir, keepDataDir: true, args: args() });
      await using first = await tunnel(server, "first");
      await server.output.waitFor(/certificate installed cert=first\.burrow\.test /, 30_000);
      await using second = await tunnel(server, "second");
      const api = await signedIn(server);
      const certs = (await api.get("/api/certificates")).body as { certificates: { id: string; last_error: { code: string } | null; not_after: string | null }[] };
      const waiting = certs.certificates.find((c) => c.id === `second.${DOMAIN}`);
      expect(waiting?.last_error?.code).toBe("RATE_LIMITED");
      expect(waiting?.not_after).toBeNull();
    }
    await using again = await startServer({ dataDir, keepDataDir: true, args: args() });
    await using third = await tunnel(again, "third");
    const certs = (await (await signedIn(again)).get("/api/certificates")).body as { certificates: { id: string; last_error: { code: string } | null }[] };
    expect(certs.certificates.find((c) => c.id === `third.${DOMAIN}`)?.last_error?.code).toBe("RATE_LIMITED");
    expect(again.output.text()).not.toContain("certificate wanted name=third");
  }, 90_000);
});

describe.skipIf(Boolean(skip))("while the wildcard fails (no NS record yet), live names get certificates of their own", () => {
  let pebble: Pebble;
  let server: TestServer;
  let roots: string;
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

  beforeAll(async () => {
    const httpPort = freeRange(1).first;
    // Pebble resolves through its own test DNS, which knows nothing of burrow's: DNS-01 cannot pass
    pebble = await startPebble({ httpPort });
    const caFile = join(work, "pebble ca 4.pem");
    writeFileSync(caFile, pebble.serverCa);
    roots = pebble.rootPem + pebble.intermediatePem;
    server = await startServer({
      args: ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--http-port", String(httpPort), "--https-port", "0", "--dns-port", String(freeRange(1).first)],
    });
  }, 60_000);
  afterAll(async () => {
    await server?.stop();
    await pebble?.[Symbol.asyncDispose]();
    upstream.stop(true);
  });

  test("the wildcard's failure is reported, and a live name and the domain are served by HTTP-01 meanwhile", async () => {
    const api = await signedIn(server);
    let wildcard: { last_error: { code: string } | null; next_renewal: string | null } | undefined;
    const deadline = Date.now() + 30_000;
    while (!wildcard?.last_error && Date.now() < deadline) {
      await Bun.sleep(200);
      wildcard = ((await api.get("/api/certificates")).body as { certificates: { id: string; last_error: { code: string } | null; next_renewal: string | null }[] }).certificates.find((c) => c.id === `*.${DOMAIN}`);
    }
    expect(wildcard?.last_error?.code).toBe("CHALLENGE_FAILED");
    expect(wildcard?.next_renewal).not.toBeNull();
    const token = await api.createToken(await api.createUser("fallback-user"));
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${server.edgePort}`, token, args: ["--subdomain", "fallback", "--insecure"] });
    await server.output.waitFor(/certificate installed cert=fallback\.burrow\.test /, 30_000);
    await server.output.waitFor(/certificate installed cert=burrow\.test /, 30_000);
    const got = await verifiedHandshake(server.edgePort, `fallback.${DOMAIN}`, roots);
    expect(got.ok && got.names).toBe(`DNS:fallback.${DOMAIN}`);
    if (got.ok) got.socket.destroy();
    expect(agent.output.text()).toContain("Forwarding");
  }, 60_000);
});

describe.skipIf(Boolean(skip))("the compiled executable", () => {
  let pebble: Pebble;
  let binary: string;
  const buildDir = mkdtempSync(join(work, "build "));

  beforeAll(async () => {
    binary = join(buildDir, "burrow");
    const build = Bun.spawn([process.execPath, join(import.meta.dir, "..", "..", "build", "compile.ts"), "--outfile", binary], { stdout: "pipe", stderr: "pipe" });
    const [stderr, code] = await Promise.all([new Response(build.stderr).text(), build.exited]);
    if (code !== 0) throw new Error(`build failed: ${stderr}`);
  }, 120_000);
  afterAll(async () => {
    await pebble?.[Symbol.asyncDispose]();
  });

  test("gets its certificate from the CA too (ACME client, DNS and certificate code all inside the one file)", async () => {
    const httpPort = freeRange(1).first;
    const dnsPort = freeRange(1).first;
    pebble = await startPebble({ httpPort, dnsServer: `127.0.0.1:${dnsPort}` });
    const caFile = join(work, "pebble ca 5.pem");
    writeFileSync(caFile, pebble.serverCa);
    await using server = await startServer({
      executable: binary,
      args: ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--http-port", String(httpPort), "--https-port", "0", "--dns-port", String(dnsPort)],
    });
    await server.output.waitFor(/certificate installed cert=\*\.burrow\.test /, 30_000);
    const got = await verifiedHandshake(server.edgePort, `any.${DOMAIN}`, pebble.rootPem + pebble.intermediatePem);
    expect(got.ok && got.names).toBe(`DNS:*.${DOMAIN}, DNS:${DOMAIN}`);
    if (got.ok) got.socket.destroy();
  }, 60_000);
});
