/**
 * `burrow http PORT --upstream-protocol h2c`: the real server and the real
 * agent in front of real HTTP/2 services without TLS, a gRPC server
 * (Debian's python3-grpcio) and nghttpd (nghttp2-server). The edge speaks
 * HTTP/1.1 to the agent on the tunnel stream, and the agent HTTP/2 to the
 * service:
 *
 * - curl --http1.1 gets a file, its body chunked with nghttpd's trailer;
 * - an HTTP/1.1 client makes gRPC calls by hand through the edge: a unary
 *   call whose grpc-status comes as a chunked trailer field, one the
 *   service refuses (grpc-status in the head), and a bidirectional
 *   streaming call, each message sent only once the answer to the one
 *   before came back, so both directions stream through edge and agent;
 * - a service that speaks only HTTP/1.1 gives the visitor a 502 that says so.
 *
 * And Python's own gRPC client, which speaks only HTTP/2, through the
 * edge's plain port with prior knowledge and the tunnel's name as
 * :authority (grpc.default_authority): a visitor on HTTP/2, an h2c service,
 * and the edge and the agent between them on HTTP/1.1 streams.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { grpcCall, startGrpcH2c } from "../harness/grpc-h2c.ts";
import { startNghttpd } from "../harness/nghttpd.ts";
import { run } from "../harness/nghttp2.ts";
import { withServer } from "../harness/tunnel.ts";
import { deferred, within } from "../harness/wait.ts";

/** A liveness bound on each wait (what it waits for takes milliseconds), and each test's. */
const WAIT_MS = 10_000;
const TEST_MS = 30_000;

// the server, the services and their agents, for the whole file: stopped in afterAll, or at once if the set-up fails
const stack = new AsyncDisposableStack();
afterAll(() => stack.disposeAsync());

/** Starts everything; returns the edge's port. */
async function setUp(): Promise<number> {
  const dir = mkdtempSync(join(tmpdir(), "burrow-h2c-files-"));
  stack.defer(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, "page.txt"), "page ".repeat(20_000));
  const rig = stack.use(await withServer({ user: { skip_warning: true } }));
  const grpc = stack.use(await startGrpcH2c());
  const nghttpd = stack.use(await startNghttpd(dir, ["--no-content-length", "--trailer", "x-check: done"]));
  const http1Only = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("HTTP/1.1 only") });
  stack.defer(() => http1Only.stop(true));
  const h2cAgent = (target: number, name: string) => rig.startAgent({ kind: "http", target, args: ["--subdomain", name, "--skip-warning", "--upstream-protocol", "h2c"] });
  await h2cAgent(grpc.port, "grpc");
  await h2cAgent(nghttpd.port, "files");
  await h2cAgent(http1Only.port!, "old");
  return rig.server.edgePort;
}
const edge = await setUp().catch(async (err) => {
  await stack.disposeAsync();
  throw err;
});

/** A gRPC message: not compressed, its length, its bytes. */
function grpcMessage(text: string): Buffer {
  const bytes = Buffer.from(text);
  const out = Buffer.alloc(5 + bytes.length);
  out.writeUInt32BE(bytes.length, 1);
  bytes.copy(out, 5);
  return out;
}

/** A raw HTTP/1.1 visitor: writes when told, collects what comes, waits for what it expects. */
class Visitor {
  private readonly socket: Socket;
  private got = Buffer.alloc(0);
  private waiters: (() => void)[] = [];
  readonly closed = deferred();

  constructor(port: number) {
    this.socket = connect(port, "127.0.0.1");
    this.socket.on("data", (b: Buffer) => {
      this.got = Buffer.concat([this.got, b]);
      for (const w of this.waiters.splice(0)) w();
    });
    this.socket.on("close", () => {
      this.closed.resolve();
      for (const w of this.waiters.splice(0)) w();
    });
    this.socket.on("error", () => {});
  }

  write(bytes: string | Buffer): void {
    this.socket.write(bytes);
  }

  get text(): string {
    return this.got.toString("latin1");
  }

  async until(ok: (text: string) => boolean, what: string): Promise<void> {
    const deadline = performance.now() + WAIT_MS;
    while (!ok(this.text)) {
      if (performance.now() > deadline || this.socket.destroyed) throw new Error(`${what}: got ${JSON.stringify(this.text.slice(0, 400))}`);
      const d = deferred();
      this.waiters.push(d.resolve);
      await within(d.promise, deadline - performance.now(), what).catch(() => {});
    }
  }

  close(): void {
    this.socket.destroy();
  }
}

