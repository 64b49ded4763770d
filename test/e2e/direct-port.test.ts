/**
 * The direct port (--agent-port): agents say HELLO on the WebSocket, are
 * sent MOVE and carry their tunnels over a plain TCP (or TLS) socket with
 * the same frames back to back. The edge refuses hostile bytes there as on
 * the WebSocket; an agent that cannot reach the port (or cannot trust what
 * answers there) stays on the WebSocket at once, without backoff and
 * without ever sending its token where it should not.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Server, Socket, TCPSocketListener } from "bun";
import { createCipheriv, createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FrameReader } from "../../src/protocol/frame-reader.ts";
import { decodeFrames, encodeFrame, jsonPayload, type Frame } from "../../src/protocol/frames.ts";
import { CONNECT_PATH, FrameType, HEADER_LENGTH, MAX_PAYLOAD, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch } from "../harness/agent.ts";
import { echoThrough, freeRange } from "../harness/ports.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { danteAvailable, startDante } from "../harness/dante.ts";
import { within } from "../harness/wait.ts";
import { agentWebSocketPeer, refusalIn } from "../harness/agent-peer.ts";

const WAIT_MS = 5_000;
const MiB = 1024 * 1024;
const decoder = new TextDecoder();

// -- local services ------------------------------------------------------------------------------------

/** Deterministic pseudo-random bytes: AES-256-CTR over zeros, keyed by `seed`. */
function prng(seed: string) {
  const cipher = createCipheriv("aes-256-ctr", createHash("sha256").update(seed).digest(), Buffer.alloc(16));
  return (n: number): Buffer => cipher.update(Buffer.alloc(n));
}
const sha256 = (b: Uint8Array) => createHash("sha256").update(b).digest("hex");

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  maxRequestBodySize: 64 * MiB,
  async fetch(req) {
    const url = new URL(req.url);
    if (url.pathname === "/download") return new Response(prng(url.searchParams.get("seed")!)(Number(url.searchParams.get("size"))));
    if (url.pathname === "/upload") return new Response(sha256(new Uint8Array(await req.arrayBuffer())));
    return new Response(`direct ${url.pathname}`);
  },
});
/** Greets with "ready\n", then echoes (what echoThrough expects). */
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

afterAll(() => {
  upstream.stop(true);
  echo.stop(true);
});

// -- helpers -------------------------------------------------------------------------------------------

const helloFrame = (fields: Record<string, unknown>) =>
  encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, tunnels: [{ protocol: "http" }], ...fields }));

const json = (f: Frame | undefined) => (f ? JSON.parse(decoder.decode(f.payload)) : undefined);

/** A raw client of the direct port: bytes out as told, frames in as they come, and whether the server closed it. */
interface RawPeer {
  frames: Frame[];
  /** Bytes that came back but were not whole valid frames (there should be none). */
  bad: string[];
  readonly isClosed: boolean;
  write(bytes: Uint8Array): void;
  /** Writes `bytes` a few at a time, yielding between writes so they leave as separate segments. */
  trickle(bytes: Uint8Array, step?: number): Promise<void>;
  /** Waits (bounded) for a frame of `type`. */
  frame(type: number, what: string): Promise<Frame>;
  /** Waits (bounded) for the server to close the connection; false if it did not. */
  closed(ms?: number): Promise<boolean>;
  end(): void;
  /** Drops the connection at once, whatever is unsent. */
  terminate(): void;
}

async function rawPeer(port: number): Promise<RawPeer> {
  const frames: Frame[] = [];
  const bad: string[] = [];
  let isClosed = false;
  const changed = new Set<() => void>();
  const notify = () => {
    for (const f of [...changed]) f();
  };
  const reader = new FrameReader((run) => {
    try {
      decodeFrames(run.slice(), (f) => frames.push(f));
    } catch (err) {
      bad.push((err as Error).message);
    }
    notify();
  });
  const socket: Socket<undefined> = await Bun.connect({
    hostname: "127.0.0.1",
    port,
    socket: {
      data(_s, chunk) {
        try {
          reader.push(chunk);
        } catch (err) {
          bad.push((err as Error).message);
        }
      },
      close() {
        isClosed = true;
        notify();
      },
      error() {},
    },
  });
  socket.setNoDelay(true);
  /** Resolves when `check` holds (checked now and on every change), or after `ms` with false. */
  const until = (check: () => boolean, ms: number) =>
    new Promise<boolean>((resolve) => {
      if (check()) return resolve(true);
      const timer = setTimeout(() => {
        changed.delete(on);
        resolve(false);
      }, ms);
      const on = () => {
        if (!check()) return;
        clearTimeout(timer);
        changed.delete(on);
        resolve(true);
      };
      changed.add(on);
    });
  return {
    frames,
    bad,
    get isClosed() {
      return isClosed;
    },
    write: (bytes) => void socket.write(bytes),
    async trickle(bytes, step = 1) {
      for (let at = 0; at < bytes.byteLength && !isClosed; at += step) {
        socket.write(bytes.subarray(at, at + step));
        await Bun.sleep(1); // pacing, so the server sees many small reads, not a wait for anything
      }
    },
    async frame(type, what) {
      const found = () => frames.find((f) => f.type === type);
      if (!(await until(() => found() !== undefined || isClosed, WAIT_MS)) || !found()) {
        throw new Error(`no ${what} (got ${frames.map((f) => f.type).join(",") || "nothing"}, closed=${isClosed})`);
      }
      return found()!;
    },
    closed: (ms = WAIT_MS) => until(() => isClosed, ms),
    end: () => socket.end(),
    terminate: () => socket.terminate(),
  };
}

