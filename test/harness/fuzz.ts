/**
 * Support for the property-based tests in test/fuzz/: fast-check parameters
 * that reproduce (FUZZ_SEED), the server's fault lines, its resident memory,
 * one raw HTTP exchange that ends at the first response head (a fuzzed
 * request is usually answered with keep-alive, so waiting for the close, as
 * rawHttp does, would cost its whole timeout every time), and a hostile
 * agent's connection on either transport that can tell "the edge goes on"
 * (a PING answered) from "the edge closed" without sleeping.
 */
import type { Socket } from "bun";
import type { Parameters } from "fast-check";
import { readFileSync } from "node:fs";
import { connect } from "node:net";
import { FrameReader } from "../../src/protocol/frame-reader.ts";
import { decodeFrames, type Frame } from "../../src/protocol/frames.ts";
import { CONNECT_PATH, FrameType, HEADER_LENGTH, MAX_PAYLOAD } from "../../src/protocol/wire.ts";

/**
 * fast-check parameters: `numRuns` (scaled by FUZZ_RUNS_SCALE, default 1),
 * the seed from FUZZ_SEED when set (fast-check prints the seed and path of
 * any failure, so `FUZZ_SEED=<seed> npx bun test FILE` replays it), and a
 * time limit for the runs and the shrinking together: past it, a failure
 * found so far is still reported; without one, the runs done count.
 */
export function fuzzParams<T>(numRuns: number, timeLimitMs: number, extra: Parameters<T> = {}): Parameters<T> {
  const seed = process.env.FUZZ_SEED;
  const scale = Number(process.env.FUZZ_RUNS_SCALE ?? "1");
  return {
    numRuns: Math.max(1, Math.round(numRuns * (Number.isFinite(scale) && scale > 0 ? scale : 1))),
    interruptAfterTimeLimit: timeLimitMs,
    ...(seed !== undefined && seed !== "" ? { seed: Number(seed) } : {}),
    ...extra,
  };
}

/**
 * Lines of a server's output that mean a fault on its side: the `error`
 * level of its log (`<iso time> error <msg> ...`), or what Bun prints for
 * an error nobody handled (`TypeError: ...`, `error: ...`), except those
 * matching `known` (faults already reported, which a test names).
 */
export function faultLines(lines: readonly string[], known: readonly RegExp[] = []): string[] {
  return lines.filter((l) => (/^\S+ error /.test(l) || /^(?:[A-Z]\w*Error|error): /.test(l)) && !known.some((k) => k.test(l)));
}

/** A process's resident memory in bytes (VmRSS of /proc/<pid>/status). */
export function rssBytes(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1];
  if (kib === undefined) throw new Error(`no VmRSS for process ${pid}`);
  return Number(kib) * 1024;
}

/**
 * A process's RSS once it has had a moment to itself: the smallest of
 * samples taken every 250 ms until one is below `bound` or `maxWaitMs` has
 * passed. Right after a burst of work RSS still holds garbage that the
 * runtime frees (and returns to the system) within a second or two of
 * idling; what remains after that is memory the process kept.
 */
export async function settledRss(pid: number, bound: number, maxWaitMs = 5_000): Promise<number> {
  let least = rssBytes(pid);
  for (const started = performance.now(); least >= bound && performance.now() - started < maxWaitMs; ) {
    await Bun.sleep(250);
    least = Math.min(least, rssBytes(pid));
  }
  return least;
}

export interface Exchange {
  /** The status of the first response (from its status line); 0 when none came. */
  status: number;
  /** That head (latin1), or whatever came before the connection ended. */
  head: string;
  /** The server closed (or reset) the connection before a whole head came. */
  closed: boolean;
  /** Neither a head nor a close within the time given. */
  timedOut: boolean;
}

/**
 * Writes `bytes` on a new connection to 127.0.0.1:`port` and resolves at the
 * first whole response head, at the close, or after `timeoutMs`; then drops
 * the connection.
 */
export function rawExchange(port: number, bytes: string | Uint8Array, timeoutMs: number): Promise<Exchange> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let settled = false;
    const sock = connect(port, "127.0.0.1", () => sock.write(bytes));
    const finish = (closed: boolean, timedOut: boolean) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      sock.destroy();
      const all = Buffer.concat(chunks).toString("latin1");
      const end = all.indexOf("\r\n\r\n");
      const head = end < 0 ? all : all.slice(0, end);
      // a status line counts even when the connection ends before the rest of its head
      const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1] ?? 0);
      resolve({ status, head, closed, timedOut });
    };
    const timer = setTimeout(() => finish(false, true), timeoutMs);
    sock.on("data", (d: Buffer) => {
      chunks.push(d);
      if (Buffer.concat(chunks).includes("\r\n\r\n")) finish(false, false);
    });
    // a reset (the server refusing what it read) or an EPIPE counts as a close
    sock.on("error", () => finish(true, false));
    sock.on("close", () => finish(true, false));
  });
}

// -- a hostile agent's connection: the agents' WebSocket or the direct port ------------------------

/** A frame header and payload with any type byte and stream id (encodeFrame takes only valid ones). */
export function rawFrame(type: number, stream: number, payload: Uint8Array = new Uint8Array(0)): Uint8Array {
  const out = new Uint8Array(HEADER_LENGTH + payload.byteLength);
  const view = new DataView(out.buffer);
  out[0] = type;
  view.setUint32(1, stream >>> 0);
  view.setUint32(5, payload.byteLength);
  out.set(payload, HEADER_LENGTH);
  return out;
}

