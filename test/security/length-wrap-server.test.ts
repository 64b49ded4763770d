/**
 * Length-field wrap (frp GHSA-26gq class), against the real server: lengths
 * near 2^32, 2^53 and 2^64 where strangers can put them (a raw agent's frame
 * header on the agents' WebSocket and on the direct port, a WebSocket frame's
 * 64-bit length on the agents' path, a visitor's Content-Length and chunk
 * sizes, a local service's, a ClientHello's record and nested lengths on the
 * TLS ports) are refused cleanly, without a hang, and the server stays up and
 * answers the next client. The readers themselves are tested value by value
 * in length-wrap.test.ts.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Socket } from "bun";
import { writeFileSync } from "node:fs";
import { connect, type Socket as NetSocket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { connect as tlsConnect } from "node:tls";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { CONNECT_PATH, FrameType, HEADER_LENGTH, PROTOCOL_VERSION, WireError } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { hostileDirect, hostileWebSocket, type HostilePeer } from "../harness/fuzz.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { deferred, within } from "../harness/wait.ts";

/** Longer than any refusal takes: a refusal comes at once, a reader waiting for the claimed bytes would wait out the hello's time. */
const HELLO_TIMEOUT_S = 60;
const CLOSED_WITHIN_MS = 10_000;
// a test may wait out CLOSED_WITHIN_MS once or twice before it fails
setDefaultTimeout(30_000);

let server: TestServer;
let tlsServer: TestServer;
let token = "";
const agents: TestAgent[] = [];

/** The steady tunnel's service. */
const steady = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`steady ${new URL(req.url).pathname}`) });

/** A service that answers by the request's path with lengths no response may have. */
const HOSTILE_ANSWERS: Record<string, string> = {
  "/huge-length": "HTTP/1.1 200 OK\r\nContent-Length: 18446744073709551616\r\n\r\nhello",
  "/past-2-53": "HTTP/1.1 200 OK\r\nContent-Length: 9007199254740993\r\n\r\nhello",
  "/huge-chunk": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nffffffffffffffffff\r\nhello\r\n0\r\n\r\n",
};
const hostile = Bun.listen<{ got: string }>({
  hostname: "127.0.0.1",
  port: 0,
  socket: {
    open: (s) => void (s.data = { got: "" }),
    data(s, d) {
      s.data.got += Buffer.from(d).toString("latin1");
      if (!s.data.got.includes("\r\n\r\n")) return;
      const path = s.data.got.split(" ")[1] ?? "/";
      s.data.got = "";
      s.write(HOSTILE_ANSWERS[path] ?? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
    },
  },
});

beforeAll(async () => {
  server = await startServer({ args: ["--tls-port", "0", "--tls-hello-timeout", String(HELLO_TIMEOUT_S)] });
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("wrap-victim", { skip_warning: true }));
  agents.push(await startAgent({ kind: "http", target: steady.port!, server: server.edgeUrl, token, args: ["--subdomain", "steady", "--skip-warning", "--no-inspect"] }));
  agents.push(await startAgent({ kind: "http", target: hostile.port, server: server.edgeUrl, token, args: ["--subdomain", "hostile", "--skip-warning", "--no-inspect"] }));
  // TLS on the public port too: the ClientHello reader in front of every visitor
  const cert = await selfSignedCertificate({ names: ["localhost", "*.localhost"] });
  const dir = tmpdir();
  writeFileSync(join(dir, "wrap-cert.pem"), cert.certPem);
  writeFileSync(join(dir, "wrap-key.pem"), cert.keyPem, { mode: 0o600 });
  tlsServer = await startServer({ args: ["--tls-cert", join(dir, "wrap-cert.pem"), "--tls-key", join(dir, "wrap-key.pem"), "--tls-hello-timeout", String(HELLO_TIMEOUT_S)] });
}, 60_000);

afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await server?.stop();
  await tlsServer?.stop();
  steady.stop(true);
  hostile.stop(true);
});

