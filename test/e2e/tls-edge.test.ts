/**
 * TLS on the public port: the agent verifies the server's certificate
 * (name and chain) unless told --insecure, tunnels are https:// URLs, and
 * the local service learns the visitor came over https.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { within } from "../harness/wait.ts";

let certDir: string;
let cert: string;
let server: TestServer;
let token: string;
/** The edge as a person types it: the certificate is for localhost and *.localhost. */
let httpsUrl: string;

const seen: Headers[] = [];
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req) {
    seen.push(req.headers);
    return new Response(`secure ${new URL(req.url).pathname}`);
  },
});

beforeAll(async () => {
  certDir = mkdtempSync(join(tmpdir(), "burrow-tls-"));
  cert = join(certDir, "cert.pem");
  const key = join(certDir, "key.pem");
  const made = Bun.spawnSync(
    ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,DNS:*.localhost"],
    { stdout: "pipe", stderr: "pipe" },
  );
  if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`);
  server = await startServer({ args: ["--tls-cert", cert, "--tls-key", key] });
  httpsUrl = `https://localhost:${server.edgePort}`;
  const api = await signedIn(server);
  const id = await api.createUser("secure-user");
  token = await api.createToken(id);
});

afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

/** A visitor over https, with the tunnel's Host; the test trusts the self-signed certificate. */
function visit(subdomain: string, path: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(`https://127.0.0.1:${server.edgePort}${path}`, {
    headers: { host: `${subdomain}.localhost:${server.edgePort}`, ...headers },
    tls: { rejectUnauthorized: false },
    redirect: "manual",
  } as RequestInit);
}

/** The server's "agent connected" line for the tunnel `subdomain`, waited for (bounded). */
const connectedLine = (subdomain: string) => server.output.waitFor(new RegExp(`agent connected .*tunnels=https://${subdomain}\\.localhost`), 5_000);

test("the server says its public address is https", async () => {
  await server.output.waitFor(new RegExp(`edge listening url=https://localhost:${server.edgePort}`), 1_000);
});

test("with its own certificate the server offers a direct port (TLS too)", () => {
  expect(server.agentPort).toBeGreaterThan(0);
  expect(server.output.text()).not.toContain("no direct agent port");
});

test("the direct port speaks only TLS: plain bytes get no frame back", async () => {
  const got: Buffer[] = [];
  const closed = Promise.withResolvers<void>();
  const sock = await Bun.connect({
    hostname: "127.0.0.1",
    port: server.agentPort!,
    socket: { data: (_s, d) => void got.push(Buffer.from(d)), close: () => closed.resolve(), error: () => closed.resolve() },
  });
  // a well-formed HELLO in the clear: a TLS server reads it as a broken handshake
  sock.write(new TextEncoder().encode("\x01\x00\x00\x00\x00\x00\x00\x00\x02{}"));
  await within(closed.promise, 5_000, "the TLS port to drop a plaintext peer");
  // whatever came back (a TLS alert at most) is not a burrow ERROR frame in the clear
  const back = Buffer.concat(got);
  expect(back.byteLength).toBeLessThan(9 + 2);
  expect(back.toString("latin1")).not.toContain("PROTOCOL_ERROR");
});

test("without --insecure the agent refuses the self-signed certificate, says so, and keeps retrying", async () => {
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: httpsUrl, token, waitFor: /\(attempt 2\)/ });
  const lines = agent.output.lines.filter((l) => l.includes("reconnecting"));
  expect(lines[0]).toMatch(/could not reach the server: .*(certificate|TLS).*--insecure/);
  expect(agent.output.text()).not.toContain("Forwarding");
  expect(agent.proc.exitCode).toBeNull();
  expect(server.output.text()).not.toContain("user=secure-user");
  // refused on the WebSocket, it never got as far as MOVE: no word of a direct port
  expect(agent.output.text()).not.toContain("direct port");
});

test("with --insecure the agent connects, prints an https:// URL, and a visitor reaches the service over https", async () => {
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: httpsUrl, token, args: ["--insecure"] });
  expect(agent.publicUrl).toBe(`https://${agent.subdomain}.localhost:${server.edgePort}`);
  // --insecure holds for the direct port's TLS as for the WebSocket's: the agent moved there
  expect(await connectedLine(agent.subdomain!)).toContain("transport=direct");
  expect(agent.output.text()).not.toContain("out of reach");
  seen.length = 0;
  const res = await visit(agent.subdomain!, "/over-tls", { "x-forwarded-proto": "http" });
  expect(res.status).toBe(200);
  expect(await res.text()).toBe("secure /over-tls");
  expect(seen).toHaveLength(1);
  // the edge's word, not the visitor's
  expect(seen[0]!.get("x-forwarded-proto")).toBe("https");
  expect(seen[0]!.get("x-forwarded-host")).toBe(`${agent.subdomain}.localhost:${server.edgePort}`);
});

test("trusting the certificate through NODE_EXTRA_CA_CERTS, the agent connects without --insecure", async () => {
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: httpsUrl, token, env: { NODE_EXTRA_CA_CERTS: cert } });
  expect(agent.publicUrl).toStartWith("https://");
  // the direct port's TLS is verified against the same extra CA, and the name localhost
  expect(await connectedLine(agent.subdomain!)).toContain("transport=direct");
  expect(agent.output.text()).not.toContain("out of reach");
  expect(await (await visit(agent.subdomain!, "/trusted")).text()).toBe("secure /trusted");
});

test("a trusted certificate for another name is still refused: the agent checks the host name", async () => {
  // the certificate names localhost, not 127.0.0.1
  await using agent = await startAgent({
    kind: "http",
    target: upstream.port!,
    server: `https://127.0.0.1:${server.edgePort}`,
    token,
    env: { NODE_EXTRA_CA_CERTS: cert },
    waitFor: /reconnecting in/,
  });
  expect(agent.output.text()).not.toContain("Forwarding");
  expect(agent.output.text()).toMatch(/could not reach the server: .*(altnames|does not match)/i);
});

test("a visitor over plain http to the TLS port gets no tunnel", async () => {
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: httpsUrl, token, args: ["--insecure"] });
  seen.length = 0;
  const plain = await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `${agent.subdomain}.localhost` } }).then(
    (r) => r.status,
    () => "failed",
  );
  expect(plain).not.toBe(200);
  expect(seen).toHaveLength(0);
});
