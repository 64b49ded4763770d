/**
 * The TLS listeners behind the TLS front (tls-front.ts): one per
 * certificate entry, on 127.0.0.1 and a port of the kernel's choice, each
 * holding that one certificate (Bun.listen takes one TLSOptions, no SNI).
 * The front pipes a visitor's connection, ClientHello first, into the one
 * for the server name asked; the decrypted sockets they accept go to the
 * handler, which learns the visitor's address from peerOf().
 *
 * A listener is made the first time a connection needs its entry, not for
 * every entry up front: ACME holds a certificate per name, and a listener
 * per certificate would cost a descriptor and a TLS context for each name
 * whether or not anyone visits it.
 */
import type { Socket, SocketHandler, TCPSocketListener } from "bun";
import { log } from "../log.ts";
import type { ClientHello } from "../tls/client-hello.ts";
import { chooseEntry } from "../tls/sni.ts";
import type { TlsEntry, TlsSource } from "../tls/tls-source.ts";

export interface Peer {
  address: string;
  port: number;
  /** Where it reached the public port (the front's socket's local end): the decrypted socket's own is an internal listener's. */
  localAddress?: string;
  localPort?: number;
  /** Its ClientHello, with the pieces of its fingerprint (tls/ja4.ts, made when a rule reads it). */
  hello?: ClientHello;
}

/**
 * The internal listeners offer HTTP/1.1 by ALPN, and, for the names the
 * front's `h2` says yes to, h2 before it (a listener of each kind per
 * certificate, made as needed, since Bun's TLS options take one list): a
 * client offering h2 and http/1.1 gets h2 there and http/1.1 elsewhere, one
 * offering only others is refused (no_application_protocol), and one
 * offering none gets none. Bun wants the list in its wire form
 * (length-prefixed names): the string "http/1.1" is taken as that form, and
 * no client can agree with it.
 */
const ALPN_HTTP1 = new Uint8Array([8, ...new TextEncoder().encode("http/1.1")]);
const ALPN_H2_HTTP1 = new Uint8Array([2, ...new TextEncoder().encode("h2"), ...ALPN_HTTP1]);

/** Every socket the front owns or hands on, so that stop() can wait for (or cut) them all. */
export interface SocketSet {
  add(socket: Socket<any>): void;
  /** False when it was not there (a stranger the handler never saw). */
  delete(socket: Socket<any>): boolean;
}

export class TlsTerminators<D> {
  private entries: TlsEntry[];
  /** Listeners for the current entries, made as connections need them; those that offer h2 too. */
  private readonly current = new Map<TlsEntry, TCPSocketListener<D>>();
  private readonly currentH2 = new Map<TlsEntry, TCPSocketListener<D>>();
  /** Visitors of the front's connections whose TLS side has not opened yet, by "listener port:front's local port". */
  private readonly expected = new Map<string, Peer>();
  /** Visitors of the decrypted sockets. */
  private readonly peers = new WeakMap<Socket<D>, Peer>();
  private readonly handler: SocketHandler<D>;

  constructor(
    private readonly source: TlsSource,
    handler: SocketHandler<D>,
    private readonly sockets: SocketSet,
    private readonly allowHalfOpen: boolean,
    /** Whether a server name is offered h2 by ALPN; none: http/1.1 for every name. */
    private readonly h2?: (serverName: string | undefined) => boolean,
  ) {
    this.entries = source.entries();
    this.handler = this.wrap(handler);
  }

  /** The port of the listener with the certificate for `serverName`; undefined when it cannot listen (logged). */
  portFor(serverName: string | undefined): number | undefined {
    const entry = chooseEntry(this.entries, serverName);
    if (!entry) return undefined;
    const h2 = this.h2?.(serverName) ?? false;
    const listeners = h2 ? this.currentH2 : this.current;
    let listener = listeners.get(entry);
    if (!listener) {
      try {
        listener = Bun.listen<D>({
          hostname: "127.0.0.1",
          port: 0,
          allowHalfOpen: this.allowHalfOpen,
          tls: { cert: entry.cert, key: entry.key, ALPNProtocols: h2 ? ALPN_H2_HTTP1 : ALPN_HTTP1 },
          socket: this.handler,
        });
      } catch (err) {
        log.error("TLS listener for a certificate could not start", { serverName: entry.serverName ?? "(default)", err: String(err) });
        return undefined;
      }
      listeners.set(entry, listener);
    }
    return listener.port;
  }

  /** The front's connection from `peer` to `listenerPort` opened, from `localPort`. */
  expect(listenerPort: number, localPort: number, peer: Peer): void {
    this.expected.set(`${listenerPort}:${localPort}`, peer);
  }

  /** The front's connection closed; its TLS side had its chance to claim the peer. */
  forget(listenerPort: number, localPort: number): void {
    this.expected.delete(`${listenerPort}:${localPort}`);
  }

  peerOf(socket: Socket<D>): Peer | undefined {
    return this.peers.get(socket) ?? this.claim(socket);
  }

  /**
   * New entries (a certificate obtained or renewed): new connections get
   * new listeners, and the old ones stop accepting. Their connections live
   * on until they close; they are not kept here (the front knows every
   * socket, and cuts them itself when it must).
   */
  refresh(): void {
    this.entries = this.source.entries();
    this.stop();
  }

  /** Stops accepting on every listener; their connections live on. */
  stop(): void {
    for (const listener of [...this.current.values(), ...this.currentH2.values()]) listener.stop(false);
    this.current.clear();
    this.currentH2.clear();
  }

  /**
   * The handler, with the visitor found for each socket before it sees it.
   * A TLS socket opens once its handshake is over (when the handler has no
   * `handshake` callback), after the front's connection opened and said
   * who it carries; a socket no connection of the front announced is a
   * local stranger, closed unseen by the handler.
   */
  private wrap(handler: SocketHandler<D>): SocketHandler<D> {
    const known = (socket: Socket<D>) => this.peers.has(socket) || this.claim(socket) !== undefined;
    const { handshake } = handler;
    const wrapped: SocketHandler<D> = {
      ...handler,
      open: (socket) => {
        if (!handshake && !known(socket)) return socket.terminate();
        this.sockets.add(socket);
        return handler.open?.(socket);
      },
      close: (socket, error) => {
        if (this.sockets.delete(socket)) return handler.close?.(socket, error);
      },
    };
    // only when the handler has one: its presence makes Bun open TLS sockets before the handshake
    if (handshake) {
      wrapped.handshake = (socket, success, error) => {
        if (!known(socket)) return socket.terminate();
        handshake(socket, success, error);
      };
    }
    return wrapped;
  }

  private claim(socket: Socket<D>): Peer | undefined {
    const key = `${socket.localPort}:${socket.remotePort}`;
    const peer = this.expected.get(key);
    if (!peer) return undefined;
    this.expected.delete(key);
    this.peers.set(socket, peer);
    return peer;
  }
}