/** The server is up and serves the next visitor. */
async function stillServes(): Promise<void> {
  const res = await tunnelFetch(server.edgePort, "steady", "/next");
  expect(res.status).toBe(200);
  expect(await res.text()).toBe("steady /next");
  expect(server.proc.exitCode).toBeNull();
}

/** A frame header claiming `length` bytes, followed by a few bytes (far fewer than claimed). */
function wrappingHeader(type: number, stream: number, length: number): Uint8Array {
  const out = new Uint8Array(HEADER_LENGTH + 16);
  out[0] = type;
  new DataView(out.buffer).setUint32(1, stream);
  new DataView(out.buffer).setUint32(5, length);
  return out;
}

/** The code of the first ERROR frame the edge sent, once the connection closed. */
async function refusedWith(peer: HostilePeer): Promise<string | undefined> {
  expect(await peer.until(() => peer.closed, CLOSED_WITHIN_MS)).toBe(true);
  expect(peer.bad).toEqual([]);
  const error = peer.frames.find((f) => f.type === FrameType.ERROR);
  return error ? JSON.parse(new TextDecoder().decode(error.payload)).code : undefined;
}

const hello = () => encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }], agent: "wrap-test" }));

describe("length wrap, end to end: a raw agent's frame header", () => {
  for (const via of ["websocket", "direct"] as const) {
    for (const length of [0xffff_ffff, 0xffff_fff7, 0x8000_0000]) {
      test(`on the ${via === "websocket" ? "agents' WebSocket" : "direct port"}, a header claiming 0x${length.toString(16)} bytes before HELLO and after READY ends that connection with PROTOCOL_ERROR; the server serves the next`, async () => {
        const open = () => (via === "websocket" ? hostileWebSocket(server.edgePort) : hostileDirect(server.agentPort!));
        // before the handshake: the first frame a stranger sends
        const stranger = await open();
        stranger.send(wrappingHeader(FrameType.HELLO, 0, length));
        expect(await refusedWith(stranger)).toBe(WireError.PROTOCOL_ERROR);
        // after READY, with a real token: a DATA frame of a stream, its header cut in two writes on the direct port
        const agent = await open();
        agent.send(hello());
        expect(await agent.until(() => agent.frames.some((f) => f.type === FrameType.READY), CLOSED_WITHIN_MS)).toBe(true);
        const bad = wrappingHeader(FrameType.DATA, 1, length);
        if (via === "direct") {
          agent.send(bad.subarray(0, 6));
          agent.send(bad.subarray(6));
        } else agent.send(bad);
        expect(await refusedWith(agent)).toBe(WireError.PROTOCOL_ERROR);
        await stillServes();
      });
    }
  }

  test("after all of it, an agent's HELLO still gets READY", async () => {
    for (const via of ["websocket", "direct"] as const) {
      const answer = await sayHello({ port: via === "websocket" ? server.edgePort : server.agentPort!, via, token });
      expect(answer.type).toBe("READY");
    }
  });
});

/** Upgrades to the agents' WebSocket on a bare socket and writes `frame` after the 101; resolves when the server closes the connection. */
function afterUpgrade(frame: Uint8Array): Promise<{ upgraded: boolean; closed: boolean }> {
  return new Promise((resolve) => {
    let got = "";
    let upgraded = false;
    const sock: NetSocket = connect(server.edgePort, "127.0.0.1", () => {
      sock.write(`GET ${CONNECT_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${server.edgePort}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`);
    });
    const timer = setTimeout(() => finish(false), CLOSED_WITHIN_MS);
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ upgraded, closed });
    };
    sock.on("data", (d: Buffer) => {
      if (upgraded) return;
      got += d.toString("latin1");
      if (!got.includes("\r\n\r\n")) return;
      upgraded = got.startsWith("HTTP/1.1 101");
      sock.write(frame);
    });
    sock.on("error", () => finish(true));
    sock.on("close", () => finish(true));
  });
}

