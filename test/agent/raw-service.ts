/**
 * Test helpers for the agent's h1 streams: a local service that speaks raw
 * HTTP/1.1 on 127.0.0.1 (so each test writes exactly the bytes it means,
 * malformed ones included, and sees exactly the bytes it was sent), and a
 * tunnel made of an in-memory mux pair whose agent side runs the real
 * serveHttpStream, driven from the edge's side with OPEN h1 frames.
 */
import { afterEach } from "bun:test";
import type { Socket, TCPSocketListener } from "bun";
import { serveHttpStream, type LocalTarget, type RequestLine } from "../../src/agent/http.ts";
import type { RequestTaps } from "../../src/agent/inspector/tap.ts";
import type { TunnelView } from "../../src/agent/output.ts";
import { ConnectionPool, type PoolOptions } from "../../src/agent/local-http/pool.ts";
import { readOpenMeta } from "../../src/protocol/messages.ts";
import type { Stream } from "../../src/protocol/mux.ts";
import { memoryPair, type MemoryPair } from "../protocol/memory-pair.ts";
import { within } from "../protocol/support.ts";

export const WAIT_MS = 5_000;

export interface RawRequest {
  /** Which accepted connection it came on, from 1. */
  conn: number;
  method: string;
  path: string;
  /** The head as it came, request line and CRLFs included. */
  head: string;
  /** Names lower-cased, for finding; `head` has them as sent. */
  headers: [string, string][];
  /** De-chunked if it came chunked. */
  body: Buffer;
  /** The body as it came on the wire, framing included. */
  framed: Buffer;
}

export interface ConnState {
  index: number;
  buffer: Buffer;
  /** Called when the socket drains: a test that writes more than the socket takes sets it. */
  pump?: () => void;
}

export type Answer = (req: RawRequest, socket: Socket<ConnState>) => void;

/** Dechunks a complete chunked body at the start of `b`: [body, bytes used], or undefined if incomplete. */
function dechunk(b: Buffer): [Buffer, number] | undefined {
  const parts: Buffer[] = [];
  let at = 0;
  for (let guard = 0; guard < 100_000; guard++) {
    const nl = b.indexOf("\r\n", at);
    if (nl < 0) return undefined;
    const size = parseInt(b.subarray(at, nl).toString("latin1"), 16);
    if (!Number.isFinite(size)) throw new Error(`bad chunk size line ${JSON.stringify(b.subarray(at, nl).toString())}`);
    if (size === 0) {
      // the last chunk, then trailer lines until a blank one
      const end = b.indexOf("\r\n\r\n", nl);
      return end >= 0 ? [Buffer.concat(parts), end + 4] : undefined;
    }
    if (b.length < nl + 2 + size + 2) return undefined;
    parts.push(b.subarray(nl + 2, nl + 2 + size));
    at = nl + 2 + size + 2;
  }
  throw new Error("too many chunks");
}

export class RawService {
  accepted = 0;
  closed = 0;
  readonly requests: RawRequest[] = [];
  /** Bytes received, per connection index. */
  readonly received = new Map<number, number>();
  /** Every byte received, per connection index, as it came. */
  readonly bytes = new Map<number, Buffer[]>();
  /** Connections open now. */
  readonly sockets = new Set<Socket<ConnState>>();
  private readonly listener: TCPSocketListener<ConnState>;
  private closeWaiters: (() => void)[] = [];

  /**
   * `hooks.data`: sees each read first, and deals with it itself by returning true.
   * `hooks.end`: the agent half-closed (with `allowHalfOpen`; otherwise its FIN closes the socket).
   */
  constructor(answer: Answer, hooks: { data?: (socket: Socket<ConnState>, bytes: Buffer) => boolean; end?: (socket: Socket<ConnState>) => void; allowHalfOpen?: boolean } = {}) {
    this.listener = Bun.listen<ConnState>({
      hostname: "127.0.0.1",
      port: 0,
      allowHalfOpen: hooks.allowHalfOpen,
      socket: {
        end: (socket) => hooks.end?.(socket),
        open: (socket) => {
          socket.data = { index: ++this.accepted, buffer: Buffer.alloc(0) };
          this.sockets.add(socket);
        },
        data: (socket, bytes) => {
          this.received.set(socket.data.index, (this.received.get(socket.data.index) ?? 0) + bytes.byteLength);
          const seen = this.bytes.get(socket.data.index) ?? [];
          seen.push(Buffer.from(bytes));
          this.bytes.set(socket.data.index, seen);
          // a hook that returns true has dealt with the bytes itself
          if (hooks.data?.(socket, bytes)) return;
          socket.data.buffer = Buffer.concat([socket.data.buffer, bytes]);
          for (let guard = 0; guard < 1000; guard++) {
            const req = this.takeRequest(socket.data);
            if (!req) return;
            this.requests.push(req);
            answer(req, socket);
          }
        },
        drain: (socket) => socket.data.pump?.(),
        close: (socket) => {
          this.sockets.delete(socket);
          this.closed++;
          for (const w of this.closeWaiters.splice(0)) w();
        },
      },
    });
  }

