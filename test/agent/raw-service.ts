/**
 * Test helpers for the agent's HTTP client: a local service that speaks raw
 * HTTP/1.1 on 127.0.0.1 (so each test writes exactly the bytes it means,
 * malformed ones included), and a tunnel made of an in-memory mux pair whose
 * agent side runs the real serveHttpStream.
 */
import type { Socket, TCPSocketListener } from "bun";
import { serveHttpStream, type LocalTarget } from "../../src/agent/http.ts";
import { ConnectionPool, type PoolOptions } from "../../src/agent/local-http/pool.ts";
import { readOpenMeta, type HeaderList, type ResponseHead } from "../../src/protocol/messages.ts";
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
  headers: HeaderList;
  /** De-chunked if it came chunked. */
  body: Buffer;
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
    if (size === 0) return b.length >= nl + 4 ? [Buffer.concat(parts), nl + 4] : undefined;
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
  /** Every byte received, per connection index. */
  readonly received = new Map<number, number>();
  /** Connections open now. */
  readonly sockets = new Set<Socket<ConnState>>();
  private readonly listener: TCPSocketListener<ConnState>;
  private closeWaiters: (() => void)[] = [];

  constructor(answer: Answer, hooks: { data?: (socket: Socket<ConnState>, bytes: Buffer) => boolean } = {}) {
    this.listener = Bun.listen<ConnState>({
      hostname: "127.0.0.1",
      port: 0,
      socket: {
        open: (socket) => {
          socket.data = { index: ++this.accepted, buffer: Buffer.alloc(0) };
          this.sockets.add(socket);
        },
        data: (socket, bytes) => {
          this.received.set(socket.data.index, (this.received.get(socket.data.index) ?? 0) + bytes.byteLength);
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
    return { conn: state.index, method: method!, path: path!, head, headers, body };
  }
}

export interface TestTunnel {
  pair: MemoryPair;
  pool: ConnectionPool;
  logs: { method: string; path: string; status: number | string; ms: number }[];
}

export function tunnelTo(port: number, target: Partial<LocalTarget> = {}, pool: PoolOptions = {}, window?: number): TestTunnel {
  const t: TestTunnel = { pool: new ConnectionPool(pool), logs: [], pair: undefined as unknown as MemoryPair };
  const local: LocalTarget = { host: "127.0.0.1", port, ...target };
  t.pair = memoryPair({
    initialWindow: window,
    agent: {
      onStream: (s) => void serveHttpStream(s, readOpenMeta(s.meta)!, local, (line) => t.logs.push(line), t.pool),
    },
  });
  return t;
}

export interface VisitorRequest {
  method?: string;
  path?: string;
  headers?: HeaderList;
  /** Body pieces, written one after another; undefined sends no body. */
  body?: Uint8Array[];
  /** Ends the body after the pieces (default); false leaves it open for the test to write more. */
  end?: boolean;
}

export interface Visit {
  stream: Stream;
  reply: Promise<ResponseHead>;
  /** Resolves with the body at FIN, or with the reset code. */
  outcome: Promise<{ body: Buffer; reset?: string }>;
}

/** Opens a request stream as the edge does; `consume: false` leaves the response unread (no credit returned). */
export function visit(t: TestTunnel, req: VisitorRequest = {}, consume = true): Visit {
  const hasBody = req.body !== undefined;
  const stream = t.pair.edge.open(
    {
      tunnel: "t1",
      kind: "http",
      remote: "127.0.0.1:50000",
      head: { method: req.method ?? "GET", path: req.path ?? "/", headers: req.headers ?? [["host", "visitor.example"]] },
      body: hasBody,
    },
    !hasBody,
  );
  const reply = new Promise<ResponseHead>((resolve) => (stream.onReply = (meta) => resolve(meta as ResponseHead)));
  const chunks: Buffer[] = [];
  const outcome = new Promise<{ body: Buffer; reset?: string }>((resolve) => {
    if (consume) {
      stream.onData = (chunk) => {
        chunks.push(Buffer.from(chunk));
        stream.consumed(chunk.byteLength);
      };
    }
    stream.onEnd = () => resolve({ body: Buffer.concat(chunks) });
    stream.whenReset((code) => resolve({ body: Buffer.concat(chunks), reset: code }));
  });
  if (req.body) {
    for (const piece of req.body) stream.write(piece);
    if (req.end !== false) stream.end();
  }
  return { stream, reply, outcome };
}

/** A whole visit: the reply and the body, within WAIT_MS. */
export async function fetchThrough(t: TestTunnel, req: VisitorRequest = {}): Promise<{ head?: ResponseHead; body: Buffer; reset?: string }> {
  const v = visit(t, req);
  const result = await within(v.outcome, WAIT_MS, `the answer to ${req.method ?? "GET"} ${req.path ?? "/"}`);
  // a reset before REPLY leaves no head
  const head = await Promise.race([v.reply, Promise.resolve(undefined)]);
  return { head, ...result };
}

export const response = (status: number, headers: [string, string][], body = "") =>
  `HTTP/1.1 ${status} X\r\n${headers.map(([n, v]) => `${n}: ${v}\r\n`).join("")}\r\n${body}`;