describe("length wrap, end to end: a WebSocket frame's 64-bit length on the agents' path", () => {
  for (const [label, high, low] of [
    ["2^64 - 1", 0xffff_ffff, 0xffff_ffff],
    ["2^63", 0x8000_0000, 0],
    ["2^53 + 1", 0x20_0000, 1],
    ["2^32", 1, 0],
    ["2^32 - 1", 0, 0xffff_ffff],
  ] as const) {
    test(`a binary frame claiming ${label} bytes is refused (the connection closed) without waiting for them`, async () => {
      const frame = new Uint8Array(2 + 8 + 4 + 16);
      frame[0] = 0x82;
      frame[1] = 0x80 | 127;
      new DataView(frame.buffer).setUint32(2, high);
      new DataView(frame.buffer).setUint32(6, low);
      const r = await afterUpgrade(frame);
      expect(r.upgraded).toBe(true);
      expect(r.closed).toBe(true);
      await stillServes();
    });
  }
});

describe("length wrap, end to end: a visitor's Content-Length and chunk sizes", () => {
  const head = (fields: string) => `POST /up HTTP/1.1\r\nHost: steady.localhost:${server.edgePort}\r\n${fields}\r\n\r\n`;

  for (const value of ["18446744073709551616", "18446744073709551615", "9007199254740993", "4294967296.5", "-4294967296"]) {
    test(`Content-Length: ${value} is 400 and a closed connection`, async () => {
      const r = await rawHttp(server.edgePort, head(`Content-Length: ${value}`) + "hello", CLOSED_WITHIN_MS);
      expect(r.status).toBe(400);
      expect(r.closed).toBe(true);
      await stillServes();
    });
  }

  for (const size of ["ffffffffffffffffff", "20000000000001", "10000000000000000"]) {
    test(`a chunk size of ${size} is 400 (malformed body) and a closed connection`, async () => {
      const r = await rawHttp(server.edgePort, head("Transfer-Encoding: chunked") + `${size}\r\nhello\r\n0\r\n\r\n`, CLOSED_WITHIN_MS);
      expect(r.status).toBe(400);
      expect(r.body).toContain("malformed request body");
      expect(r.closed).toBe(true);
      await stillServes();
    });
  }

  for (const [label, fields, body] of [
    ["Content-Length: 4294967296", "Content-Length: 4294967296", "0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n"],
    ["a chunk of 2^32 bytes", "Transfer-Encoding: chunked", "100000000\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\n\r\n"],
  ] as const) {
    test(`${label}, then a few bytes and a half-close: nothing after them is read as another request; the connection ends`, async () => {
      const got = deferred<{ text: string; closed: boolean }>();
      let text = "";
      const sock = connect(server.edgePort, "127.0.0.1", () => sock.end(head(fields) + body));
      const timer = setTimeout(() => got.resolve({ text, closed: false }), CLOSED_WITHIN_MS);
      sock.on("data", (d: Buffer) => void (text += d.toString("latin1")));
      sock.on("error", () => {});
      sock.on("close", () => {
        clearTimeout(timer);
        got.resolve({ text, closed: true });
      });
      const r = await got.promise;
      sock.destroy();
      expect(r.closed).toBe(true);
      // the bytes inside the claimed body are the body: no answer from the service for /smuggled
      expect(r.text).not.toContain("steady /smuggled");
      await stillServes();
    });
  }
});

describe("length wrap, end to end: a local service's lengths", () => {
  for (const path of ["/huge-length", "/past-2-53"]) {
    test(`a response with Content-Length past 2^53 (${path}) is the 502 page; the tunnel serves its next request`, async () => {
      const res = await tunnelFetch(server.edgePort, "hostile", path);
      expect(res.status).toBe(502);
      expect(await res.text()).not.toContain("hello");
      const next = await tunnelFetch(server.edgePort, "hostile", "/fine");
      expect(await next.text()).toBe("ok");
    });
  }

  test("a response whose chunk size is 'ffffffffffffffffff' is the 502 page, its chunk never passed on; the tunnel serves its next request", async () => {
    const res = await tunnelFetch(server.edgePort, "hostile", "/huge-chunk");
    expect(res.status).toBe(502);
    const page = await res.text();
    expect(page).toContain("chunk size too large");
    expect(page).not.toContain("hello");
    const next = await tunnelFetch(server.edgePort, "hostile", "/fine");
    expect(await next.text()).toBe("ok");
  });
});

