/**
 * ngrok's `conn.bytes_in`, `conn.bytes_out` and `conn.server_region`
 * through the real server, agent and service, with curl as the visitor:
 * the counts are the visitor's connection's, so they grow from one
 * request to the next on a kept connection (a rule `conn.bytes_in > N`
 * refuses the request after a large one on the same connection, not the
 * same request on a fresh one) over HTTP/1.1, HTTPS and HTTP/2; a tcp
 * tunnel's on_tcp_connect reads 0 and 0 and the server's --region; a bad
 * --region is refused at start; and on two nodes of one PostgreSQL
 * database a request relayed from the node the visitor reached (HTTP/1.1
 * and HTTP/2) reads that node's region and its connection's counts, not
 * the agent's node's, and so does a tls connection relayed undecrypted,
 * at its on_tcp_connect (0 bytes each way).
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { echo, type Echoed } from "./rig.ts";

setDefaultTimeout(60_000);

/** Past this many bytes from the visitor on one connection, a request to /after is refused. */
const LIMIT = 20_000;
const POLICY = `
on_http_request:
  - name: too much on this connection
    expressions: ["conn.bytes_in > ${LIMIT}", "req.url.path == '/after'"]
    actions: [{ type: deny, config: { status_code: 429 } }]
  - actions:
      - type: add-headers
        config:
          headers:
            x-bytes-in: "\${string(conn.bytes_in)}"
            x-bytes-out: "\${string(conn.bytes_out)}"
            x-region: "region=\${conn.server_region}"
on_http_response:
  - actions:
      - type: add-headers
        config:
          headers:
            x-bytes-out-at-response: "\${string(conn.bytes_out)}"
            x-region-at-response: "region=\${conn.server_region}"
`;

let dir: string;
/** A plain server (--region eu as a flag), and one with HTTPS and HTTP/2 on its public port (the region from BURROW_REGION). */
let plain: Rig;
let secure: Rig;
let upstream: ReturnType<typeof Bun.serve>;
let tcpService: Bun.TCPSocketListener<undefined>;
let tcpCut: TestAgent;
let tcpCounts: TestAgent;
let heardTcp = 0;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-conn-bytes-"));
  const cert = await selfSignedCertificate({ names: ["localhost", "*.localhost"], ips: ["127.0.0.1"] });
  writeFileSync(join(dir, "cert.pem"), cert.certPem);
  writeFileSync(join(dir, "key.pem"), cert.keyPem);
  writeFileSync(join(dir, "policy.yml"), POLICY);
  writeFileSync(join(dir, "cut.yml"), `on_tcp_connect:\n  - expressions: ["conn.server_region == 'eu'"]\n    actions: [{ type: deny }]\n`);
  // let through only when the counts are 0 and 0 and the region is this server's
  writeFileSync(join(dir, "counts.yml"), `on_tcp_connect:\n  - expressions: ["conn.bytes_in != 0 || conn.bytes_out != 0 || conn.server_region != 'eu'"]\n    actions: [{ type: deny }]\n`);
  upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: echo });
  tcpService = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => (heardTcp++, void s.write("ready\n")), data: (s, d) => void s.write(d) } });
  plain = await withServer({ server: { args: ["--region", "eu"] } });
  await plain.startAgent({ kind: "http", target: upstream.port!, args: ["--subdomain", "counted", "--policy-file", join(dir, "policy.yml")] });
  tcpCut = await plain.startAgent({ kind: "tcp", target: tcpService.port, args: ["--policy-file", join(dir, "cut.yml")] });
  tcpCounts = await plain.startAgent({ kind: "tcp", target: tcpService.port, args: ["--policy-file", join(dir, "counts.yml")] });
  // the region from the environment, as a service unit would give it
  secure = await withServer({ server: { args: ["--tls-cert", join(dir, "cert.pem"), "--tls-key", join(dir, "key.pem")], env: { BURROW_REGION: "eu" } } });
  await secure.startAgent({ kind: "http", target: upstream.port!, server: `https://localhost:${secure.server.edgePort}`, args: ["--subdomain", "counted", "--insecure", "--policy-file", join(dir, "policy.yml")] });
});