/**
 * The bytes end at a frame's end, or at a header the edge refuses for its
 * length: no partial frame is left that the edge would wait to complete
 * (and in which a PING sent next would vanish).
 */
export function frameAligned(bytes: Uint8Array): boolean {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let at = 0;
  while (at + HEADER_LENGTH <= bytes.byteLength) {
    const length = view.getUint32(at + 5);
    if (length > MAX_PAYLOAD) return true;
    at += HEADER_LENGTH + length;
  }
  return at === bytes.byteLength;
}

export interface HostilePeer {
  /** The frames the edge sent, in order. */
  frames: Frame[];
  /** What came back that was not whole, valid frames (the edge must never send such). */
  bad: string[];
  readonly closed: boolean;
  /** On the WebSocket: one message. On the direct port: bytes written as they are. */
  send(bytes: Uint8Array): void;
  /** Resolves true once `check` holds (tested now and on each frame or close), false after `ms`. */
  until(check: () => boolean, ms: number): Promise<boolean>;
  close(): void;
}

function peerState() {
  const frames: Frame[] = [];
  const bad: string[] = [];
  const listeners = new Set<() => void>();
  const state = {
    frames,
    bad,
    closed: false,
    notify: () => [...listeners].forEach((l) => l()),
    take(run: Uint8Array) {
      try {
        decodeFrames(run.slice(), (f) => frames.push(f));
      } catch (err) {
        bad.push((err as Error).message);
      }
      state.notify();
    },
    until: (check: () => boolean, ms: number) =>
      new Promise<boolean>((resolve) => {
        if (check()) return resolve(true);
        const done = (ok: boolean) => {
          clearTimeout(timer);
          listeners.delete(on);
          resolve(ok);
        };
        const on = () => check() && done(true);
        const timer = setTimeout(() => done(false), ms);
        listeners.add(on);
      }),
  };
  return state;
}

/** A peer on the agents' WebSocket (/_burrow/connect on the edge port). */
export async function hostileWebSocket(edgePort: number, openWithinMs = 5_000): Promise<HostilePeer> {
  const s = peerState();
  const ws = new WebSocket(`ws://127.0.0.1:${edgePort}${CONNECT_PATH}`);
  ws.binaryType = "arraybuffer";
  ws.onmessage = (ev) => (typeof ev.data === "string" ? s.bad.push("a text message") : s.take(new Uint8Array(ev.data as ArrayBuffer)));
  ws.onclose = () => {
    s.closed = true;
    s.notify();
  };
  const opened = new Promise<boolean>((resolve) => {
    ws.onopen = () => resolve(true);
    ws.onerror = () => resolve(false);
    setTimeout(() => resolve(false), openWithinMs);
  });
  if (!(await opened)) throw new Error("the agents' WebSocket did not open");
  return {
    frames: s.frames,
    bad: s.bad,
    get closed() {
      return s.closed;
    },
    until: s.until,
    send: (bytes) => void (s.closed || ws.readyState !== WebSocket.OPEN || ws.send(bytes)),
    close: () => ws.close(),
  };
}

/** A peer on the direct port: raw TCP, frames back to back. What the socket does not take at once is written on drain. */
export async function hostileDirect(agentPort: number): Promise<HostilePeer> {
  const s = peerState();
  const reader = new FrameReader((run) => s.take(run));
  let unsent: Uint8Array[] = [];
  const flush = (socket: Socket<undefined>) => {
    while (unsent.length > 0) {
      const head = unsent[0]!;
      const n = socket.write(head);
      if (n < head.byteLength) {
        unsent[0] = head.subarray(Math.max(n, 0));
        return;
      }
      unsent.shift();
    }
  };
  const socket = await Bun.connect({
    hostname: "127.0.0.1",
    port: agentPort,
    socket: {
      data(_s, chunk) {
        try {
          reader.push(chunk);
        } catch (err) {
          s.bad.push((err as Error).message);
        }
      },
      drain: (sock) => flush(sock),
      close() {
        s.closed = true;
        s.notify();
      },
      error() {},
    },
  });
  return {
    frames: s.frames,
    bad: s.bad,
    get closed() {
      return s.closed;
    },
    until: s.until,
    send(bytes) {
      if (s.closed) return;
      unsent.push(bytes);
      if (unsent.length === 1) flush(socket);
    },
    close() {
      unsent = [];
      socket.terminate();
    },
  };
}

/** Writes `bytes` in pieces cut at `cuts` (each taken modulo the length), as TCP may deliver them. */
export function sendInPieces(peer: HostilePeer, bytes: Uint8Array, cuts: number[]): void {
  const points = [...new Set(cuts.map((c) => c % (bytes.byteLength + 1)))].sort((a, b) => a - b);
  let at = 0;
  for (const p of [...points, bytes.byteLength]) {
    if (p > at) peer.send(bytes.subarray(at, p));
    at = p;
  }
}

/**
 * Sends a PING with a random marker and waits for its PONG, which means the
 * edge has handled everything sent before it and goes on; or for the close.
 */
export async function settle(peer: HostilePeer, ms: number): Promise<"pong" | "closed" | "timeout"> {
  const marker = new Uint8Array(4);
  crypto.getRandomValues(marker);
  peer.send(rawFrame(FrameType.PING, 0, marker));
  const pong = () => peer.frames.some((f) => f.type === FrameType.PONG && Buffer.compare(f.payload, marker) === 0);
  await peer.until(() => pong() || peer.closed, ms);
  return pong() ? "pong" : peer.closed ? "closed" : "timeout";
}