  /** What connection `conn` was sent, all of it so far. */
  sent(conn: number): Buffer {
    return Buffer.concat(this.bytes.get(conn) ?? []);
  }

  get port(): number {
    return this.listener.port;
  }

  /** Resolves once `n` connections in all have closed. */
  async closedAtLeast(n: number, what: string): Promise<void> {
    for (let guard = 0; guard < 1000 && this.closed < n; guard++) {
      await within(new Promise<void>((r) => this.closeWaiters.push(r)), WAIT_MS, what);
    }
    if (this.closed < n) throw new Error(`only ${this.closed} connections closed, wanted ${n}`);
  }

  stop(): void {
    this.listener.stop(true);
  }

  private takeRequest(state: ConnState): RawRequest | undefined {
    const end = state.buffer.indexOf("\r\n\r\n");
    if (end < 0) return undefined;
    const head = state.buffer.subarray(0, end + 4).toString("latin1");
    const [line, ...rest] = head.slice(0, -4).split("\r\n");
    const [method, path] = line!.split(" ");
    const headers = rest.map((l): [string, string] => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]);
    const after = state.buffer.subarray(end + 4);
    const length = headers.find(([n]) => n === "content-length")?.[1];
    const chunked = headers.some(([n, v]) => n === "transfer-encoding" && v.includes("chunked"));
    let body: Buffer = Buffer.alloc(0);
    let used = 0;
    if (method === undefined) return undefined;
    if (chunked) {
      const got = dechunk(after);
      if (!got) return undefined;
      [body, used] = got;
    } else if (length !== undefined) {
      if (after.length < Number(length)) return undefined;
      used = Number(length);
      body = Buffer.from(after.subarray(0, used));
    }
    state.buffer = Buffer.from(after.subarray(used));
    return { conn: state.index, method: method!, path: path!, head, headers, body, framed: Buffer.from(after.subarray(0, used)) };
  }
}

export interface TestTunnel {
  pair: MemoryPair;
  pool: ConnectionPool;
  logs: RequestLine[];
  /** Switched connections closed (after a 101), with their paths. */
  switchedClosed: string[];
}

export interface TunnelOptions {
  target?: Partial<LocalTarget>;
  pool?: PoolOptions;
  window?: number;
  /** Captures requests, as the agent's inspector does. */
  inspector?: RequestTaps;
}


export function tunnelTo(port: number, opts: TunnelOptions = {}): TestTunnel {
  const t: TestTunnel = { pool: new ConnectionPool(opts.pool), logs: [], switchedClosed: [], pair: undefined as unknown as MemoryPair };
  const local: LocalTarget = { host: "127.0.0.1", port, ...opts.target };
  const inspector = opts.inspector;
  const view: TunnelView = { name: "web", id: "t1", protocol: "http", url: "http://web.example", local: `127.0.0.1:${port}`, target: local, inspect: true };
  t.pair = memoryPair({
    initialWindow: opts.window,
    agent: {
      onStream: (s) => {
        const meta = readOpenMeta(s.meta)!;
        void serveHttpStream(
          s,
          meta.head!,
          local,
          {
            log: (line) => t.logs.push(line),
            switchedClosed: (path) => t.switchedClosed.push(path),
            tap: inspector ? (request) => inspector.begin(view, { ...request, remote: meta.remote }) : undefined,
            pool: t.pool,
          },
          meta.keep === true,
        );
      },
    },
  });
  return t;
}

/** Closes a tunnel's muxes and its pool (afterEach). */
export function closeTunnel(t: TestTunnel): void {
  t.pair.edge.close();
  t.pair.agent.close();
  t.pool.close();
}

/** A request head as an edge sends it: request line, fields as given (names' case kept), blank line. */
export function requestHead(method: string, path: string, fields: [string, string][] = [["Host", "visitor.example"]], version = "HTTP/1.1"): string {
  return `${method} ${path} ${version}\r\n${fields.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n`;
}

export interface VisitorRequest {
  /** The head text (requestHead()); a GET / by default. */
  head?: string;
  /** Body pieces, written one after another; undefined: the OPEN carries the FIN. */
  body?: (Uint8Array | string)[];
  /** Ends the body after the pieces (default); false leaves it open for the test to write more. */
  end?: boolean;
}