afterAll(async () => {
  await plain?.close();
  await secure?.close();
  upstream?.stop(true);
  tcpService?.stop(true);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

interface Step {
  /** The path on the tunnel. */
  path: string;
  /** A body to POST, this many bytes. */
  body?: number;
}

interface StepReply {
  status: number;
  /** New connections curl made for it: 0 when it went on the one before. */
  connects: number;
  /** The service's echo, for a request that reached it. */
  echoed?: Echoed;
  /** The response's headers as curl got them, names lower-cased. */
  headers: Record<string, string>;
}

let runs = 0;

/**
 * One curl run of `steps` in order (--next between them): curl keeps its
 * connection from one to the next. `common`: the options of every step
 * (the protocol, TLS). Each step's status, whether it made a connection,
 * and what the service echoed.
 */
async function sequence(host: string, scheme: "http" | "https", common: string[], steps: Step[]): Promise<StepReply[]> {
  const run = runs++;
  const args: string[] = [];
  steps.forEach((s, i) => {
    if (i > 0) args.push("--next");
    const base = join(dir, `run${run}-${i}`);
    if (s.body !== undefined) {
      writeFileSync(`${base}.in`, "x".repeat(s.body));
      args.push("--data-binary", `@${base}.in`);
    }
    args.push(...common, "-sS", "--max-time", "20", "-D", `${base}.head`, "-o", `${base}.out`, "-w", "%{http_code} %{num_connects}\\n", `${scheme}://${host}${s.path}`);
  });
  const p = Bun.spawn(["curl", ...args], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  if (code !== 0) throw new Error(`curl failed (${code}): ${err}`);
  const lines = out.trim().split("\n");
  return steps.map((_, i) => {
    const base = join(dir, `run${run}-${i}`);
    const [status, connects] = lines[i]!.split(" ").map(Number);
    const headers: Record<string, string> = {};
    for (const line of readFileSync(`${base}.head`, "latin1").split("\r\n").slice(1)) {
      const colon = line.indexOf(":");
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const body = readFileSync(`${base}.out`, "utf8");
    return { status: status!, connects: connects!, headers, echoed: headers["x-from-service"] === "yes" ? (JSON.parse(body) as Echoed) : undefined };
  });
}

const counted = (r: StepReply, name: "x-bytes-in" | "x-bytes-out") => Number(r.echoed!.headers[name]);

const ways = [
  ["HTTP/1.1", "http", ["--http1.1"]],
  ["HTTPS", "https", ["--http1.1", "-k"]],
  ["HTTP/2 over TLS", "https", ["--http2", "-k"]],
] as const;

for (const [name, scheme, options] of ways) {
  describe(name, () => {
    const host = () => `counted.localhost:${(scheme === "http" ? plain : secure).server.edgePort}`;
    const common = () => [...options, "--resolve", `${host()}:127.0.0.1`];

    test("the counts grow over a kept connection, in both phases, and the region is the server's", async () => {
      const r = await sequence(host(), scheme, common(), [{ path: "/one" }, { path: "/two" }, { path: "/three" }]);
      expect(r.map((x) => x.status)).toEqual([200, 200, 200]);
      expect(r.slice(1).map((x) => x.connects)).toEqual([0, 0]);
      const ins = r.map((x) => counted(x, "x-bytes-in"));
      const outs = r.map((x) => counted(x, "x-bytes-out"));
      // the first request's head came in; nothing went out before its answer (HTTP/2: the server's SETTINGS may have)
      expect(ins[0]).toBeGreaterThan(0);
      if (name !== "HTTP/2 over TLS") expect(outs[0]).toBe(0);
      expect(ins[1]).toBeGreaterThan(ins[0]!);
      expect(ins[2]).toBeGreaterThan(ins[1]!);
      expect(outs[1]).toBeGreaterThan(outs[0]!);
      expect(outs[2]).toBeGreaterThan(outs[1]!);
      // on_http_response reads them as they are then: the answers before this one went out
      const atResponse = r.map((x) => Number(x.headers["x-bytes-out-at-response"]));
      expect(atResponse[0]).toBeGreaterThanOrEqual(outs[0]!);
      expect(atResponse[1]).toBeGreaterThan(atResponse[0]!);
      for (const x of r) {
        expect(x.echoed!.headers["x-region"]).toBe("region=eu");
        expect(x.headers["x-region-at-response"]).toBe("region=eu");
      }
    });

    test(`a request after ${LIMIT * 2} bytes on its connection is refused; the same on a fresh connection is not`, async () => {
      const r = await sequence(host(), scheme, common(), [{ path: "/big", body: LIMIT * 2 }, { path: "/after" }]);
      expect(r[0]!.status).toBe(200);
      expect(r[0]!.echoed!.body.length).toBe(LIMIT * 2);
      expect(r[1]!.connects).toBe(0);
      expect(r[1]!.status).toBe(429);
      expect(r[1]!.echoed).toBeUndefined();
      const fresh = await sequence(host(), scheme, common(), [{ path: "/after" }]);
      expect(fresh[0]!.status).toBe(200);
    });
  });
}

/** What a raw connection to `port` got before it closed, or before 10 s passed while it was open. */
function tcpExchange(port: number): Promise<{ bytes: string; closed: boolean }> {
  return new Promise((resolve) => {
    let bytes = "";
    const sock = connect(port, "127.0.0.1", () => sock.write("ping\n"));
    const timer = setTimeout(() => (sock.destroy(), resolve({ bytes, closed: false })), 10_000);
    sock.on("data", (d) => {
      bytes += d.toString("latin1");
      if (bytes.includes("ping")) (clearTimeout(timer), sock.destroy(), resolve({ bytes, closed: false }));
    });
    sock.on("close", () => (clearTimeout(timer), resolve({ bytes, closed: true })));
    sock.on("error", () => {});
  });
}

describe("a tcp tunnel's on_tcp_connect", () => {
  test("conn.server_region is the server's --region: a rule on it closes the connection before the service hears of it", async () => {
    const before = heardTcp;
    const r = await tcpExchange(tcpCut.port!);
    expect(r).toEqual({ bytes: "", closed: true });
    expect(heardTcp).toBe(before);
  });

  test("nothing has passed yet: 0 bytes in, 0 out", async () => {
    const r = await tcpExchange(tcpCounts.port!);
    expect(r.bytes).toBe("ready\nping\n");
  });
});

describe("--region", () => {
  const main = join(import.meta.dir, "..", "..", "src", "main.ts");
  for (const [how, args, env] of [
    ["a flag with capitals and a dot", ["--region", "EU.west"], {}],
    ["a flag too long", ["--region", "a".repeat(64)], {}],
    ["the variable with a space", [], { BURROW_REGION: "eu west" }],
  ] as const) {
    test(`${how}: one line naming the flag, exit 2, nothing started`, async () => {
      const proc = Bun.spawn([process.execPath, main, "server", ...args], {
        env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "/tmp", ...env },
        stdin: "ignore",
        stdout: "pipe",
        stderr: "pipe",
        timeout: 15_000,
      });
      const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      expect(code).toBe(2);
      expect(stderr).toContain("--region must be 1 to 63 lower-case letters, digits or dashes");
      expect(stdout).toBe("");
    });
  }

  test("--help names it", async () => {
    const proc = Bun.spawn([process.execPath, main, "server", "--help"], { stdout: "pipe", stderr: "pipe", timeout: 15_000 });
    const [stdout] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
    expect(stdout).toContain("--region NAME");
    expect(stdout).toContain("conn.server_region");
  });
});

describe("a request relayed from another node", () => {
  const SECRET = "conn-bytes-region-secret-0123456789ab";
  let pg: TestPostgres | undefined;
  let nodes: TestServer[] = [];
  let agent: TestAgent | undefined;
  let tlsAgent: TestAgent | undefined;
  let tlsService: ReturnType<typeof Bun.serve> | undefined;
  let ca: string;

  beforeAll(async () => {
    // a tls tunnel's own service, with its own certificate (the edge passes its TLS on undecrypted)
    const cert = await selfSignedCertificate({ names: ["passed.localhost"], ca: true, commonName: "the tls service" });
    ca = join(dir, "tls-service.pem");
    writeFileSync(ca, cert.certPem);
    tlsService = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: () => new Response("the tls service") });
    // let through only from the eu node, and with nothing passed yet
    writeFileSync(join(dir, "relayed-tls.yml"), `on_tcp_connect:\n  - expressions: ["conn.server_region != 'eu' || conn.bytes_in != 0 || conn.bytes_out != 0"]\n    actions: [{ type: deny }]\n`);
    pg = await startPostgres();
    const url = await pg.newDatabase();
    const ports = freeRange(2);
    // the visitor's node is in eu, the agent's in us
    nodes = await Promise.all(
      (["eu", "us"] as const).map((region, i) =>
        startServer({ args: ["--database", url, "--node-id", `${region}-1`, "--region", region, "--http-port", String(ports.first + i), "--node-url", `http://127.0.0.1:${ports.first + i}`, "--cluster-secret", SECRET, "--tls-port", "0"] }),
      ),
    );
    const api = await signedIn(nodes[1]!);
    const token = await api.createToken(await api.createUser("regioned", { skip_warning: true, allowed_protocols: "http,tls" }));
    agent = await startAgent({ kind: "http", target: upstream.port!, server: nodes[1]!.edgeUrl, token, args: ["--subdomain", "regioned", "--policy-file", join(dir, "policy.yml")] });
    tlsAgent = await startAgent({ kind: "tls", target: tlsService.port!, server: nodes[1]!.edgeUrl, token, args: ["--subdomain", "passed", "--policy-file", join(dir, "relayed-tls.yml")] });
  }, 90_000);

  afterAll(async () => {
    await agent?.stop();
    await tlsAgent?.stop();
    tlsService?.stop(true);
    await Promise.all(nodes.map((n) => n.stop()));
    await pg?.stop();
  });

  test("reads the region of the node the visitor came in at, and that connection's counts as they were when it was relayed", async () => {
    const host = `regioned.localhost:${nodes[0]!.edgePort}`;
    const r = await sequence(host, "http", ["--http1.1"], [{ path: "/one" }, { path: "/two" }]);
    expect(r.map((x) => x.status)).toEqual([200, 200]);
    expect(r[1]!.connects).toBe(0);
    for (const x of r) expect(x.echoed!.headers["x-region"]).toBe("region=eu");
    expect(counted(r[0]!, "x-bytes-in")).toBeGreaterThan(0);
    expect(counted(r[1]!, "x-bytes-in")).toBeGreaterThan(counted(r[0]!, "x-bytes-in"));
    expect(counted(r[1]!, "x-bytes-out")).toBeGreaterThan(counted(r[0]!, "x-bytes-out"));
    // the rule on the count holds there too
    const big = await sequence(host, "http", ["--http1.1"], [{ path: "/big", body: LIMIT * 2 }, { path: "/after" }]);
    expect(big.map((x) => x.status)).toEqual([200, 429]);
    // a visitor of the agent's own node reads that node's
    const own = await sequence(`regioned.localhost:${nodes[1]!.edgePort}`, "http", ["--http1.1"], [{ path: "/own" }]);
    expect(own[0]!.echoed!.headers["x-region"]).toBe("region=us");
  });

  test("over HTTP/2 (prior knowledge) too: the region and the session's counts of the visitor's node", async () => {
    // one request a connection: curl 7.88 does not reuse a prior-knowledge HTTP/2 connection for a second URL (exit 16, against nghttpd as well)
    const r = await sequence(`regioned.localhost:${nodes[0]!.edgePort}`, "http", ["--http2-prior-knowledge"], [{ path: "/one" }]);
    expect(r[0]!.status).toBe(200);
    expect(r[0]!.echoed!.headers["x-region"]).toBe("region=eu");
    // the preface and the request's HEADERS came in; the server's SETTINGS went out before
    expect(counted(r[0]!, "x-bytes-in")).toBeGreaterThan(24);
    expect(counted(r[0]!, "x-bytes-out")).toBeGreaterThan(0);
  });

  test("a tls connection relayed from the eu node reads eu and 0 bytes at on_tcp_connect; one on the agent's own node reads us and is cut", async () => {
    const through = async (port: number) => {
      const p = Bun.spawn(["curl", "-sS", "--max-time", "10", "--resolve", `passed.localhost:${port}:127.0.0.1`, "--cacert", ca, `https://passed.localhost:${port}/`], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
      const [out, code] = await Promise.all([new Response(p.stdout).text(), p.exited]);
      return { out, code };
    };
    expect(await through(nodes[0]!.tlsPort!)).toEqual({ out: "the tls service", code: 0 });
    const cut = await through(nodes[1]!.tlsPort!);
    expect(cut.code).not.toBe(0);
    expect(cut.out).toBe("");
  });
});
