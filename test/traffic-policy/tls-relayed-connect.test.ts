/**
 * A tls tunnel's on_tcp_connect over two nodes of one PostgreSQL database:
 * the visitor's TLS connection reaches the node without the tunnel's agent
 * and is relayed, undecrypted, to the agent's node, which runs the tunnel's
 * policy there. What it reads of the connection must be what it reads on
 * one node: `endpoint.host` the tunnel's whole public name (not its
 * subdomain alone, nor an address the visitor reached), `endpoint.port` the
 * port the visitor reached, `endpoint.addr` and `endpoint.url` made of
 * them; `conn.tls.sni` the name the visitor's hello asked for and
 * `conn.tls.ja4_fingerprint` its JA4, which the visitor's node sends with
 * the connection, and the handshake's version
 * and suite empty (the visitor's node does not decrypt it). The same when
 * the policies change while the connection is open: it is judged again
 * by the same facts.
 *
 * Each tunnel's policy denies the connection when a value is not the one
 * expected, so the visitor sees the value as the connection going through
 * (curl verifies the local service's own certificate) or being cut; one
 * tunnel expects a wrong value, to show such a rule does cut.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { endsWithin } from "../harness/live-visits.ts";
import { freeRange } from "../harness/ports.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { captureHello } from "../harness/client-hello.ts";
import { parseClientHello, type ClientHello } from "../../src/tls/client-hello.ts";
import { ja4 } from "../../src/tls/ja4.ts";

const SECRET = "tls-relayed-connect-secret-0123456789ab";
const NAMES = ["whole", "bare", "ends", "hello", "keyed", "gone", "print"] as const;
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
  // the same command line as the one print's fingerprint is recorded from (beforeAll)
  const p = Bun.spawn(["curl", "-sS", "--max-time", "10", "--resolve", `${host}:${port}:127.0.0.1`, "--cacert", ca, `https://${host}:${port}/`], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, out, err };
}

/**
 * A TLS connection held open through `port` to the tunnel `name`, once its
 * handshake with the local service is done: asked again and again over one
 * connection (the service keeps it alive). `ended` says why it closed, for
 * a failure's message.
 */
async function heldTls(name: string, port: number): Promise<{ answers(): Promise<string>; closed: Promise<void>; end(): void }> {
  let got = "";
  let ended = "";
  let waiter: ((answer: string) => void) | undefined;
  let onClose!: () => void;
  const closed = new Promise<void>((resolve) => (onClose = resolve));
  let shaken!: (why: string) => void;
  const handshake = new Promise<string>((resolve) => (shaken = resolve));
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    tls: { serverName: `${name}.localhost`, ca: readFileSync(ca, "utf8") },
    socket: {
      handshake(_s, success, authError) {
        shaken(success ? "" : `handshake failed: ${authError?.message ?? "no reason"}`);
      },
      data(_s, d) {
        got += Buffer.from(d).toString("latin1");
        if (got.includes("the service itself")) {
          got = "";
          waiter?.("answered");
        }
      },
      close() {
        ended ||= "closed";
        shaken(`closed before its handshake`);
        waiter?.(`${name}: ${ended}`);
        onClose();
      },
      error(_s, err) {
        ended = `error: ${err.message}`;
      },
    },
  });
  const failed = await handshake;
  if (failed) throw new Error(`${name}: ${failed}`);
  return {
    answers: () =>
      new Promise<string>((resolve) => {
        const timer = setTimeout(() => resolve(`${name}: no answer in 10 s`), 10_000);
        waiter = (answer) => {
          clearTimeout(timer);
          waiter = undefined;
          resolve(answer);
        };
        socket.write(`GET / HTTP/1.1\r\nHost: ${name}.localhost\r\n\r\n`);
      }),
    closed,
    end: () => socket.end(),
  };
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
  // the JA4 (src/tls/ja4.ts) of the hello curl sends for print.localhost, recorded on a plain socket
  const printed = ja4(parseClientHello(await captureHello(async (p) => void (await curl("print", p))), true) as ClientHello);
  expect(printed).toMatch(/^t1[0-3]d\d{4}[a-z0-9]{2}_[0-9a-f]{12}_[0-9a-f]{12}$/);
  const policies: Record<(typeof NAMES)[number], string> = {
    // the whole name: let through
    whole: denyWhen("whole", "endpoint.host != 'whole.localhost'"),
    // the subdomain alone (what a tls tunnel's endpoint.host once was): a rule expecting it cuts the connection
    bare: denyWhen("bare", "endpoint.host != 'bare'"),
    // the port the visitor reached on its node, and the address and URL made of it with the whole name
    ends: denyWhen("ends", `endpoint.port != ${port} || endpoint.addr != 'ends.localhost:${port}' || endpoint.url != 'tls://ends.localhost:${port}' || endpoint.protocol != 'tls'`),
    // relayed, the name its hello asked for comes with it; the handshake's version and suite are the service's, never known here
    hello: denyWhen("hello", "conn.tls.sni != 'hello.localhost' || conn.tls.version != '' || conn.tls.cipher_suite != ''"),
    // a rule keyed on the name the hello asked for holds for a visitor of another node too
    keyed: denyWhen("keyed", "conn.tls.sni.startsWith('keyed.')"),
    // nothing of its own to refuse: the operator's rule below ends its connections
    gone: denyWhen("gone", "false"),
    // relayed, the JA4 of its hello comes with it, made on the node that read the hello
    print: denyWhen("print", `conn.tls.ja4_fingerprint != '${printed}'`),
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

  test("conn.tls.sni is the name the visitor's hello asked for, relayed with the connection; version and cipher_suite are empty", async () => {
    expectThrough(await curl("hello", visitorsNode().tlsPort!), "hello");
    expectThrough(await curl("hello", agentsNode().tlsPort!), "hello");
  });

  test("conn.tls.ja4_fingerprint is the JA4 of the visitor's hello, relayed with the connection as on its own node", async () => {
    expectThrough(await curl("print", visitorsNode().tlsPort!), "print");
    expectThrough(await curl("print", agentsNode().tlsPort!), "print");
  });

  test("held relayed connections are judged again by the same facts when the policies change: those the rules let on stay, the one an operator's new rule refuses ends", async () => {
    const port = visitorsNode().tlsPort!;
    const whole = await heldTls("whole", port);
    const hello = await heldTls("hello", port);
    const gone = await heldTls("gone", port);
    const api = await signedIn(visitorsNode());
    let made: { body: { id: number } } | undefined;
    try {
      for (const held of [whole, hello, gone]) expect(await held.answers()).toBe("answered");
      made = await api.post("/api/policies", { name: "gone-by-name", policy: "on_tcp_connect: [{expressions: [\"endpoint.host == 'gone.localhost'\"], actions: [{type: deny}]}]" });
      expect(made!.body.id).toBeGreaterThan(0);
      // the agent's node reads the change within 2 s and judges its open connections again: the refused one ends
      expect(await endsWithin(gone.closed, 20_000)).toBe(true);
      // judged by the same facts as when they came: the whole name, the name the hello asked for
      expect(await whole.answers()).toBe("answered");
      expect(await hello.answers()).toBe("answered");
    } finally {
      for (const held of [whole, hello, gone]) held.end();
      if (made) await api.delete(`/api/policies/${made.body.id}`);
    }
  }, 60_000);

  test("a rule keyed on conn.tls.sni cuts the connection whichever node the visitor reached", async () => {
    expectCut(await curl("keyed", agentsNode().tlsPort!));
    expectCut(await curl("keyed", visitorsNode().tlsPort!));
  });
});
