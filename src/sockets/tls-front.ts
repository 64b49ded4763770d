/**
 * The edge's public port on Bun.listen, with a certificate per server name.
 * Bun.listen takes one TLSOptions (no SNI), so with TLS the public socket
 * stays plain: the front reads the ClientHello, picks the certificate entry
 * for the name asked, and pipes the connection, hello first, to an
 * internal TLS listener holding that certificate (tls-terminators.ts),
 * whose decrypted sockets go to the handler. Reading the hello first is
 * also what lets a connection be passed on by name, undecrypted (`route`).
 * Without TLS the handler gets the public sockets as they are.
 *
 * It stops accepting and starts again as PublicListener does for
 * Bun.serve (under descriptor pressure): pause() closes the listening
 * socket, connections live on, resume() listens on the same port again.
 */
import type { Socket, SocketHandler, TCPSocketListener } from "bun";
import { limitedLog } from "../log.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import type { TlsSource } from "../tls/tls-source.ts";
import { TlsTerminators, type Peer } from "./tls-terminators.ts";
import { Visit, type Route, type VisitContext } from "./tls-visit.ts";

export type { Peer } from "./tls-terminators.ts";
export type { Passthrough, Route } from "./tls-visit.ts";

/** A peer that has not sent its whole ClientHello by then is closed. */
export const HELLO_TIMEOUT_MS = 10_000;

export interface TlsFrontOptions<D> {
  hostname: string;
  port: number;
  /** Certificates; without, the port is plain TCP. */
  tls?: TlsSource;
  /** Gets the connections (with TLS, decrypted). Its `open` sets `socket.data`. */
  socket: SocketHandler<D>;
  /** For the handler's sockets, as Bun.listen's (default false: a peer's FIN closes the socket). */
  allowHalfOpen?: boolean;
  /** Default HELLO_TIMEOUT_MS. */
  helloTimeoutMs?: number;
  /**
   * Whether to decrypt a TLS connection here (the default), refuse it, or
   * give it on undecrypted, by its hello. With `route` and no `tls` the front
   * only passes through: every connection is read as TLS, and what is not
   * handed on is refused ("terminate" as "unrecognized").
   */
  route?: (hello: ClientHello) => Route | Promise<Route>;
  /** Whether ALPN offers h2 (beside http/1.1) to a connection for this server name; without it, http/1.1 alone. */
  h2?: (serverName: string | undefined) => boolean;
}

/** Hello faults come from anyone on the internet: a flood of them costs at most 30 lines a minute. */
const helloFault = limitedLog(30);

export class TlsFront<D> {
  readonly port: number;
  /** Why the last try to listen again failed; undefined after one that worked. */
  listenError: string | undefined;
  private listener: TCPSocketListener<any> | undefined;
  /** Every connection open: the public ones, the front's to its TLS listeners, and theirs. */
  private readonly sockets = new Set<Socket<any>>();
  private readonly terminators: TlsTerminators<D> | undefined;
  private readonly unsubscribe: (() => void) | undefined;
  private readonly publicHandler: SocketHandler<any>;
  private stopping: Promise<void> | undefined;
  private allClosed: (() => void) | undefined;

  constructor(private readonly options: TlsFrontOptions<D>) {
    if (options.tls || options.route) {
      const tls = options.tls;
      const terminators = tls ? new TlsTerminators<D>(tls, options.socket, this.tracker(), options.allowHalfOpen ?? false, options.h2) : undefined;
      this.terminators = terminators;
      this.publicHandler = frontHandler({
        terminators,
        sockets: this.tracker(),
        helloTimeoutMs: options.helloTimeoutMs ?? HELLO_TIMEOUT_MS,
        route: options.route,
        fault: (why, socket) => helloFault("TLS connection closed before its handshake", { reason: why, address: socket.remoteAddress }),
      });
      this.unsubscribe = tls?.onChange(() => terminators!.refresh());
    } else {
      this.publicHandler = this.tracked(options.socket);
    }
    try {
      this.listener = this.listen(options.port);
    } catch (err) {
      this.unsubscribe?.();
      throw err;
    }
    this.port = this.listener.port;
  }