/** The server's "agent connected" line for `user`, waited for (bounded). */
const connectedLine = (server: TestServer, user: string) => server.output.waitFor(new RegExp(`agent connected .*user=${user} `), WAIT_MS);

// -- the real server -----------------------------------------------------------------------------------

describe("a server with a direct port", () => {
  let server: TestServer;
  let api: AdminClient;
  let tcpRange: { first: number; last: number };
  /** A connection opened at the start that never says anything: checked for HANDSHAKE_TIMEOUT at the end. */
  let idle: RawPeer;

  const tokenFor = async (username: string) => api.createToken(await api.createUser(username));

  beforeAll(async () => {
    tcpRange = freeRange(4);
    server = await startServer({ args: ["--tcp-ports", `${tcpRange.first}-${tcpRange.last}`] });
    api = await signedIn(server);
    idle = await rawPeer(server.agentPort!);
  });
  afterAll(async () => {
    idle?.end();
    await server?.stop();
  });

  test("the ready line names the direct port, a port of its own", async () => {
    const line = await server.output.waitFor(/admin api listening/, 1_000);
    expect(line).toMatch(/ agent_port=\d+/);
    expect(server.agentPort).toBeGreaterThan(0);
    expect(server.agentPort).not.toBe(server.edgePort);
    await server.output.waitFor(new RegExp(`edge listening .*agent_port=${server.agentPort}`), 1_000);
  });

  test("an http agent moves to the direct port by itself: transport=direct, no reconnect, no notice, and the tunnel answers", async () => {
    const token = await tokenFor("direct-http");
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
    const line = await connectedLine(server, "direct-http");
    expect(line).toContain("transport=direct");
    // the agent's address on the direct port: the loopback, another source port than a WebSocket's
    expect(line).toMatch(/remote=127\.0\.0\.1:\d+/);
    const res = await tunnelFetch(server.edgePort, agent.subdomain!, "/hello");
    expect(await res.text()).toBe("direct /hello");
    // MOVE is part of connecting, not a lost connection: no backoff, nothing to tell the person
    expect(agent.output.text()).not.toMatch(/reconnecting|out of reach|MOVE/);
    // and it was admitted once, on the direct port only
    expect(server.output.lines.filter((l) => /agent connected .*user=direct-http /.test(l))).toHaveLength(1);
  });

  test("many requests at once, and 8 MiB each way, cross the direct port intact", async () => {
    const token = await tokenFor("direct-bulk");
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
    expect(await connectedLine(server, "direct-bulk")).toContain("transport=direct");
    const texts = await Promise.all(Array.from({ length: 50 }, (_, i) => tunnelFetch(server.edgePort, agent.subdomain!, `/n${i}`).then((r) => r.text())));
    expect(texts).toEqual(Array.from({ length: 50 }, (_, i) => `direct /n${i}`));

    const size = 8 * MiB;
    const down = new Uint8Array(await (await tunnelFetch(server.edgePort, agent.subdomain!, `/download?seed=down&size=${size}`)).arrayBuffer());
    expect(down.byteLength).toBe(size);
    expect(sha256(down)).toBe(sha256(prng("down")(size)));
    const body = prng("up")(size);
    const up = await tunnelFetch(server.edgePort, agent.subdomain!, "/upload", { method: "POST", body });
    expect(await up.text()).toBe(sha256(body));
  });

  test("a tcp agent over the direct port carries bytes both ways", async () => {
    const token = await tokenFor("direct-tcp");
    await using agent = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token });
    expect(await connectedLine(server, "direct-tcp")).toContain("transport=direct");
    expect(await echoThrough(agent.port!, "over the direct port")).toBe("over the direct port");
  });

  test("a GET of the connect path without an upgrade is told the direct port: JSON, not to be stored, no place taken", async () => {
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`http://127.0.0.1:${server.edgePort}${CONNECT_PATH}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toStartWith("application/json");
      expect(res.headers.get("cache-control")).toBe("no-store");
      expect(await res.json()).toEqual({ direct_port: server.agentPort });
    }
    // anything else on the path that is not a WebSocket is told one is expected; the connection stays the
    // edge's, and its next request is routed as any other (here to a name no tunnel has)
    const both = await rawHttp(
      server.edgePort,
      `DELETE ${CONNECT_PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n` + `GET / HTTP/1.1\r\nHost: nobody-here.localhost\r\nConnection: close\r\n\r\n`,
    );
    expect(both.status).toBe(426);
    expect(both.head).toMatch(/\r\nupgrade: websocket/i);
    expect(both.body).toMatch(/HTTP\/1\.1 404 /);
    expect(both.closed).toBe(true);
  });

  test("a WebSocket HELLO that asks to go direct gets MOVE to the direct port, nothing admitted, and the WebSocket closes", async () => {
    const token = await tokenFor("move-only");
    const { frames, closed } = await agentWebSocketPeer(server.edgePort, [helloFrame({ token, direct: true })]);
    expect(frames.map((f) => f.type)).toEqual([FrameType.MOVE]);
    expect(json(frames[0])).toEqual({ port: server.agentPort });
    expect(closed).toBe(true);
    expect(server.output.text()).not.toMatch(/agent connected .*user=move-only /);
  });

  test("a WebSocket HELLO without `direct` (an older agent) is admitted on the WebSocket", async () => {
    const token = await tokenFor("old-agent");
    const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}${CONNECT_PATH}`);
    ws.binaryType = "arraybuffer";
    const frames: Frame[] = [];
    const ready = Promise.withResolvers<void>();
    ws.onmessage = (ev) => {
      decodeFrames(new Uint8Array(ev.data as ArrayBuffer).slice(), (f) => frames.push(f));
      if (frames.some((f) => f.type === FrameType.READY || f.type === FrameType.ERROR)) ready.resolve();
    };
    ws.onopen = () => ws.send(helloFrame({ token }));
    try {
      await within(ready.promise, WAIT_MS, "READY on the WebSocket");
      expect(frames.map((f) => f.type)).toEqual([FrameType.READY]);
      expect(await connectedLine(server, "old-agent")).toContain("transport=websocket");
    } finally {
      ws.close();
    }
  });

  describe("hostile peers on the direct port", () => {
    test("an HTTP request (someone's browser) gets ERROR PROTOCOL_ERROR, then the connection closes", async () => {
      const peer = await rawPeer(server.agentPort!);
      peer.write(new TextEncoder().encode("GET / HTTP/1.1\r\nHost: localhost\r\n\r\n"));
      expect(await peer.closed()).toBe(true);
      expect(refusalIn(peer.frames)?.code).toBe("PROTOCOL_ERROR");
      expect(peer.bad).toEqual([]);
    });

    test("garbage with a plausible length (an unknown frame type) gets PROTOCOL_ERROR, then close", async () => {
      const peer = await rawPeer(server.agentPort!);
      peer.write(new Uint8Array([0x7f, 0, 0, 0, 0, 0, 0, 0, 2, 0xde, 0xad]));
      expect(await peer.closed()).toBe(true);
      expect(refusalIn(peer.frames)?.code).toBe("PROTOCOL_ERROR");
    });

    test("a header claiming more than MAX_PAYLOAD is refused from the header alone, even split in two", async () => {
      const header = encodeFrame(FrameType.HELLO, 0);
      new DataView(header.buffer).setUint32(5, MAX_PAYLOAD + 1);
      for (const split of [HEADER_LENGTH, 5]) {
        const peer = await rawPeer(server.agentPort!);
        peer.write(header.subarray(0, split));
        if (split < HEADER_LENGTH) {
          await Bun.sleep(5); // pacing: the rest of the header in a later read
          peer.write(header.subarray(split));
        }
        // no payload follows: the refusal cannot have waited for it
        expect(await peer.closed()).toBe(true);
        const r = refusalIn(peer.frames);
        expect(r?.code).toBe("PROTOCOL_ERROR");
        expect(r?.message).toContain("exceeds");
      }
    });

    test("a HELLO that is not JSON gets PROTOCOL_ERROR", async () => {
      const peer = await rawPeer(server.agentPort!);
      peer.write(encodeFrame(FrameType.HELLO, 0, new TextEncoder().encode("{nope")));
      expect(await peer.closed()).toBe(true);
      expect(refusalIn(peer.frames)?.code).toBe("PROTOCOL_ERROR");
    });

    test("a HELLO with a bad token gets AUTH_FAILED, the same code as on the WebSocket", async () => {
      const bad = helloFrame({ token: "brw_" + "x".repeat(43), direct: true });
      const peer = await rawPeer(server.agentPort!);
      peer.write(bad);
      expect(await peer.closed()).toBe(true);
      const direct = refusalIn(peer.frames);
      const ws = await agentWebSocketPeer(server.edgePort, [helloFrame({ token: "brw_" + "x".repeat(43) })]);
      expect(ws.closed).toBe(true);
      expect(direct?.code).toBe("AUTH_FAILED");
      expect(direct?.code).toBe(refusalIn(ws.frames)?.code!);
    });

    test("a HELLO trickled one byte at a time, asking to go direct, gets READY (never MOVE) on the direct port", async () => {
      const token = await tokenFor("trickler");
      const peer = await rawPeer(server.agentPort!);
      try {
        await peer.trickle(helloFrame({ token, direct: true }));
        const ready = await peer.frame(FrameType.READY, "READY");
        expect(json(ready).username).toBe("trickler");
        expect(peer.frames.some((f) => f.type === FrameType.MOVE)).toBe(false);
        expect(await connectedLine(server, "trickler")).toContain("transport=direct");
        // and the session works both ways: PING gets PONG, even a PING split inside its header
        await peer.trickle(encodeFrame(FrameType.PING, 0, new Uint8Array([1, 2, 3, 4])), 4);
        expect([...(await peer.frame(FrameType.PONG, "PONG")).payload]).toEqual([1, 2, 3, 4]);
        peer.write(encodeFrame(FrameType.GOAWAY, 0));
        expect(await peer.closed()).toBe(true);
      } finally {
        peer.end();
      }
      expect(peer.bad).toEqual([]);
    });

    test("a HELLO and a PING in one write: READY, then PONG, in order", async () => {
      const token = await tokenFor("pipeliner");
      const peer = await rawPeer(server.agentPort!);
      try {
        peer.write(new Uint8Array([...helloFrame({ token }), ...encodeFrame(FrameType.PING, 0, new Uint8Array([9, 8, 7, 6]))]));
        await peer.frame(FrameType.PONG, "PONG");
        const types = peer.frames.map((f) => f.type);
        expect(types.indexOf(FrameType.READY)).toBeGreaterThanOrEqual(0);
        expect(types.indexOf(FrameType.READY)).toBeLessThan(types.indexOf(FrameType.PONG));
      } finally {
        peer.end();
      }
    });

    test("a second HELLO after READY is refused with PROTOCOL_ERROR", async () => {
      const token = await tokenFor("twice");
      const peer = await rawPeer(server.agentPort!);
      peer.write(helloFrame({ token }));
      await peer.frame(FrameType.READY, "READY");
      peer.write(helloFrame({ token }));
      expect(await peer.closed()).toBe(true);
      expect(refusalIn(peer.frames)?.code).toBe("PROTOCOL_ERROR");
    });

    test("connections that close at once, or in the middle of a header or a payload, leave the server serving", async () => {
      const token = await tokenFor("half-frames");
      const hello = helloFrame({ token });
      for (const cut of [0, 1, 4, HEADER_LENGTH, HEADER_LENGTH + 3, hello.byteLength - 1]) {
        const peer = await rawPeer(server.agentPort!);
        if (cut > 0) peer.write(hello.subarray(0, cut));
        peer.end();
        expect(await peer.closed()).toBe(true);
        expect(peer.frames.filter((f) => f.type !== FrameType.ERROR)).toEqual([]);
      }
      // a peer that vanishes mid-frame without a goodbye
      const rude = await rawPeer(server.agentPort!);
      rude.write(hello.subarray(0, 20));
      rude.terminate();
      expect(server.output.text()).not.toMatch(/agent connected .*user=half-frames /);
    });

    test("after all of that the server still serves: an agent on the direct port answers, the process is alive, no crash logged", async () => {
      const token = await tokenFor("survivor");
      await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
      expect(await connectedLine(server, "survivor")).toContain("transport=direct");
      expect(await (await tunnelFetch(server.edgePort, agent.subdomain!, "/still")).text()).toBe("direct /still");
      expect(server.proc.exitCode).toBeNull();
      expect(server.output.text()).not.toMatch(/TypeError|RangeError|ReferenceError|^\s+at /m);
    });

    test("a connection that never says HELLO gets HANDSHAKE_TIMEOUT and is closed", async () => {
      // opened in beforeAll: by now most of the 10 s have gone by
      expect(await idle.closed(15_000)).toBe(true);
      expect(refusalIn(idle.frames)?.code).toBe("HANDSHAKE_TIMEOUT");
    }, 20_000);
  });
});

