/**
 * One handshake by hand, from a chosen local address: a HELLO over the
 * agents' WebSocket (a minimal client on a bare socket, so it can bind
 * 127.0.0.x and send any header) or over the direct port, and the edge's
 * answer. On Linux all of 127.0.0.0/8 is loopback, so each test address is
 * a separate client to the edge's per-address throttles.
 */
import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { CONNECT_PATH, FRAME_NAMES, FrameType, HEADER_LENGTH, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";

export interface HelloAnswer {
  /** The first control frame the edge sent (ERROR, READY, MOVE), or "none". */
  type: string;
  /** ERROR's JSON: {code, message, retry_after?}. */
  refusal?: { code: string; message: string; retry_after?: number };
  /** READY's JSON: {session, username, tunnels, refused?}. */
  ready?: any;
  /** The edge closed the connection (after an ERROR it always does). */
  closed: boolean;
}

export interface HelloOptions {
  port: number;
  via: "websocket" | "direct";
  /** The local address to connect from (default 127.0.0.1). */
  from?: string;
  /** Extra headers on the WebSocket upgrade, e.g. X-Forwarded-For. */
  headers?: Record<string, string>;
  token?: string;
  /** The HELLO frame's payload as is, instead of a well-formed HELLO with `token`. */
  payload?: Uint8Array;
  timeoutMs?: number;
  /** Direct port only: once connected, say so, and send the HELLO only when `send` resolves (HELLOs of many connections at once). */
  gate?: { connected(): void; send: Promise<void> };
}

/**
 * A gate for `n` connections: each HELLO goes out once all `n` are
 * connected, in one turn, so the edge reads them together.
 */
export function helloGate(n: number): { connected(): void; send: Promise<void> } {
  const all = Promise.withResolvers<void>();
  let left = n;
  return { connected: () => void (--left === 0 && all.resolve()), send: all.promise };
}

export const helloPayload = (token: string) =>
  jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }], agent: "raw-test" });

