/**
 * Idle HTTP/2 connections with prior knowledge, held open from this process:
 * each sends the connection preface and an empty SETTINGS, acknowledges the
 * server's SETTINGS (as any client does, so no settings timeout ends it) and
 * then sends nothing. A connection counts as ready once the server's SETTINGS
 * and the acknowledgement of ours have both arrived: the server then holds a
 * whole h2 session for it. idleMemory() holds many and reads what they cost
 * the server's RSS.
 */
import type { Socket } from "bun";
import { readdirSync, readFileSync } from "node:fs";
import { median } from "./report.ts";

const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
/** A SETTINGS frame with no parameters, and its acknowledgement. */
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
const SETTINGS_ACK = Buffer.from([0, 0, 0, 4, 1, 0, 0, 0, 0]);
const TYPE_SETTINGS = 4;
const TYPE_GOAWAY = 7;

interface Conn {
  socket?: Socket<Conn>;
  pending: Buffer;
  theirSettings: boolean;
  oursAcked: boolean;
  goaway: boolean;
  closed: boolean;
  ready(): void;
}

/** Reads the whole frames in `c.pending`; answers SETTINGS, notes GOAWAY. */
function readFrames(c: Conn): void {
  let at = 0;
  while (c.pending.length - at >= 9) {
    const len = (c.pending[at]! << 16) | (c.pending[at + 1]! << 8) | c.pending[at + 2]!;
    if (c.pending.length - at < 9 + len) break;
    const type = c.pending[at + 3]!;
    const ack = (c.pending[at + 4]! & 1) === 1;
    if (type === TYPE_SETTINGS && ack) c.oursAcked = true;
    else if (type === TYPE_SETTINGS) {
      c.theirSettings = true;
      c.socket?.write(SETTINGS_ACK);
    } else if (type === TYPE_GOAWAY) c.goaway = true;
    at += 9 + len;
  }
  c.pending = c.pending.subarray(at);
  if (c.theirSettings && c.oursAcked) c.ready();
}

export class IdleH2Connections {
  private readonly conns: Conn[] = [];

  /** Connections still open that were never sent GOAWAY. */
  get alive(): number {
    return this.conns.filter((c) => !c.closed && !c.goaway).length;
  }

  get count(): number {
    return this.conns.length;
  }

  /**
   * Opens `count` more connections to 127.0.0.1:`port`, `batch` at a time,
   * each batch ready before the next; fails when one is closed or not ready
   * by the deadline.
   */
  async open(port: number, count: number, timeoutMs: number, batch = 100): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    for (let done = 0; done < count; ) {
      const n = Math.min(batch, count - done);
      const readies: Promise<void>[] = [];
      for (let i = 0; i < n; i++) readies.push(this.openOne(port));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`idle h2 connections: ${this.conns.length - this.alive} closed, not all ready within ${timeoutMs / 1000} s`)), Math.max(0, deadline - Date.now()));
      });
      try {
        await Promise.race([Promise.all(readies), late]);
      } finally {
        clearTimeout(timer);
      }
      done += n;
    }
  }

  private openOne(port: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const c: Conn = { pending: Buffer.alloc(0), theirSettings: false, oursAcked: false, goaway: false, closed: false, ready: resolve };
      this.conns.push(c);
      const gone = (why: string) => {
        c.closed = true;
        reject(new Error(`an idle h2 connection ${why} before it was ready`));
      };
      Bun.connect<Conn>({
        hostname: "127.0.0.1",
        port,
        data: c,
        socket: {
          open(s) {
            c.socket = s;
            s.write(Buffer.concat([PREFACE, SETTINGS]));
          },
          data(_s, chunk) {
            c.pending = c.pending.length ? Buffer.concat([c.pending, chunk]) : Buffer.from(chunk);
            readFrames(c);
          },
          close() {
            gone("was closed");
          },
          error() {
            gone("failed");
          },
          connectError() {
            gone("could not connect");
          },
        },
      }).catch(() => gone("could not connect"));
    });
  }

  /** Closes every connection; resolves when all are closed or after `timeoutMs`. */
  async close(timeoutMs = 10_000): Promise<void> {
    for (const c of this.conns) c.socket?.end();
    const deadline = Date.now() + timeoutMs;
    while (this.conns.some((c) => !c.closed) && Date.now() < deadline) await Bun.sleep(20);
    for (const c of this.conns) if (!c.closed) c.socket?.terminate();
  }
}

// ------------------------------------------------------------------ memory per idle connection

export interface IdleMemory {
  connections: number;
  baseKiB: number;
  heldKiB: number;
  perConnectionKiB: number;
  /** Connections still open, never sent GOAWAY, when the RSS was read. */
  alive: number;
}

/** RSS (KiB) of a process and its descendants (nginx: master and worker). */
function treeRssKiB(root: number): number {
  const parent = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      parent.set(pid, Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]));
    } catch {}
  }
  let total = 0;
  let found = false;
  for (const pid of parent.keys()) {
    for (let p: number | undefined = pid; p !== undefined && p > 1; p = parent.get(p)) {
      if (p !== root) continue;
      try {
        total += Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))?.[1] ?? 0);
        found = true;
      } catch {}
      break;
    }
  }
  return found ? total : NaN;
}

async function sampledRss(pid: number, ms = 1000): Promise<number> {
  const xs: number[] = [];
  const end = Date.now() + ms;
  do {
    xs.push(treeRssKiB(pid));
    await Bun.sleep(100);
  } while (Date.now() < end);
  return median(xs);
}

/**
 * The RSS growth of `pid` (with its children) per idle h2 connection to
 * `port`: 50 opened and closed first (code and first structures), then
 * `count` held while the RSS settles.
 */
export async function idleMemory(pid: number, port: number, count: number): Promise<IdleMemory> {
  const warm = new IdleH2Connections();
  await warm.open(port, 50, 30_000).finally(() => warm.close());
  await Bun.sleep(2000);
  const baseKiB = await sampledRss(pid);
  const held = new IdleH2Connections();
  try {
    await held.open(port, count, 60_000);
    await Bun.sleep(3000); // settle: handshakes done, buffers released
    const heldKiB = await sampledRss(pid);
    return { connections: count, baseKiB, heldKiB, perConnectionKiB: (heldKiB - baseKiB) / count, alive: held.alive };
  } finally {
    await held.close();
  }
}