const grpcHead = (method: string, framing: string) =>
  `POST /burrow.Echo/${method} HTTP/1.1\r\nHost: grpc.localhost:${edge}\r\nContent-Type: application/grpc\r\nTE: trailers\r\n${framing}\r\n\r\n`;

describe("an HTTP/1.1 visitor, an h2c service", () => {
  test("curl --http1.1: nghttpd's file, chunked, with its trailer", async () => {
    const url = `http://files.localhost:${edge}/page.txt`;
    const args = ["--http1.1", "--max-time", "10", "--resolve", `files.localhost:${edge}:127.0.0.1`];
    const body = await run(["curl", "-sS", ...args, url]);
    expect(body.stderr).toBe("");
    expect(body.stdout).toBe("page ".repeat(20_000));
    const raw = await run(["curl", "-sS", "-i", "--raw", ...args, url]);
    expect(raw.stdout).toStartWith("HTTP/1.1 200 OK\r\n");
    expect(raw.stdout).toMatch(/\r\ntransfer-encoding: chunked\r\n/i);
    expect(raw.stdout).toEndWith("\r\n0\r\nx-check: done\r\n\r\n");
  }, TEST_MS);

  test("a unary gRPC call by hand: the answer, and grpc-status as the last chunk's trailer field", async () => {
    const v = new Visitor(edge);
    try {
      const message = grpcMessage("hello");
      v.write(grpcHead("Say", `Content-Length: ${message.length}`) + message.toString("latin1"));
      await v.until((t) => t.endsWith("\r\n0\r\ngrpc-status: 0\r\n\r\n"), "the call's answer and its status");
      expect(v.text).toStartWith("HTTP/1.1 200 OK\r\n");
      expect(v.text).toContain("content-type: application/grpc\r\n");
      expect(v.text).toContain(grpcMessage("echo: hello").toString("latin1"));
    } finally {
      v.close();
    }
  }, TEST_MS);

  test("a call the service refuses: its grpc-status and grpc-message", async () => {
    const v = new Visitor(edge);
    try {
      const message = grpcMessage("nope");
      v.write(grpcHead("Fail", `Content-Length: ${message.length}`) + message.toString("latin1"));
      await v.until((t) => t.includes("\r\n\r\n"), "the refusal");
      expect(v.text).toMatch(/^HTTP\/1\.1 200 OK\r\n/);
      expect(v.text).toContain("grpc-status: 3\r\n");
      expect(v.text).toContain("grpc-message: no: nope\r\n");
    } finally {
      v.close();
    }
  }, TEST_MS);

  test("a bidirectional streaming call by hand: each message answered before the next is sent, over one request", async () => {
    const v = new Visitor(edge);
    try {
      v.write(grpcHead("Chat", "Transfer-Encoding: chunked"));
      for (let i = 0; i < 5; i++) {
        const message = grpcMessage(`message ${i}`);
        v.write(`${message.length.toString(16)}\r\n${message.toString("latin1")}\r\n`);
        const answer = grpcMessage(`echo: message ${i}`).toString("latin1");
        await v.until((t) => t.includes(answer), `the answer to message ${i} while the call is still open`);
      }
      v.write("0\r\n\r\n");
      await v.until((t) => t.endsWith("\r\n0\r\ngrpc-status: 0\r\n\r\n"), "the call's end and its status");
    } finally {
      v.close();
    }
  }, TEST_MS);

  test("a service that speaks only HTTP/1.1: the visitor's 502 says it does not speak h2c", async () => {
    const res = await run(["curl", "-sS", "--http1.1", "--max-time", "10", "--resolve", `old.localhost:${edge}:127.0.0.1`, "-w", "\n%{http_code}", `http://old.localhost:${edge}/`]);
    expect(res.stdout).toEndWith("\n502");
    expect(res.stdout).toContain("does not speak HTTP/2 with prior knowledge (h2c)");
  }, TEST_MS);
});

describe("gRPC's own client, over HTTP/2 to the edge", () => {
  const addr = `127.0.0.1:${edge}`;
  const authority = `grpc.localhost:${edge}`;
  test("a unary call", async () => {
    expect(await grpcCall("say", addr, authority, "hi")).toEqual(["echo: hi"]);
  }, 60_000);

  test("a bidirectional streaming call, each message after the answer to the one before", async () => {
    expect(await grpcCall("chat", addr, authority, "5")).toEqual(Array.from({ length: 5 }, (_, i) => `echo: message ${i}`));
  }, 60_000);

  test("a call the service refuses: its status and message reach the client", async () => {
    expect(await grpcCall("fail", addr, authority, "nope")).toEqual(["error INVALID_ARGUMENT no: nope"]);
  }, 60_000);
});