test("on SIGTERM an agent on the direct port hears DRAIN, as on the WebSocket, and connects again at once", async () => {
  const server = await startServer();
  try {
    const api = await signedIn(server);
    const token = await api.createToken(await api.createUser("shut-out"));
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
    expect(await connectedLine(server, "shut-out")).toContain("transport=direct");
    expect(await server.stop("SIGTERM")).toBe(0);
    await agent.output.waitFor(/the server is restarting: connecting again/, WAIT_MS);
    expect(agent.output.text()).not.toContain("reconnecting in");
  } finally {
    await server.stop();
  }
});

describe("--agent-port off", () => {
  let server: TestServer;
  let api: AdminClient;
  beforeAll(async () => {
    server = await startServer({ args: ["--agent-port", "off"] });
    api = await signedIn(server);
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("the ready line says agent_port=off and agents stay on the WebSocket, tunnels working", async () => {
    expect(await server.output.waitFor(/admin api listening/, 1_000)).toContain(" agent_port=off");
    expect(server.agentPort).toBeUndefined();
    const token = await api.createToken(await api.createUser("ws-only"));
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
    expect(await connectedLine(server, "ws-only")).toContain("transport=websocket");
    expect(await (await tunnelFetch(server.edgePort, agent.subdomain!, "/ws")).text()).toBe("direct /ws");
    expect(agent.output.text()).not.toMatch(/reconnecting|out of reach/);
  });

  test("the question of where the direct port is gets direct_port null", async () => {
    const res = await fetch(`http://127.0.0.1:${server.edgePort}${CONNECT_PATH}`);
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ direct_port: null });
  });

  test("a HELLO asking to go direct is admitted on the WebSocket: no MOVE without a direct port", async () => {
    const token = await api.createToken(await api.createUser("asks-direct"));
    const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}${CONNECT_PATH}`);
    ws.binaryType = "arraybuffer";
    const frames: Frame[] = [];
    const answered = Promise.withResolvers<void>();
    ws.onmessage = (ev) => {
      decodeFrames(new Uint8Array(ev.data as ArrayBuffer).slice(), (f) => frames.push(f));
      answered.resolve();
    };
    ws.onopen = () => ws.send(helloFrame({ token, direct: true }));
    try {
      await within(answered.promise, WAIT_MS, "an answer to HELLO");
      expect(frames.map((f) => f.type)).toEqual([FrameType.READY]);
    } finally {
      ws.close();
    }
  });
});

// -- a fake edge, to see what the agent does when the direct port is out of its reach -------------------

interface FakeEdge extends AsyncDisposable {
  /** What to give an agent's --server. */
  url: string;
  /** Every HELLO the WebSocket endpoint received, parsed. */
  hellos: Record<string, unknown>[];
  /** GETs of the connect path without an upgrade: agents asking where the direct port is. */
  readonly asked: number;
  /** Closes every agent WebSocket (a lost connection, as the agent sees it). */
  drop(): void;
}

const READY_PAYLOAD = {
  session: "fake-session",
  username: "fake",
  tunnels: [{ id: "t1", protocol: "http", subdomain: "fake", url: "http://fake.localhost" }],
};
const readyFrame = () => encodeFrame(FrameType.READY, 0, jsonPayload(READY_PAYLOAD));
const moveFrame = (port: unknown) => encodeFrame(FrameType.MOVE, 0, jsonPayload({ port }));

/**
 * A WebSocket edge whose answer to each HELLO is `answer(hello)`: MOVE (then
 * close) or READY. `question`: its answer to an agent asking where the
 * direct port is (a GET without an upgrade); without it, a 400, as an edge
 * that does not know the question gives (an older one answers 426).
 */
function fakeEdge(opts: { tls?: { cert: string; key: string }; host?: string; answer(hello: Record<string, unknown>): Uint8Array; question?: () => Response }): FakeEdge {
  const hellos: Record<string, unknown>[] = [];
  const open = new Set<Bun.ServerWebSocket<undefined>>();
  let asked = 0;
  const server: Server<undefined> = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    ...(opts.tls ? { tls: { cert: Bun.file(opts.tls.cert), key: Bun.file(opts.tls.key) } } : {}),
    fetch(req, s) {
      if (req.headers.get("upgrade") === null && new URL(req.url).pathname === CONNECT_PATH) {
        asked++;
        return opts.question?.() ?? new Response("no", { status: 400 });
      }
      return s.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 400 });
    },
    websocket: {
      open: (ws) => void open.add(ws),
      close: (ws) => void open.delete(ws),
      message(ws, message) {
        if (typeof message === "string") return;
        decodeFrames(new Uint8Array(message), (f) => {
          if (f.type !== FrameType.HELLO) return;
          const hello = JSON.parse(decoder.decode(f.payload));
          hellos.push(hello);
          const reply = opts.answer(hello);
          ws.send(reply);
          if (reply[0] === FrameType.MOVE) ws.close(1000, "moved");
        });
      },
    },
  });
  const scheme = opts.tls ? "https" : "http";
  return {
    url: `${scheme}://${opts.host ?? "127.0.0.1"}:${server.port}`,
    hellos,
    get asked() {
      return asked;
    },
    drop: () => {
      for (const ws of open) ws.close(1001, "going away");
    },
    [Symbol.asyncDispose]: async () => void server.stop(true),
  };
}

/** A listener standing in for a direct port: counts connections and keeps what arrives (decrypted, for TLS). */
function standIn(opts: { tls?: { cert: string; key: string }; open?: (s: Socket<undefined>) => void; data?: (s: Socket<undefined>, d: Buffer) => void }) {
  const received: Buffer[] = [];
  let accepted = 0;
  const listener: TCPSocketListener<undefined> = Bun.listen({
    hostname: "127.0.0.1",
    port: 0,
    ...(opts.tls ? { tls: { cert: Bun.file(opts.tls.cert), key: Bun.file(opts.tls.key) } } : {}),
    socket: {
      open(s) {
        accepted++;
        opts.open?.(s);
      },
      data(s, d) {
        received.push(Buffer.from(d));
        opts.data?.(s, d);
      },
      error() {},
    },
  });
  return {
    port: listener.port,
    get accepted() {
      return accepted;
    },
    received,
    [Symbol.asyncDispose]: async () => void listener.stop(true),
  };
}

/** A port nobody listens on right now: bind port 0, note it, let it go. */
function deadPort(): number {
  const l = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = l.port;
  l.stop(true);
  return port;
}

/** Answers MOVE to `port` while the agent asks to go direct, READY once it does not. */
const moveTo = (port: number) => (hello: Record<string, unknown>) => (hello.direct ? moveFrame(port) : readyFrame());

describe("an agent whose direct port is out of reach", () => {
  let certDir: string;
  /** localhost (trusted), elsewhere.test (trusted, wrong name), and an untrusted localhost certificate. */
  let good: { cert: string; key: string };
  let otherName: { cert: string; key: string };
  let untrusted: { cert: string; key: string };
  /** NODE_EXTRA_CA_CERTS: the good and other-name certificates, not the untrusted one. */
  let caFile: string;

  const makeCert = (name: string, cn: string, san: string) => {
    const cert = join(certDir, `${name}.pem`);
    const key = join(certDir, `${name}-key.pem`);
    const made = Bun.spawnSync(
      ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", `/CN=${cn}`, "-addext", `subjectAltName=${san}`],
      { stdout: "pipe", stderr: "pipe" },
    );
    if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`);
    return { cert, key };
  };

  beforeAll(() => {
    certDir = mkdtempSync(join(tmpdir(), "burrow-direct-tls-"));
    good = makeCert("good", "localhost", "DNS:localhost");
    otherName = makeCert("other", "elsewhere.test", "DNS:elsewhere.test");
    untrusted = makeCert("untrusted", "localhost", "DNS:localhost");
    caFile = join(certDir, "ca.pem");
    writeFileSync(caFile, Bun.spawnSync(["cat", good.cert, otherName.cert]).stdout);
  });
  afterAll(() => {
    if (certDir) rmSync(certDir, { recursive: true, force: true });
  });

  /** An http agent for `server` that trusts the test certificates (the good and other-name ones). */
  const trustingAgent = (server: string, token: string) => ({
    kind: "http" as const,
    target: upstream.port!,
    server,
    token,
    env: { NODE_EXTRA_CA_CERTS: caFile },
  });

  /** The agent's notice line about the direct port, waited for (bounded). */
  const notice = (output: { waitFor(p: RegExp, ms?: number): Promise<string> }, port: number) =>
    output.waitFor(new RegExp(`direct port ${port} is out of reach \\(.+\\); staying on the WebSocket`), 10_000);

  test("nothing listening: the agent says so and says HELLO again on the WebSocket at once, with direct: false", async () => {
    const port = deadPort();
    await using edge = fakeEdge({ answer: moveTo(port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    await notice(agent.output, port);
    expect(edge.hellos.map((h) => h.direct)).toEqual([true, false]);
    // the same HELLO otherwise: same token, same tunnel
    expect(edge.hellos[1]!.token).toBe("brw_fake");
    expect(edge.hellos[1]!.tunnels).toEqual(edge.hellos[0]!.tunnels);
    // straight back, not through the backoff
    expect(agent.output.text()).not.toContain("reconnecting");
    expect(agent.publicUrl).toBe("http://fake.localhost");
  });

  test("having found the port out of reach, it does not ask again when it reconnects later", async () => {
    const port = deadPort();
    await using edge = fakeEdge({ answer: moveTo(port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    expect(edge.hellos).toHaveLength(2);
    edge.drop();
    await agent.output.waitFor(/reconnecting in/, WAIT_MS);
    await within(
      (async () => {
        while (edge.hellos.length < 3) await Bun.sleep(20);
      })(),
      10_000,
      "a third HELLO",
    );
    expect(edge.hellos.map((h) => h.direct)).toEqual([true, false, false]);
    // the notice was given once
    expect(agent.output.lines.filter((l) => l.includes("out of reach"))).toHaveLength(1);
  });

  test("a port that takes the connection and closes it before any answer: the agent stays on the WebSocket", async () => {
    await using closer = standIn({ open: (s) => void s.end() });
    await using edge = fakeEdge({ answer: moveTo(closer.port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    expect(await notice(agent.output, closer.port)).toContain("before READY");
    expect(closer.accepted).toBe(1);
    expect(edge.hellos.map((h) => h.direct)).toEqual([true, false]);
    expect(agent.output.text()).not.toContain("reconnecting");
  });

  test("a port where another service answers (an SSH banner): the agent stays on the WebSocket instead of dying of PROTOCOL_ERROR", async () => {
    await using ssh = standIn({ open: (s) => void s.write("SSH-2.0-OpenSSH_9.6p1 Ubuntu-3ubuntu13\r\n") });
    await using edge = fakeEdge({ answer: moveTo(ssh.port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    await notice(agent.output, ssh.port);
    expect(edge.hellos.map((h) => h.direct)).toEqual([true, false]);
    expect(agent.proc.exitCode).toBeNull();
  });

  test("plain TCP: a direct port that takes the HELLO and never answers is given up after its time limit", async () => {
    await using silent = standIn({});
    await using edge = fakeEdge({ answer: moveTo(silent.port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    expect(await notice(agent.output, silent.port)).toMatch(/no answer within 5 s/);
    expect(silent.accepted).toBe(1);
    expect(edge.hellos.map((h) => h.direct)).toEqual([true, false]);
    expect(agent.output.text()).not.toContain("reconnecting");
  }, 15_000); // it waits out the agent's 5 s answer limit: bun's default 5 s per test is too short without --timeout

  test("TLS: a direct port that never answers the handshake is given up after its time limit", async () => {
    await using silent = standIn({});
    await using edge = fakeEdge({ tls: good, host: "localhost", answer: moveTo(silent.port) });
    await using agent = await startAgent(trustingAgent(edge.url, "brw_fake"));
    const line = await notice(agent.output, silent.port);
    expect(line).toMatch(/no connection within/);
    expect(silent.accepted).toBe(1);
    expect(edge.hellos.map((h) => h.direct)).toEqual([true, false]);
    expect(agent.output.text()).not.toContain("reconnecting");
    // the attempt it gave up on is gone too: nothing half made keeps the agent from ending on Ctrl-C
    expect(await agent.stop()).toBe(0);
  });

  test("Ctrl-C while the agent waits for the direct port ends it, without falling back to the WebSocket", async () => {
    await using silent = standIn({});
    await using edge = fakeEdge({ tls: good, host: "localhost", answer: moveTo(silent.port) });
    const { proc, output } = spawnAgent(trustingAgent(edge.url, "brw_fake"));
    try {
      await within(
        (async () => {
          while (silent.accepted === 0) await Bun.sleep(10);
        })(),
        WAIT_MS,
        "the agent to knock on the direct port",
      );
      proc.kill("SIGINT");
      // bounded well under the harness's kill: a hang shows up as a timeout, not as a slow pass
      expect(await within(proc.exited, 8_000, "the agent to exit after Ctrl-C")).toBe(0);
      expect(edge.hellos.map((h) => h.direct)).toEqual([true]);
      expect(output.text()).not.toContain("Forwarding");
    } finally {
      proc.kill("SIGKILL");
    }
  });

  for (const [what, which] of [
    ["an untrusted certificate", () => untrusted],
    ["a trusted certificate for another name", () => otherName],
  ] as const) {
    test(`TLS: a direct port with ${what} is refused like the WebSocket would be, and gets no HELLO (no token)`, async () => {
      await using direct = standIn({ tls: which() });
      await using edge = fakeEdge({ tls: good, host: "localhost", answer: moveTo(direct.port) });
      await using agent = await startAgent(trustingAgent(edge.url, "brw_secret"));
      const line = await notice(agent.output, direct.port);
      // the reason is the certificate (so the handshake was tried), with the hint the WebSocket gives
      expect(line).toMatch(/certificate|altnames|does not match/i);
      expect(line).toContain("--insecure");
      // not one byte of application data reached it: no HELLO, no token
      expect(Buffer.concat(direct.received).toString("latin1")).not.toContain("brw_secret");
      expect(direct.received).toEqual([]);
      expect(edge.hellos.map((h) => h.direct)).toEqual([true, false]);
    });
  }

  test("TLS with --insecure: the direct port's untrusted certificate is accepted, as the WebSocket's would be", async () => {
    const hellos: Record<string, unknown>[] = [];
    const reader = new FrameReader((run) =>
      decodeFrames(run.slice(), (f) => {
        if (f.type === FrameType.HELLO) hellos.push(JSON.parse(decoder.decode(f.payload)));
      }),
    );
    await using direct = standIn({
      tls: untrusted,
      data(s, d) {
        reader.push(d);
        if (hellos.length === 1) s.write(readyFrame());
      },
    });
    await using edge = fakeEdge({ tls: untrusted, host: "localhost", answer: moveTo(direct.port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake", args: ["--insecure"] });
    expect(agent.publicUrl).toBe("http://fake.localhost");
    expect(edge.hellos.map((h) => h.direct)).toEqual([true]);
    expect(hellos).toHaveLength(1);
    expect(hellos[0]!.direct).toBe(true);
    expect(hellos[0]!.token).toBe("brw_fake");
    expect(agent.output.text()).not.toMatch(/out of reach|reconnecting/);
  });

  test.skipIf(!danteAvailable())("an agent with --proxy never asks to go direct", async () => {
    await using proxy = await startDante();
    const port = deadPort();
    await using edge = fakeEdge({ answer: moveTo(port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake", args: ["--proxy", proxy.url] });
    expect(edge.hellos).toHaveLength(1);
    expect(edge.hellos[0]!.direct).toBe(false);
    expect(edge.hellos[0]!.proxy).toBe(true);
    expect(agent.output.text()).not.toContain("out of reach");
  });

  test("a server that sends MOVE to an agent that no longer asks for it: PROTOCOL_ERROR, exit 1, not a loop", async () => {
    const port = deadPort();
    await using edge = fakeEdge({ answer: () => moveFrame(port) });
    const { proc, output } = spawnAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    try {
      expect(await within(proc.exited, 10_000, "the agent to exit")).toBe(1);
      await output.closed();
      expect(output.text()).toContain("PROTOCOL_ERROR");
      expect(edge.hellos.map((h) => h.direct)).toEqual([true, false]);
    } finally {
      proc.kill();
    }
  });

  for (const [what, port] of [
    ["port 0", 0],
    ["port 70000", 70_000],
    ["a port that is a string", "4042"],
  ] as const) {
    test(`a MOVE naming ${what} makes the agent exit 1 with PROTOCOL_ERROR, not a crash`, async () => {
      await using edge = fakeEdge({ answer: () => moveFrame(port) });
      const { proc, output } = spawnAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
      try {
        expect(await within(proc.exited, 10_000, "the agent to exit")).toBe(1);
        await output.closed();
        expect(output.text()).toContain("PROTOCOL_ERROR");
        expect(output.text()).not.toMatch(/^\s+at |TypeError|ValiError/m);
      } finally {
        proc.kill();
      }
    });
  }
});

describe("reconnecting after a session on the direct port", () => {
  /** A direct port that answers every HELLO with READY, keeping its connections so the test can cut them. */
  function readyPort() {
    const sockets = new Set<Socket<undefined>>();
    const port = standIn({
      open: (s) => void sockets.add(s),
      data: (s) => void s.write(readyFrame()),
    });
    return Object.assign(port, {
      cut() {
        for (const s of sockets) s.terminate();
        sockets.clear();
      },
    });
  }

  test("a first connect asks where the direct port is and goes straight there: no WebSocket, no MOVE", async () => {
    await using direct = readyPort();
    await using edge = fakeEdge({ answer: moveTo(direct.port), question: () => Response.json({ direct_port: direct.port }) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    expect(edge.asked).toBe(1);
    expect(direct.accepted).toBe(1);
    expect(edge.hellos).toHaveLength(0);
    expect(agent.output.text()).not.toMatch(/reconnecting|out of reach/);
  });

  test("an edge that does not know the question (an older one): the WebSocket and MOVE, as before, asked once", async () => {
    await using direct = readyPort();
    await using edge = fakeEdge({ answer: moveTo(direct.port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    expect(edge.asked).toBe(1);
    expect(edge.hellos.map((h) => h.direct)).toEqual([true]);
    expect(direct.accepted).toBe(1);
    // a lost connection later goes back to the port it knows, without asking again
    direct.cut();
    await within(
      (async () => {
        while (direct.accepted < 2) await Bun.sleep(20);
      })(),
      10_000,
      "a second connection to the direct port",
    );
    expect(edge.asked).toBe(1);
  });

  test("answers that are not a port (garbage, too long, a port out of range, a redirect) are no answer: the WebSocket, as before", async () => {
    const answers: (() => Response)[] = [
      () => new Response("not json", { headers: { "content-type": "application/json" } }),
      () => Response.json({ direct_port: 70000 }),
      () => Response.json({ direct_port: "7000" }),
      () => Response.json({ direct_port: 7000, padding: "x".repeat(4096) }),
      () => new Response(null, { status: 302, headers: { location: "http://127.0.0.1:9/" } }),
    ];
    for (const question of answers) {
      await using edge = fakeEdge({ answer: () => readyFrame(), question });
      await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
      expect(edge.asked).toBe(1);
      expect(edge.hellos).toHaveLength(1);
      expect(agent.publicUrl).toBe("http://fake.localhost");
    }
  });

  test("told a port where nothing listens: the agent says so and says HELLO on the WebSocket, with direct: false", async () => {
    const port = deadPort();
    await using edge = fakeEdge({ answer: () => readyFrame(), question: () => Response.json({ direct_port: port }) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    await agent.output.waitFor(new RegExp(`direct port ${port} is out of reach`), 10_000);
    expect(edge.hellos.map((h) => h.direct)).toEqual([false]);
    expect(agent.output.text()).not.toContain("reconnecting");
  });

  test("the agent goes straight back to the direct port: no WebSocket, no MOVE the second time", async () => {
    await using direct = readyPort();
    await using edge = fakeEdge({ answer: moveTo(direct.port) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    expect(edge.hellos).toHaveLength(1);
    expect(direct.accepted).toBe(1);
    direct.cut();
    await agent.output.waitFor(/reconnecting in/, WAIT_MS);
    await within(
      (async () => {
        while (direct.accepted < 2) await Bun.sleep(20);
      })(),
      10_000,
      "a second connection to the direct port",
    );
    // the HELLO went to the direct port again; the WebSocket heard nothing more
    await Bun.sleep(200);
    expect(edge.hellos).toHaveLength(1);
    expect(agent.output.text()).not.toContain("out of reach");
  });

  test("a remembered direct port that is gone (a restart on another port): the WebSocket asks afresh and is moved to the new one, without a notice", async () => {
    const before = readyPort();
    await using after = readyPort();
    let current = before.port;
    await using edge = fakeEdge({ answer: (hello) => moveTo(current)(hello) });
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: edge.url, token: "brw_fake" });
    expect(edge.hellos).toHaveLength(1);
    current = after.port;
    before.cut();
    await before[Symbol.asyncDispose](); // nothing listens there any more
    await within(
      (async () => {
        while (after.accepted < 1) await Bun.sleep(20);
      })(),
      10_000,
      "the agent on the new direct port",
    );
    // it asked to go direct again: a port that moved is not a port out of reach
    expect(edge.hellos.map((h) => h.direct)).toEqual([true, true]);
    expect(agent.output.text()).not.toContain("out of reach");
  });
});
