/**
 * ACME over several nodes on one PostgreSQL, against a real CA (Debian's
 * Pebble): the nodes share one account, their certificates, the answers to
 * challenges and the orders. Pebble validates HTTP-01 at node b's plain
 * port only, so every certificate node a orders proves that b answers a's
 * challenges. Both nodes want the domain's certificate at start: it is
 * ordered once, and both present that one certificate.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect } from "node:tls";
import { SQL } from "bun";
import { ClusterAcme } from "../../src/cluster/acme-sharing.ts";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { pebbleSkipReason, startPebble, type Pebble } from "../harness/pebble.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

const DOMAIN = "burrow.test";
const HOSTNAME = "demo.custom.test";
const SECRET = "acme-shared-secret-for-tests-0123456789";
const skip = pebbleSkipReason();
if (skip) console.error(`shared acme tests skipped: ${skip}`);

/** The serial of the certificate a node presents for `serverName`, verified with Pebble's roots; undefined while it presents none that verifies. */
async function servedSerial(port: number, serverName: string, roots: string): Promise<string | undefined> {
  return new Promise((resolve) => {
    const socket = connect({ host: "127.0.0.1", port, servername: serverName, ca: roots, ALPNProtocols: ["http/1.1"] });
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(undefined);
    }, 5_000);
    socket.once("secureConnect", () => {
      clearTimeout(timer);
      const serial = socket.getPeerCertificate().serialNumber;
      socket.destroy();
      resolve(serial);
    });
    socket.once("error", () => {
      clearTimeout(timer);
      resolve(undefined);
    });
  });
}

/** The serial both nodes present for `name`, once both present one that verifies (each serves it as soon as the database tells it). */
async function sameOnBoth(nodes: TestServer[], name: string, roots: string): Promise<string[]> {
  let serials: (string | undefined)[] = [];
  await waitUntil(
    async () => {
      serials = await Promise.all(nodes.map((n) => servedSerial(n.edgePort, name, roots)));
      return serials.every((s) => s !== undefined);
    },
    45_000,
    `a verified certificate for ${name} on both nodes`,
    250,
  );
  return serials as string[];
}

/** How many times the nodes' logs say they ordered `cert` from the CA. */
const orders = (nodes: TestServer[], cert: string) => nodes.map((n) => n.output.text().split("\n").filter((l) => l.includes("acme order") && l.includes(`cert=${cert} `)).length);

/**
 * The orders of `cert` that gave a certificate, over both nodes: each order,
 * less those the CA failed (on a loaded machine, a node's listener can be
 * late for the CA's first look, and that order is retried, as it must be).
 * A wait for the other node's order (ORDERED_ELSEWHERE) is no order.
 */
function issued(nodes: TestServer[], cert: string): number {
  const lines = nodes.flatMap((n) => n.output.text().split("\n")).filter((l) => l.includes(`cert=${cert} `));
  const failed = lines.filter((l) => l.includes("acme certificate not obtained") && !l.includes("ORDERED_ELSEWHERE")).length;
  return lines.filter((l) => l.includes("acme order")).length - failed;
}

/** What each node said of its certificates (orders, failures, waits): when a count is wrong, this says why. */
const said = (nodes: TestServer[]) => nodes.flatMap((n, i) => n.output.text().split("\n").filter((l) => /acme|certificate/i.test(l)).map((l) => `node ${i}: ${l}`));

