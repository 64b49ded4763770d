/**
 * Keep-alive connections to the local service, so a request does not pay
 * for a TCP handshake (and the service for an accept) every time. Idle
 * connections are reused newest first: the newest is the least likely to
 * have been closed by the service. They are given up after IDLE_MS, well
 * before common services close theirs (Node 5 s, nginx 75 s), so a reused
 * connection is rarely one the service is closing at that very moment; the
 * caller retries that race once (see exchange.ts).
 */
import type { Dialer } from "../local-target.ts";
import { LocalConnection } from "./connection.ts";
import type { Http2ClientLimits } from "../../http2/client-limits.ts";
import { H2Services } from "./h2-services.ts";

/**
 * Where a local service listens; `tls`: it speaks https; `upstreamProtocol`:
 * HTTP/2 (h2-services.ts), not HTTP/1.1, held to `upstreamH2`; `dial`: how it
 * is reached when not by TCP from here.
 */
export interface LocalService {
  host: string;
  port: number;
  tls?: boolean;
  upstreamProtocol?: "h2c" | "h2";
  dial?: Dialer;
  upstreamH2?: Http2ClientLimits;
}

export interface PoolOptions {
  /** Idle connections kept per service. */
  maxIdle?: number;
  /** An idle connection older than this is closed, never reused. */
  idleMs?: number;
}

const MAX_IDLE = 64;
const IDLE_MS = 4_000;

export class ConnectionPool {
  /** Idle connections per service ("http://host:port"), oldest first. */
  private readonly idle = new Map<string, LocalConnection[]>();
  /**
   * Idle connections kept aside for their streams (hold). A connection stays
   * in it while its stream takes it back and holds it again, request after
   * request (unhold only marks it taken: the sweep drops those), so a kept
   * stream's request costs no set insert and delete.
   */
  private readonly held = new Set<LocalConnection>();
  private readonly maxIdle: number;
  private readonly idleMs: number;
  private sweeper: ReturnType<typeof setInterval> | undefined;
  /** Connections opened so far. */
  opened = 0;
  private h2Services: H2Services | undefined;

  constructor(opts: PoolOptions = {}) {
    this.maxIdle = opts.maxIdle ?? MAX_IDLE;
    this.idleMs = opts.idleMs ?? IDLE_MS;
  }

  /** The newest live idle connection to the service, if any. */
  take(service: LocalService): LocalConnection | undefined {
    const list = this.idle.get(keyOf(service));
    if (!list) return undefined;
    const now = performance.now();
    while (list.length > 0) {
      const conn = list.pop()!;
      if (conn.closed) continue;
      if (now - conn.idleSince < this.idleMs) {
        conn.keepsProcessAlive(true);
        return conn;
      }
      // this one is too old, and every one under it older still
      conn.close();
      for (const older of list.splice(0)) older.close();
    }
    return undefined;
  }

  /**
   * Keeps an idle connection aside for one stream's next request (a kept
   * stream between its requests: the visitor's next request goes on the
   * same connection). It is the pool's all the same while it waits: closed
   * once idle past the pool's limit, by the same sweep, so a visitor who
   * keeps a quiet connection open does not keep one open to the service.
   */
  hold(conn: LocalConnection): void {
    conn.user = undefined;
    conn.resume(); // while it waits, it must still hear the service close it
    // its age is counted in sweeps, not read from the clock: a kept stream holds and takes back its connection every request
    conn.heldSweeps = 0;
    conn.holding = true;
    if (!conn.heldListed) {
      conn.heldListed = true;
      this.held.add(conn);
    }
    this.sweepSoon();
  }

  /** A held connection back for its stream's next request; undefined when the service closed it or it waited too long (the sweep closed it). */
  unhold(conn: LocalConnection): LocalConnection | undefined {
    conn.holding = false;
    return conn.closed ? undefined : conn;
  }

  /** The HTTP/2 connections, one per service that speaks it (upstreamProtocol). */
  get h2(): H2Services {
    return (this.h2Services ??= new H2Services());
  }

  /** A new connection, or why there is none. */
  async open(service: LocalService): Promise<LocalConnection | Error> {
    const conn = await LocalConnection.open(service.host, service.port, keyOf(service), service.tls, undefined, service.dial);
    if (!(conn instanceof Error)) this.opened++;
    return conn;
  }

  /** Whether `conn` is a connection to `service`. */
  serves(conn: LocalConnection, service: LocalService): boolean {
    return conn.key === keyOf(service);
  }

  /** Takes back a connection whose request is complete, to wait for the next one. */
  put(conn: LocalConnection): void {
    if (conn.closed) return;
    conn.user = undefined;
    conn.resume(); // an idle connection must still hear the service close it
    conn.keepsProcessAlive(false);
    let list = this.idle.get(conn.key);
    if (!list) this.idle.set(conn.key, (list = []));
    if (list.length >= this.maxIdle) list.shift()!.close();
    conn.idleSince = performance.now();
    list.push(conn);
    this.sweepSoon();
  }

  private sweepSoon(): void {
    if (this.sweeper !== undefined) return;
    this.sweeper = setInterval(() => this.sweep(), this.sweepMs);
    this.sweeper.unref(); // idle connections are no reason to keep the agent running
  }

  /** How often the sweep runs. */
  private get sweepMs(): number {
    return Math.max(50, this.idleMs / 4);
  }

  /** Idle connections kept now (tests look at this). */
  get idleCount(): number {
    let n = 0;
    for (const list of this.idle.values()) n += list.filter((c) => !c.closed).length;
    return n;
  }

  /** Closes every idle connection, held ones too, and the HTTP/2 ones, and stops the sweeper. */
  close(): void {
    for (const list of this.idle.values()) for (const conn of list) conn.close();
    this.idle.clear();
    for (const conn of this.held) {
      conn.heldListed = false;
      if (conn.holding) conn.close(); // one taken back is its stream's, in use
    }
    this.held.clear();
    this.h2Services?.close();
    this.h2Services = undefined;
    this.stopSweeper();
  }

  /** Closes connections idle too long and forgets those the service closed. */
  private sweep(): void {
    const now = performance.now();
    for (const [key, list] of this.idle) {
      const live = list.filter((conn) => {
        if (!conn.closed && now - conn.idleSince < this.idleMs) return true;
        conn.close();
        return false;
      });
      if (live.length > 0) this.idle.set(key, live);
      else this.idle.delete(key);
    }
    // a held connection has waited at least (sweeps - 1) and at most `sweeps` sweeps' time: closed before that can pass idleMs
    const heldSweeps = Math.max(1, Math.floor(this.idleMs / this.sweepMs));
    for (const conn of this.held) {
      if (conn.holding && !conn.closed && ++conn.heldSweeps < heldSweeps) continue;
      if (conn.holding) conn.close(); // one taken back is its stream's, in use
      conn.holding = false;
      conn.heldListed = false;
      this.held.delete(conn);
    }
    if (this.idle.size === 0 && this.held.size === 0) this.stopSweeper();
  }

  private stopSweeper(): void {
    if (this.sweeper !== undefined) clearInterval(this.sweeper);
    this.sweeper = undefined;
  }
}

/** A service's key, made once per service object (every request asks). */
const keys = new WeakMap<LocalService, string>();
function keyOf(s: LocalService): string {
  let key = keys.get(s);
  // another way to the same host and port is another service: its connections are never another's
  if (key === undefined) keys.set(s, (key = `${s.tls ? "https" : "http"}://${s.host}:${s.port}${s.dial ? ` via ${s.dial.key}` : ""}`));
  return key;
}
