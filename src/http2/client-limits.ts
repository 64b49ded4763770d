/**
 * What one HTTP/2 client connection (client-connection.ts) allows the
 * server it talks to: an agent's connection to an h2c service, which is the
 * user's own but is not trusted to be well-behaved. Each bound keeps the
 * agent's memory to a size known in advance whatever the service sends;
 * each has a tunnel option (--upstream-h2-*, agent/settings/upstream-h2.ts)
 * and a line in docs/limits.md. The defaults are safe for any service.
 */

export interface Http2ClientLimits {
  /**
   * A response's header list (or trailer section), counted as
   * SETTINGS_MAX_HEADER_LIST_SIZE counts it, bounded while HPACK decodes
   * it; its header block may be no larger. Past it the stream is reset.
   */
  maxHeaderListBytes: number;
  /** Streams open at once, whatever more the server's SETTINGS_MAX_CONCURRENT_STREAMS allows; requests past it wait. */
  maxStreams: number;
  /**
   * Each stream's receive window (SETTINGS_INITIAL_WINDOW_SIZE): response
   * bytes the server may send before the consumer took the ones before.
   * The connection's window is every stream's together, so one stream never
   * holds another back, and the bytes held are at most maxStreams times this.
   */
  streamWindow: number;
  /** A connection with no stream open closes after it (GOAWAY NO_ERROR). */
  idleTimeoutMs: number;
  /** The server's first SETTINGS must come within it: a server that does not speak HTTP/2 and says nothing is given up. */
  settingsTimeoutMs: number;
  /**
   * Frames this side may queue while the server does not read (answers to
   * its PING and SETTINGS, resets, window updates): past it the connection
   * is cut. No request is opened and no body byte framed while the socket
   * holds bytes: those wait in their streams, within the tunnel's credit.
   */
  maxQueuedControlBytes: number;
}

export const DEFAULT_H2_CLIENT_LIMITS: Readonly<Http2ClientLimits> = {
  maxHeaderListBytes: 64 * 1024,
  maxStreams: 256,
  streamWindow: 128 * 1024,
  idleTimeoutMs: 30_000,
  settingsTimeoutMs: 10_000,
  maxQueuedControlBytes: 1024 * 1024,
};
