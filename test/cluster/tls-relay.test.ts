/**
 * tls tunnels over several nodes: a visitor's TLS connection on any node's
 * --tls-port reaches a tls tunnel held by another, through the relay link,
 * undecrypted all the way: the visitor verifies the local service's own
 * certificate. The tunnel's IP rules are judged on the agent's node, on the
 * address the visitor's node saw. A name is one tunnel over the cluster,
 * whichever its kind.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, type TestAgent } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const SECRET = "tls-relay-secret-for-tests-0123456789ab";
let pg: TestPostgres;
let nodes: TestServer[] = [];
let api: AdminClient;
let token: string;
let dir: string;
let ca: string;
let service: ReturnType<typeof Bun.serve>;
const agents: TestAgent[] = [];

/** curl to https://NAME:PORT/ on 127.0.0.1, trusting only the local service's certificate. */
async function curl(name: string, port: number): Promise<{ code: number; out: string; err: string }> {
  const p = Bun.spawn(["curl", "-sS", "--max-time", "10", "--resolve", `${name}:${port}:127.0.0.1`, "--cacert", ca, `https://${name}:${port}/`], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-tls-relay-"));
  const cert = await selfSignedCertificate({ names: ["vault.localhost", "walled.localhost"], ca: true, commonName: "the local service" });
  ca = join(dir, "service.pem");
  writeFileSync(ca, cert.certPem);
  // the local service terminates TLS with its own certificate; no node ever holds its key
  service = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: (req) => new Response(`the service itself, for ${new URL(req.url).hostname}`) });
  pg = await startPostgres();
  const url = await pg.newDatabase();
  const ports = freeRange(2);
  nodes = await Promise.all(
    ["t1", "t2"].map((id, i) =>
      startServer({
        args: ["--database", url, "--node-id", id, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET, "--tls-port", "0"],
      }),
    ),
  );
  api = await signedIn(nodes[0]!);
  token = await api.createToken(await api.createUser("tls-everywhere", { allowed_protocols: "http,tls" }));
  // the tunnels are on t2; visitors come to t1
  agents.push(await startAgent({ kind: "tls", target: service.port!, server: nodes[1]!.edgeUrl, token, args: ["--subdomain", "vault"] }));
  agents.push(await startAgent({ kind: "tls", target: service.port!, server: nodes[1]!.edgeUrl, token, args: ["--subdomain", "walled", "--deny-cidr", "127.0.0.0/8"] }));
});
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await Promise.all(nodes.map((n) => n.stop()));
  service?.stop(true);
  await pg?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("a tls tunnel on another node", () => {
  test("the agent is granted it on a node of several, at that node's --tls-port", () => {
    expect(agents[0]!.publicUrl).toBe(`tls://vault.localhost:${nodes[1]!.tlsPort}`);
  });

  test("a visitor on the other node reaches it undecrypted: curl verifies the service's own certificate, through either node", async () => {
    for (const node of nodes) {
      const got = await curl("vault.localhost", node.tlsPort!);
      expect(got.err).toBe("");
      expect(got.code).toBe(0);
      expect(got.out).toBe("the service itself, for vault.localhost");
    }
  });

  test("its IP rules are the agent's node's to judge: a denied visitor on the other node is closed before the service", async () => {
    const got = await curl("walled.localhost", nodes[0]!.tlsPort!);
    expect(got.code).not.toBe(0);
    expect(got.out).toBe("");
    // the same way, the same service, a tunnel without the rule: through
    expect((await curl("vault.localhost", nodes[0]!.tlsPort!)).out).toBe("the service itself, for vault.localhost");
  });

  test("a name no node has gets unrecognized_name on any node", async () => {
    const got = await curl("nobody.localhost", nodes[0]!.tlsPort!);
    expect(got.code).not.toBe(0);
    expect(got.err).toMatch(/unrecognized name/i);
  });

  test("one name, one tunnel over the cluster: an http tunnel cannot take a tls tunnel's name on another node", async () => {
    expect(await refusal({ kind: "http", target: service.port!, server: nodes[0]!.edgeUrl, token, args: ["--subdomain", "vault"] })).toMatch(
      /^burrow: refused by the server: SUBDOMAIN_TAKEN: /,
    );
  });

  test("every node lists it as tls", async () => {
    for (const node of nodes) {
      const client = await signedIn(node);
      const list = (await client.get("/api/tunnels/active")).body as { protocol: string; subdomain?: string }[];
      expect(list.filter((t) => t.subdomain === "vault").map((t) => t.protocol)).toEqual(["tls"]);
    }
  });
});