export interface Visit {
  stream: Stream;
  /** Resolves at REPLY. */
  replied: Promise<void>;
  /** Resolves with the response's bytes at FIN, or with those that came and the reset code. */
  outcome: Promise<{ bytes: Buffer; reset?: string; replied: boolean }>;
}

/** Opens an h1 stream as the edge does; `consume: false` leaves the response unread (no credit returned). */
export function visit(t: TestTunnel, req: VisitorRequest = {}, consume = true): Visit {
  const hasBody = req.body !== undefined;
  const stream = t.pair.edge.open({ tunnel: "t1", kind: "h1", remote: "127.0.0.1:50000", head: req.head ?? requestHead("GET", "/") }, !hasBody);
  let replied = false;
  const repliedAt = new Promise<void>((resolve) => (stream.onReply = () => ((replied = true), resolve())));
  const chunks: Buffer[] = [];
  const outcome = new Promise<{ bytes: Buffer; reset?: string; replied: boolean }>((resolve) => {
    if (consume) {
      stream.onData = (chunk) => {
        chunks.push(Buffer.from(chunk));
        stream.consumed(chunk.byteLength);
      };
    }
    stream.onEnd = () => resolve({ bytes: Buffer.concat(chunks), replied });
    stream.whenReset((code) => resolve({ bytes: Buffer.concat(chunks), reset: code, replied }));
  });
  if (req.body) {
    for (const piece of req.body) stream.write(typeof piece === "string" ? Buffer.from(piece, "latin1") : piece);
    if (req.end !== false) stream.end();
  }
  return { stream, replied: repliedAt, outcome };
}

/** A whole visit, within WAIT_MS: the response's bytes (as latin1 text too), or the reset. */
export async function fetchThrough(t: TestTunnel, req: VisitorRequest = {}): Promise<{ bytes: Buffer; text: string; status?: number; reset?: string; replied: boolean }> {
  const v = visit(t, req);
  const result = await within(v.outcome, WAIT_MS, `the answer to ${(req.head ?? "GET /").split("\r\n")[0]}`);
  const text = result.bytes.toString("latin1");
  return { ...result, text, status: statusOf(text) };
}

/** The final status in response bytes (after any interim ones). */
export function statusOf(text: string): number | undefined {
  const all = [...text.matchAll(/(?:^|\r\n\r\n)HTTP\/1\.[01] (\d{3})/g)].map((m) => Number(m[1]));
  return all.find((s) => s >= 200 || s === 101) ?? all.at(-1);
}

export const response = (status: number, headers: [string, string][], body = "") =>
  `HTTP/1.1 ${status} X\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n${body}`;

/**
 * Services and tunnels made through these are stopped after each test of
 * the file that calls it (at its top level), pass or fail.
 */
export function cleanedUp(): { service(...args: ConstructorParameters<typeof RawService>): RawService; tunnel(...args: Parameters<typeof tunnelTo>): TestTunnel } {
  const services: RawService[] = [];
  const tunnels: TestTunnel[] = [];
  afterEach(() => {
    for (const t of tunnels.splice(0)) closeTunnel(t);
    for (const s of services.splice(0)) s.stop();
  });
  return {
    service(...args) {
      const s = new RawService(...args);
      services.push(s);
      return s;
    },
    tunnel(...args) {
      const t = tunnelTo(...args);
      tunnels.push(t);
      return t;
    },
  };
}

/** Writes all of `bytes` to a service's socket, more on each drain; `done` when the last went. */
export function pumpOut(socket: Socket<ConnState>, bytes: Uint8Array, done?: () => void): void {
  let sent = 0;
  socket.data.pump = () => {
    for (let guard = 0; guard < 100_000 && sent < bytes.byteLength; guard++) {
      const n = socket.write(bytes.subarray(sent, Math.min(bytes.byteLength, sent + 256 * 1024)));
      if (n <= 0) return; // full: the drain calls again
      sent += n;
    }
    if (sent === bytes.byteLength) {
      socket.data.pump = undefined;
      done?.();
    }
  };
  socket.data.pump();
}

/** Resolves once `check` holds, polling every 10 ms for at most WAIT_MS. */
export async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < WAIT_MS / 10; i++) {
    if (check()) return;
    await Bun.sleep(10);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * Offers `total` bytes of `block`s into a visitor's stream as fast as its
 * credit lets them go, then ends it. `offered()`: how much went so far;
 * `done`: every byte went.
 */
export function offerInto(stream: Stream, total: number, block: Uint8Array): { offered(): number; done: Promise<void> } {
  let offered = 0;
  const done = (async () => {
    while (offered < total) {
      offered += block.length;
      if (!stream.write(block) && !(await stream.whenDrained())) throw new Error("the stream ended while writing");
    }
    stream.end();
  })();
  return { offered: () => offered, done };
}
