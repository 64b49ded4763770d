/**
 * A tls tunnel's on_tcp_connect over two nodes of one PostgreSQL database:
 * the visitor's TLS connection reaches the node without the tunnel's agent
 * and is relayed, undecrypted, to the agent's node, which runs the tunnel's
 * policy there. What it reads of the connection must be what it reads on
 * one node: `endpoint.host` the tunnel's whole public name (not its
 * subdomain alone, nor an address the visitor reached), `endpoint.port` the
 * port the visitor reached, `endpoint.addr` and `endpoint.url` made of
 * them; and `conn.tls.*` empty, as docs/policy.md says of a relayed
 * connection (the visitor's node does not pass its handshake on).
 *
 * Each tunnel's policy denies the connection when a value is not the one
 * expected, so the visitor sees the value as the connection going through
 * (curl verifies the local service's own certificate) or being cut; one
 * tunnel expects a wrong value, to show such a rule does cut.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const SECRET = "tls-relayed-connect-secret-0123456789ab";
const NAMES = ["whole", "bare", "ends", "hello"] as const;
let pg: TestPostgres;
let nodes: TestServer[] = [];
let dir: string;
let ca: string;
let service: ReturnType<typeof Bun.serve>;
const agents: TestAgent[] = [];

/** The node the visitor reaches (no agent there) and the node the tunnels' agents are on. */
const visitorsNode = () => nodes[0]!;
const agentsNode = () => nodes[1]!;

/** curl to https://NAME.localhost:PORT/ on 127.0.0.1, trusting only the local service's certificate. */
async function curl(name: string, port: number): Promise<{ code: number; out: string; err: string }> {
  const host = `${name}.localhost`;
  const p = Bun.spawn(["curl", "-sS", "--max-time", "10", "--resolve", `${host}:${port}:127.0.0.1`, "--cacert", ca, `https://${host}:${port}/`], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/** A policy file denying the connection when `wrong` holds. */
function denyWhen(name: string, wrong: string): string {
  const path = join(dir, `${name}.yml`);
  writeFileSync(path, `on_tcp_connect:\n  - expressions: [${JSON.stringify(wrong)}]\n    actions: [{ type: deny }]\n`);
  return path;
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-tls-relayed-connect-"));
  const cert = await selfSignedCertificate({ names: NAMES.map((n) => `${n}.localhost`), ca: true, commonName: "the local service" });
  ca = join(dir, "service.pem");
  writeFileSync(ca, cert.certPem);
  service = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: (req) => new Response(`the service itself, for ${new URL(req.url).hostname}`) });
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["r1", "r2"].map((id, i) =>
      startServer({
        args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET, "--tls-port", "0"],
      }),
    ),
  );
  const api = await signedIn(nodes[0]!);
  const token = await api.createToken(await api.createUser("tls-policies", { allowed_protocols: "tls" }));
  const port = visitorsNode().tlsPort!;
  const policies: Record<(typeof NAMES)[number], string> = {
    // the whole name: let through
    whole: denyWhen("whole", "endpoint.host != 'whole.localhost'"),
    // the subdomain alone (what a tls tunnel's endpoint.host once was): a rule expecting it cuts the connection
    bare: denyWhen("bare", "endpoint.host != 'bare'"),
    // the port the visitor reached on its node, and the address and URL made of it with the whole name
    ends: denyWhen("ends", `endpoint.port != ${port} || endpoint.addr != 'ends.localhost:${port}' || endpoint.url != 'tls://ends.localhost:${port}' || endpoint.protocol != 'tls'`),
    // relayed, the handshake is not passed on: conn.tls.* are empty, the name its hello asked for too
    hello: denyWhen("hello", "conn.tls.sni != '' || conn.tls.version != '' || conn.tls.cipher_suite != ''"),
  };
  for (const name of NAMES) {
    agents.push(await startAgent({ kind: "tls", target: service.port!, server: agentsNode().edgeUrl, token, args: ["--subdomain", name, "--policy-file", policies[name]] }));
  }
}, 60_000);
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await Promise.all(nodes.map((n) => n.stop()));
  service?.stop(true);
  await pg?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** Through: the service's own answer, its certificate verified by the visitor. */
function expectThrough(got: { code: number; out: string; err: string }, name: string): void {
  expect(got.err).toBe("");
  expect(got.code).toBe(0);
  expect(got.out).toBe(`the service itself, for ${name}.localhost`);
}

/** Cut by the policy: no TLS session, nothing of the service. */
function expectCut(got: { code: number; out: string; err: string }): void {
  expect(got.code).not.toBe(0);
  expect(got.out).toBe("");
}

describe("a tls connection relayed from the visitor's node: the tunnel's on_tcp_connect on the agent's node", () => {
  test("the tunnels are the agents' node's, at its --tls-port", () => {
    for (const [i, name] of NAMES.entries()) expect(agents[i]!.publicUrl).toBe(`tls://${name}.localhost:${agentsNode().tlsPort}`);
  });

  test("endpoint.host is the tunnel's whole name: a rule denying any other lets the relayed connection through", async () => {
    expectThrough(await curl("whole", visitorsNode().tlsPort!), "whole");
  });

  test("endpoint.host is not the subdomain alone: a rule expecting that cuts the relayed connection", async () => {
    expectCut(await curl("bare", visitorsNode().tlsPort!));
  });

  test("on the agent's own node the two rules judge the same", async () => {
    expectThrough(await curl("whole", agentsNode().tlsPort!), "whole");
    expectCut(await curl("bare", agentsNode().tlsPort!));
  });

  test("endpoint.port is the port the visitor reached on its node; endpoint.addr and endpoint.url are the whole name with it", async () => {
    expectThrough(await curl("ends", visitorsNode().tlsPort!), "ends");
  });

  test("conn.tls.sni, version and cipher_suite are empty on a relayed connection, as documented", async () => {
    expectThrough(await curl("hello", visitorsNode().tlsPort!), "hello");
  });
});