describe.skipIf(Boolean(skip))("ACME shared by two nodes", () => {
  let pebble: Pebble;
  let pg: TestPostgres;
  let databaseUrl: string;
  let nodes: TestServer[] = [];
  let roots: string;
  let work: string;
  let agent: TestAgent | undefined;
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`upstream saw ${new URL(req.url).hostname}`) });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "burrow-acme-shared-"));
    const [httpA, httpB] = (() => {
      const r = freeRange(2);
      return [r.first, r.first + 1];
    })();
    // Pebble looks for every HTTP-01 answer at node b
    pebble = await startPebble({ httpPort: httpB });
    const caFile = join(work, "pebble-ca.pem");
    writeFileSync(caFile, pebble.serverCa);
    roots = pebble.rootPem + pebble.intermediatePem;
    pg = await startPostgres();
    databaseUrl = await pg.newDatabase();
    const acme = ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--https-port", "0", "--dns-port", "off", "--acme-retry-min", "2"];
    nodes = await Promise.all(
      [
        ["a", httpA],
        ["b", httpB],
      ].map(([id, http]) => startServer({ args: [...acme, "--http-port", String(http), "--database", databaseUrl, "--node-id", String(id), "--cluster-secret", SECRET] })),
    );
  }, 90_000);
  afterAll(async () => {
    await agent?.stop();
    await Promise.all(nodes.map((n) => n.stop()));
    await pebble?.[Symbol.asyncDispose]();
    await pg?.stop();
    upstream.stop(true);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test("the domain's certificate, wanted by both nodes at start, is ordered once and presented by both", async () => {
    const serials = await sameOnBoth(nodes, DOMAIN, roots);
    expect(serials[0]).toBe(serials[1]!);
    expect({ issued: issued(nodes, DOMAIN), said: said(nodes) }).toEqual({ issued: 1, said: said(nodes) });
  }, 60_000);

  test("the database holds one account key and the certificate, and no answer once the order is done", async () => {
    const sql = new SQL(databaseUrl);
    try {
      expect((await sql`SELECT count(*)::int AS n FROM acme_account`)[0].n).toBe(1);
      const certs: { id: string; stored_by: string }[] = await sql`SELECT id, stored_by FROM acme_certificates`;
      expect(certs.map((c) => c.id)).toEqual([DOMAIN]);
      expect(["a", "b"]).toContain(certs[0]!.stored_by);
      await waitUntil(async () => (await sql`SELECT count(*)::int AS n FROM acme_challenges`)[0].n === 0, 10_000, "the answers withdrawn");
      expect((await sql`SELECT count(*)::int AS n FROM acme_orders`)[0].n).toBe(0);
    } finally {
      await sql.close();
    }
  });

  test("an order's lease is one node's until released or ended; on-demand names are counted once for the cluster", async () => {
    const sql = new SQL(databaseUrl);
    const quiet = async () => {};
    const x = new ClusterAcme(sql, "x", quiet);
    const y = new ClusterAcme(sql, "y", quiet);
    try {
      expect(await x.lease("lease.test", 60_000)).toBe(true);
      expect(await y.lease("lease.test", 60_000)).toBe(false);
      expect(await x.lease("lease.test", 60_000)).toBe(true); // its own again
      await y.release("lease.test"); // not y's to release
      expect(await y.lease("lease.test", 60_000)).toBe(false);
      await x.release("lease.test");
      expect(await y.lease("lease.test", 1)).toBe(true);
      await Bun.sleep(20);
      expect(await x.lease("lease.test", 60_000)).toBe(true); // y's ended
      await x.release("lease.test");
      await sql`DELETE FROM acme_on_demand`;
      const counted = await Promise.all(["one.test", "two.test", "three.test", "four.test"].map((n, i) => (i % 2 ? x : y).countOnDemand(n, 3)));
      expect(counted.filter(Boolean).length).toBe(3);
      // a name counted already is not counted twice
      const taken: { name: string }[] = await sql`SELECT name FROM acme_on_demand`;
      expect(await x.countOnDemand(taken[0]!.name, 3)).toBe(true);
      expect((await sql`SELECT count(*)::int AS n FROM acme_on_demand`)[0].n).toBe(3);
    } finally {
      await sql`DELETE FROM acme_on_demand`;
      await sql.close();
    }
  });

  test("a hostname live on node a: a orders its certificate, b answers a's challenge, and both present it", async () => {
    const api = await signedIn(nodes[0]!);
    const owner = await api.createUser("shared-acme");
    expect((await api.post("/api/hostnames", { hostname: HOSTNAME, user_id: owner, verified: true })).status).toBe(201);
    const token = await api.createToken(owner);
    agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${nodes[0]!.edgePort}`, token, args: ["--hostname", HOSTNAME, "--insecure"] });
    const serials = await sameOnBoth(nodes, HOSTNAME, roots);
    expect(serials[0]).toBe(serials[1]!);
    expect(orders(nodes, HOSTNAME)).toEqual([1, 0]);
    // b never had the tunnel, so the challenge it answered was a's
    expect(nodes[1]!.output.text()).not.toContain(`certificate wanted name=${HOSTNAME}`);
    const certs = await (await signedIn(nodes[1]!)).get("/api/certificates");
    expect(certs.status).toBe(200);
    const ids = (certs.body as { certificates: { id: string; not_after: string | null }[] }).certificates.filter((c) => c.not_after !== null).map((c) => c.id);
    expect(ids).toContain(HOSTNAME);
  }, 90_000);
});

describe.skipIf(Boolean(skip))("the wildcard by DNS-01 over two nodes", () => {
  let pebble: Pebble;
  let pg: TestPostgres;
  let nodes: TestServer[] = [];
  let roots: string;
  let work: string;

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "burrow-acme-shared-dns-"));
    const ports = freeRange(5);
    // Pebble asks node b's DNS responder for every TXT record, whichever node ordered
    pebble = await startPebble({ httpPort: ports.first + 4, dnsServer: `127.0.0.1:${ports.first + 3}` });
    const caFile = join(work, "pebble-ca.pem");
    writeFileSync(caFile, pebble.serverCa);
    roots = pebble.rootPem + pebble.intermediatePem;
    pg = await startPostgres();
    const url = await pg.newDatabase();
    const acme = ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--https-port", "0", "--acme-retry-min", "2"];
    nodes = await Promise.all(
      ["a", "b"].map((id, i) =>
        startServer({ args: [...acme, "--http-port", String(ports.first + i), "--dns-port", String(ports.first + 2 + i), "--database", url, "--node-id", id, "--cluster-secret", SECRET] }),
      ),
    );
  }, 90_000);
  afterAll(async () => {
    await Promise.all(nodes.map((n) => n.stop()));
    await pebble?.[Symbol.asyncDispose]();
    await pg?.stop();
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test("one order, answered by b's DNS responder whichever node made it, and the same wildcard on both", async () => {
    const serials = await sameOnBoth(nodes, `any.${DOMAIN}`, roots);
    expect(serials[0]).toBe(serials[1]!);
    expect({ issued: issued(nodes, `*.${DOMAIN}`), said: said(nodes) }).toEqual({ issued: 1, said: said(nodes) });
  }, 60_000);
});

describe.skipIf(Boolean(skip))("TLS-ALPN-01 over two nodes", () => {
  let pebble: Pebble;
  let pg: TestPostgres;
  let nodes: TestServer[] = [];
  let roots: string;
  let work: string;
  let agent: TestAgent | undefined;
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("alpn upstream") });

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), "burrow-acme-shared-alpn-"));
    const ports = freeRange(5);
    // Pebble looks for every TLS-ALPN-01 answer on node b's HTTPS port, and for HTTP-01 where nothing listens
    pebble = await startPebble({ httpPort: ports.first + 4, tlsPort: ports.first + 1 });
    const caFile = join(work, "pebble-ca.pem");
    writeFileSync(caFile, pebble.serverCa);
    roots = pebble.rootPem + pebble.intermediatePem;
    pg = await startPostgres();
    const url = await pg.newDatabase();
    const acme = ["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile, "--acme-challenge", "tls-alpn-01", "--dns-port", "off", "--acme-retry-min", "2"];
    nodes = await Promise.all(
      ["a", "b"].map((id, i) =>
        startServer({ args: [...acme, "--https-port", String(ports.first + i), "--http-port", String(ports.first + 2 + i), "--database", url, "--node-id", id, "--cluster-secret", SECRET] }),
      ),
    );
  }, 90_000);
  afterAll(async () => {
    await agent?.stop();
    await Promise.all(nodes.map((n) => n.stop()));
    await pebble?.[Symbol.asyncDispose]();
    await pg?.stop();
    upstream.stop(true);
    if (work) rmSync(work, { recursive: true, force: true });
  });

  test("a hostname live on node a: a orders its certificate, b presents the challenge certificate to the CA, and both present the certificate", async () => {
    const api = await signedIn(nodes[0]!);
    const owner = await api.createUser("shared-alpn");
    expect((await api.post("/api/hostnames", { hostname: "alpn.shared.test", user_id: owner, verified: true })).status).toBe(201);
    agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${nodes[0]!.edgePort}`, token: await api.createToken(owner), args: ["--hostname", "alpn.shared.test", "--insecure"] });
    const serials = await sameOnBoth(nodes, "alpn.shared.test", roots);
    expect(serials[0]).toBe(serials[1]!);
    expect(orders(nodes, "alpn.shared.test")).toEqual([1, 0]);
  }, 90_000);
});