export function sayHello(opts: HelloOptions): Promise<HelloAnswer> {
  const frame = encodeFrame(FrameType.HELLO, 0, opts.payload ?? helloPayload(opts.token ?? "brw_" + "x".repeat(43)));
  const timeoutMs = opts.timeoutMs ?? 5_000;
  return new Promise((resolve, reject) => {
    let answer: HelloAnswer | undefined;
    let upgraded = opts.via === "direct";
    let raw: Buffer = Buffer.alloc(0); // bytes after the HTTP head (WebSocket) or all bytes (direct)
    let frames: Buffer = Buffer.alloc(0); // the edge's frames, out of their WebSocket messages
    const finish = (closed: boolean) => {
      clearTimeout(timer);
      sock.destroy();
      if (answer) resolve({ ...answer, closed });
      else if (closed) resolve({ type: "none", closed });
      else reject(new Error(`no answer to HELLO within ${timeoutMs} ms`));
    };
    const timer = setTimeout(() => finish(false), timeoutMs);
    const sock: Socket = connect({ host: "127.0.0.1", port: opts.port, localAddress: opts.from ?? "127.0.0.1" }, () => {
      if (opts.via === "direct") {
        if (!opts.gate) return void sock.write(frame);
        opts.gate.connected();
        return void opts.gate.send.then(() => sock.write(frame));
      }
      const extra = Object.entries(opts.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`);
      sock.write(
        `GET ${CONNECT_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${opts.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n${extra.join("")}\r\n`,
      );
    });
    sock.on("error", (err: NodeJS.ErrnoException) => (err.code === "ECONNRESET" ? finish(true) : (clearTimeout(timer), reject(err))));
    sock.on("close", () => finish(true));
    sock.on("data", (chunk: Buffer) => {
      raw = Buffer.concat([raw, chunk]);
      if (!upgraded) {
        const end = raw.indexOf("\r\n\r\n");
        if (end < 0) return;
        const status = raw.subarray(0, raw.indexOf("\r\n")).toString();
        if (!/^HTTP\/1\.1 101/.test(status)) return void (clearTimeout(timer), sock.destroy(), reject(new Error(`upgrade refused: ${status}`)));
        upgraded = true;
        raw = raw.subarray(end + 4);
        sock.write(maskedBinary(frame));
      }
      if (opts.via === "direct") {
        frames = raw;
      } else {
        const { payloads, rest } = unwrapMessages(raw);
        raw = rest;
        frames = Buffer.concat([frames, ...payloads]);
      }
      frames = takeFrames(frames, (type, payload) => {
        if (answer || type === FrameType.PONG || type === FrameType.PING) return;
        const refusal = type === FrameType.ERROR ? JSON.parse(payload.toString()) : undefined;
        const ready = type === FrameType.READY ? JSON.parse(payload.toString()) : undefined;
        answer = { type: FRAME_NAMES[type] ?? String(type), refusal, ready, closed: false };
        if (type !== FrameType.ERROR) finish(false); // READY or MOVE: the edge keeps the connection; we are done
      });
      if (opts.via === "direct") raw = frames;
    });
  });
}

/** A connection to the agents' endpoint (or a node's) played by hand: frames of any type and size, in any order. */
export interface RawConnection {
  /** Every frame the other side sent, in order (PINGs and PONGs included). */
  frames: { type: number; payload: Buffer }[];
  readonly closed: boolean;
  /** Writes the frames as they are: one WebSocket message each, or back to back on the direct port. */
  send(...frames: Uint8Array[]): void;
  /** True once `check` holds (tested now and on each frame or close), false after `ms`. */
  until(check: () => boolean, ms: number): Promise<boolean>;
  close(): void;
}

export interface RawConnectionOptions {
  port: number;
  via: "websocket" | "direct";
  /** The WebSocket's path: the agents' (default), or the nodes' relay path. */
  path?: string;
  /** Extra headers on the WebSocket upgrade, e.g. a node's Authorization. */
  headers?: Record<string, string>;
  timeoutMs?: number;
}

/** Opens the connection (a WebSocket is upgraded first) and sends nothing: what is said is the test's. */
export function rawConnection(opts: RawConnectionOptions): Promise<RawConnection> {
  const timeoutMs = opts.timeoutMs ?? 5_000;
  return new Promise((resolve, reject) => {
    const frames: RawConnection["frames"] = [];
    const listeners = new Set<() => void>();
    const notify = () => [...listeners].forEach((l) => l());
    let closed = false;
    let upgraded = opts.via === "direct";
    let raw: Buffer = Buffer.alloc(0);
    let whole: Buffer = Buffer.alloc(0);
    const conn: RawConnection = {
      frames,
      get closed() {
        return closed;
      },
      send: (...out) => void (closed || sock.write(Buffer.concat(out.map((f) => (opts.via === "direct" ? Buffer.from(f) : maskedBinary(f)))))),
      until: (check, ms) =>
        new Promise<boolean>((done) => {
          if (check()) return done(true);
          const finish = (ok: boolean) => (clearTimeout(timer), listeners.delete(on), done(ok));
          const on = () => void (check() && finish(true));
          const timer = setTimeout(() => finish(false), ms);
          listeners.add(on);
        }),
      close: () => sock.destroy(),
    };
    const timer = setTimeout(() => (sock.destroy(), reject(new Error(`not connected within ${timeoutMs} ms`))), timeoutMs);
    const sock: Socket = connect({ host: "127.0.0.1", port: opts.port }, () => {
      if (opts.via === "direct") return void (clearTimeout(timer), resolve(conn));
      const extra = Object.entries(opts.headers ?? {}).map(([k, v]) => `${k}: ${v}\r\n`);
      sock.write(
        `GET ${opts.path ?? CONNECT_PATH} HTTP/1.1\r\nHost: 127.0.0.1:${opts.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
          `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n${extra.join("")}\r\n`,
      );
    });
    sock.on("error", () => {});
    sock.on("close", () => {
      closed = true;
      clearTimeout(timer);
      if (!upgraded) reject(new Error("closed before the upgrade"));
      notify();
    });
    sock.on("data", (chunk: Buffer) => {
      raw = Buffer.concat([raw, chunk]);
      if (!upgraded) {
        const end = raw.indexOf("\r\n\r\n");
        if (end < 0) return;
        const status = raw.subarray(0, raw.indexOf("\r\n")).toString();
        clearTimeout(timer);
        if (!/^HTTP\/1\.1 101/.test(status)) return void (sock.destroy(), reject(new Error(`upgrade refused: ${status}`)));
        upgraded = true;
        raw = raw.subarray(end + 4);
        resolve(conn);
      }
      if (opts.via === "direct") {
        whole = raw;
        raw = Buffer.alloc(0);
      } else {
        const { payloads, rest } = unwrapMessages(raw);
        raw = rest;
        whole = Buffer.concat([whole, ...payloads]);
      }
      whole = takeFrames(whole, (type, payload) => void frames.push({ type, payload: Buffer.from(payload) }));
      notify();
    });
  });
}

/** Whole frames off the front of `buf`, given to `each`; returns what is left. */
function takeFrames(buf: Buffer, each: (type: number, payload: Buffer) => void): Buffer {
  while (buf.length >= HEADER_LENGTH) {
    const len = buf.readUInt32BE(5);
    if (buf.length < HEADER_LENGTH + len) break;
    each(buf[0]! & 0x7f, buf.subarray(HEADER_LENGTH, HEADER_LENGTH + len));
    buf = buf.subarray(HEADER_LENGTH + len);
  }
  return buf;
}

/** The payloads of the whole binary WebSocket messages (unmasked, server to client) at the front of `buf`. */
function unwrapMessages(buf: Buffer): { payloads: Buffer[]; rest: Buffer } {
  const payloads: Buffer[] = [];
  for (;;) {
    if (buf.length < 2) break;
    let len = buf[1]! & 0x7f;
    let at = 2;
    if (len === 126) {
      if (buf.length < 4) break;
      len = buf.readUInt16BE(2);
      at = 4;
    } else if (len === 127) {
      if (buf.length < 10) break;
      len = Number(buf.readBigUInt64BE(2));
      at = 10;
    }
    if (buf.length < at + len) break;
    if ((buf[0]! & 0x0f) === 0x2) payloads.push(buf.subarray(at, at + len));
    buf = buf.subarray(at + len);
  }
  return { payloads, rest: buf };
}

/** One binary WebSocket message from a client (masked, as RFC 6455 requires). */
function maskedBinary(payload: Uint8Array): Buffer {
  const n = payload.length;
  const head = Buffer.alloc(n < 126 ? 2 : n <= 0xffff ? 4 : 10);
  head[0] = 0x82;
  if (n < 126) head[1] = 0x80 | n;
  else if (n <= 0xffff) (head[1] = 0x80 | 126), head.writeUInt16BE(n, 2);
  else (head[1] = 0x80 | 127), head.writeBigUInt64BE(BigInt(n), 2);
  const mask = randomBytes(4);
  const body = Buffer.from(payload);
  for (let i = 0; i < n; i++) body[i]! ^= mask[i % 4]!;
  return Buffer.concat([head, mask, body]);
}