describe("length wrap, end to end: a ClientHello's lengths at the TLS ports", () => {
  const u16 = (n: number) => [(n >> 8) & 0xff, n & 0xff];
  const u24 = (n: number) => [(n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff];
  /** A hello for steady.localhost whose lengths may lie. */
  function hello(o: { record?: number; handshake?: number; extensions?: number; list?: number; name?: number } = {}): Uint8Array {
    const name = [...Buffer.from("steady.localhost")];
    const entry = [0, ...u16(o.name ?? name.length), ...name];
    const sni = [...u16(o.list ?? entry.length), ...entry];
    const extensions = [0, 0, ...u16(sni.length), ...sni];
    const body = [3, 3, ...new Array(32).fill(9), 0, ...u16(2), 0x13, 0x01, 1, 0, ...u16(o.extensions ?? extensions.length), ...extensions];
    const message = [1, ...u24(o.handshake ?? body.length), ...body];
    return new Uint8Array([22, 3, 1, ...u16(o.record ?? message.length), ...message]);
  }
  const LIES = {
    "a record of 0xffff bytes": { record: 0xffff },
    "a handshake of 0xffffff bytes": { handshake: 0xff_ffff },
    "extensions of 0xffff bytes": { extensions: 0xffff },
    "an SNI list of 0xffff bytes": { list: 0xffff },
    "a server name of 0xffff bytes": { name: 0xffff },
  };

  /** Writes `bytes` and resolves how long the port took to close the connection (or -1 when it did not within the bound). */
  async function closedAfter(port: number, bytes: Uint8Array): Promise<number> {
    const closed = deferred<void>();
    const started = performance.now();
    const sock: Socket<undefined> = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {}, close: () => closed.resolve(), error() {} } });
    sock.write(bytes);
    try {
      await within(closed.promise, CLOSED_WITHIN_MS, "the close");
      return performance.now() - started;
    } catch {
      sock.terminate();
      return -1;
    }
  }

  for (const [label, lie] of Object.entries(LIES)) {
    test(`${label}: the public HTTPS port and --tls-port close the connection at once, not after the hello's ${HELLO_TIMEOUT_S} s`, async () => {
      for (const port of [tlsServer.edgePort, server.tlsPort!]) {
        const ms = await closedAfter(port, hello(lie));
        expect(ms).toBeGreaterThanOrEqual(0);
        expect(ms).toBeLessThan(CLOSED_WITHIN_MS);
      }
    });
  }

  test("after them, the HTTPS port answers a real TLS client, and --tls-port a real hello for a name it has no tunnel for (unrecognized_name)", async () => {
    const res = await fetch(`https://127.0.0.1:${tlsServer.edgePort}/`, { headers: { host: `nothing-here.localhost:${tlsServer.edgePort}` }, tls: { rejectUnauthorized: false } } as RequestInit);
    expect(res.status).toBe(404);
    await res.text();
    const alert = await new Promise<string>((resolve) => {
      const sock = tlsConnect({ host: "127.0.0.1", port: server.tlsPort!, servername: "nothing-here.localhost", rejectUnauthorized: false });
      const timer = setTimeout(() => resolve("no answer"), CLOSED_WITHIN_MS);
      sock.on("error", (err) => {
        clearTimeout(timer);
        resolve(err.message);
      });
      sock.on("secureConnect", () => resolve("connected"));
    });
    expect(alert).toMatch(/unrecognized.name/i);
  });
});
