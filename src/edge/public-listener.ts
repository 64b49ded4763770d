/**
 * A Bun.serve that can stop accepting for a while and start again: the
 * plain HTTP port that answers ACME's HTTP-01 and redirects to HTTPS
 * (redirect.ts). The public port itself is a Bun.listen (public-port.ts)
 * and pauses the same way. Bun.serve has no way to refuse a connection at
 * accept: when descriptors run out, its accept loop spins and nothing
 * answers any more. So under descriptor pressure the listening socket
 * itself is closed (stop(false): the connections already open go on being
 * served by that server object) and a new Bun.serve takes the same port
 * once pressure is over. New visitors meanwhile see a refused connection,
 * which costs the server nothing.
 */
import type { Server } from "bun";
import { log } from "../log.ts";

type ServeOptions<T> = Parameters<typeof Bun.serve<T>>[0];

/** After a certificate change, how long and how often to try to take the port again. */
const RETAKE_FOR_MS = 2_000;
const RETAKE_EVERY_MS = 5;

export class PublicListener<T> {
  /** The server accepting now, undefined while paused. */
  private accepting: Server<T> | undefined;
  /** Every server made, paused ones included: their connections live on until they close. */
  private readonly all = new Set<Server<T>>();
  readonly port: number;
  private stopped = false;
  /** Why the last try to listen again failed (its code and message), for the line that says it did; undefined after one that worked. */
  listenError: string | undefined;

  constructor(private options: ServeOptions<T>) {
    this.accepting = Bun.serve<T>(options);
    this.all.add(this.accepting);
    this.port = this.accepting.port ?? Number((options as { port?: number }).port);
  }

  get paused(): boolean {
    return this.accepting === undefined;
  }

  pause(): void {
    const s = this.accepting;
    if (!s) return;
    this.accepting = undefined;
    void s.stop(false);
  }

  /** Listens again on the same port; false (and still paused) if the port cannot be had. */
  resume(): boolean {
    if (this.accepting) return true;
    try {
      this.accepting = Bun.serve<T>({ ...this.options, port: this.port } as ServeOptions<T>);
    } catch (err) {
      this.listenError = describeListenError(err);
      return false;
    }
    this.listenError = undefined;
    this.all.add(this.accepting);
    return true;
  }

  /**
   * Presents new certificates from now on: a new Bun.serve with them takes
   * the port (Bun.serve cannot change its certificates in place), while the
   * old one lets go of the listening socket and goes on serving the
   * connections it has, WebSockets included, until they close.
   */
  setTls(tls: unknown): void {
    this.options = { ...this.options, tls } as ServeOptions<T>;
    const old = this.accepting;
    if (!old) return; // paused: resume() takes the new options
    this.accepting = undefined;
    void old.stop(false);
    this.retake(Date.now() + RETAKE_FOR_MS);
  }

  /** Listens again as soon as the port is free (the old listener may hold it a moment longer). */
  private retake(until: number): void {
    if (this.resume() || this.stopped) return;
    if (Date.now() > until) {
      log.error("public port could not be listened on again after a certificate change", { port: this.port, err: this.listenError });
      return;
    }
    setTimeout(() => this.retake(until), RETAKE_EVERY_MS);
  }

  /** Closes every keep-alive connection that has no request in flight; returns how many. */
  closeIdle(): number {
    let n = 0;
    for (const s of this.all) n += s.closeIdleConnections();
    return n;
  }

  get pendingRequests(): number {
    let n = 0;
    for (const s of this.all) n += s.pendingRequests;
    return n;
  }

  /** Stops accepting; with `force`, cuts every connection too. Resolves when all are closed. */
  async stop(force: boolean): Promise<void> {
    this.stopped = true;
    this.accepting = undefined;
    await Promise.all([...this.all].map((s) => s.stop(force)));
  }
}

/** "EADDRINUSE: Failed to start server. Is port 8080 in use?": the code first, as the kernel said it. */
function describeListenError(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  return typeof code === "string" && !message.includes(code) ? `${code}: ${message}` : message;
}