  get paused(): boolean {
    return this.listener === undefined;
  }

  /** Stops accepting (the listening socket closes); connections live on. */
  pause(): void {
    this.listener?.stop(false);
    this.listener = undefined;
  }

  /** Listens again on the same port; false (and still paused) if the port cannot be had. */
  resume(): boolean {
    if (this.listener) return true;
    if (this.stopping) return false;
    try {
      this.listener = this.listen(this.port);
    } catch (err) {
      this.listenError = describeListenError(err);
      return false;
    }
    this.listenError = undefined;
    return true;
  }

  /**
   * The visitor of a socket the handler got: with TLS, the address and port
   * the front's connection came from (a decrypted socket's own remote
   * address is the front's, on 127.0.0.1); without, the socket's own.
   */
  peerOf(socket: Socket<D>): Peer {
    return this.terminators?.peerOf(socket) ?? { address: socket.remoteAddress, port: socket.remotePort };
  }

  /** Stops accepting; with `force`, cuts every connection too. Resolves once all are closed. */
  stop(force: boolean): Promise<void> {
    this.pause();
    if (!this.stopping) {
      this.unsubscribe?.();
      this.stopping = new Promise<void>((resolve) => (this.allClosed = resolve)).then(() => this.terminators?.stop());
      this.checkClosed();
    }
    if (force) for (const socket of [...this.sockets]) socket.terminate();
    return this.stopping;
  }

  private listen(port: number): TCPSocketListener<any> {
    return Bun.listen<any>({
      hostname: this.options.hostname,
      port,
      // a second server on this port must fail, not share the visitors
      exclusive: true,
      // the front passes each side's FIN on; without TLS the handler chooses
      allowHalfOpen: this.terminators || this.options.route ? true : (this.options.allowHalfOpen ?? false),
      socket: this.publicHandler,
    });
  }

  private tracker() {
    return {
      add: (socket: Socket<any>) => void this.sockets.add(socket),
      delete: (socket: Socket<any>) => {
        const had = this.sockets.delete(socket);
        this.checkClosed();
        return had;
      },
    };
  }

  /** The handler, with its sockets counted. */
  private tracked(handler: SocketHandler<D>): SocketHandler<D> {
    const sockets = this.tracker();
    return {
      ...handler,
      open: (socket) => {
        sockets.add(socket);
        return handler.open?.(socket);
      },
      close: (socket, error) => {
        if (sockets.delete(socket)) return handler.close?.(socket, error);
      },
    };
  }

  private checkClosed(): void {
    if (this.stopping && this.sockets.size === 0) this.allClosed?.();
  }
}

/** The handler of the public sockets with TLS: each one's Visit reads its hello, then pipes or hands it on. */
function frontHandler(context: VisitContext): SocketHandler<Visit> {
  return {
    open: (socket) => {
      context.sockets.add(socket);
      socket.data = new Visit(socket, context);
      socket.data.start();
    },
    data: (socket, chunk) => socket.data.fromVisitor(chunk),
    drain: (socket) => socket.data.visitorDrain(),
    end: (socket) => socket.data.visitorEnd(),
    close: (socket, error) => {
      context.sockets.delete(socket);
      // undefined only if Bun closed it before open ran
      socket.data?.visitorClosed(error);
    },
  };
}

/** "EADDRINUSE: Failed to listen at 127.0.0.1": the code first, as the kernel said it. */
function describeListenError(err: unknown): string {
  const code = (err as { code?: unknown } | null)?.code;
  const message = err instanceof Error ? err.message : String(err);
  return typeof code === "string" && !message.includes(code) ? `${code}: ${message}` : message;
}
