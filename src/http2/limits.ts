/**
 * What one HTTP/2 connection allows its client, with defaults safe on the
 * open internet. The server's flags set the first group (docs/limits.md,
 * "HTTP/2"); the rest are fixed bounds, named here so that the docs and the
 * tests read them from one place.
 */

export interface Http2Limits {
  /** --h2-max-concurrent-streams: streams open at once (SETTINGS_MAX_CONCURRENT_STREAMS); one more is refused (REFUSED_STREAM). */
  maxConcurrentStreams: number;
  /**
   * --h2-max-header-list: a request's header list, counted as
   * SETTINGS_MAX_HEADER_LIST_SIZE counts it (each field's name and value
   * and 32), bounded while it is decoded; past it the request is answered
   * 431. Its header block (HEADERS and CONTINUATION frames together) may
   * be no larger either: a block cannot decode to less than its own size.
   */
  maxHeaderListBytes: number;
  /** --h2-max-resets-per-second: streams the client resets, or makes this side reset, a second (bursts of twice that); past it GOAWAY ENHANCE_YOUR_CALM. */
  maxResetsPerSecond: number;
  /**
   * --h2-max-control-frames: frames that ask work of this side and carry
   * no request, a second (bursts of twice that): SETTINGS, PING, PRIORITY,
   * a WINDOW_UPDATE no DATA of ours called for, empty DATA and CONTINUATION
   * frames, frames of unknown types. Past it GOAWAY ENHANCE_YOUR_CALM.
   */
  maxControlFramesPerSecond: number;
  /**
   * --h2-idle-timeout: a connection with no stream open closes after it
   * (GOAWAY NO_ERROR); the client's preface and SETTINGS, the ACK of ours,
   * and a header block from its first frame must come within it; and a
   * stream with response bytes waiting on a window the client keeps shut
   * is reset after it (a zero-window stall).
   */
  idleTimeoutMs: number;
  /** --h2-max-queued-response: response bytes one connection holds for its streams (waiting for windows or the socket); a stream writing past it is reset. */
  maxQueuedResponseBytes: number;
}

export const DEFAULT_H2_LIMITS: Readonly<Http2Limits> = {
  maxConcurrentStreams: 100,
  maxHeaderListBytes: 64 * 1024,
  maxResetsPerSecond: 100,
  maxControlFramesPerSecond: 1_000,
  idleTimeoutMs: 75_000,
  maxQueuedResponseBytes: 8 * 1024 * 1024,
};

/**
 * The receive window each stream starts with (SETTINGS_INITIAL_WINDOW_SIZE).
 * Not below the protocol's 65,535, so frames a client sent before it read
 * our SETTINGS fit it too. A client may have this much of a stream's body in
 * flight; the window reopens as the stream's consumer takes the bytes.
 */
export const H2_STREAM_WINDOW = 256 * 1024;
/**
 * The largest frame this side sends, whatever larger SETTINGS_MAX_FRAME_SIZE
 * the client allows (up to 16 MB): a frame is copied whole into the
 * connection's batch, and a batch this size is what the socket gets at once.
 */
export const H2_MAX_FRAME_SENT = 64 * 1024;
/** CONTINUATION frames one header block may have, whatever their size (empty ones included). */
export const H2_MAX_CONTINUATION_FRAMES = 64;
/** Bytes of frames (answers to PING and SETTINGS, resets) this side may queue while the client does not read; past it the connection is cut. */
export const H2_MAX_QUEUED_CONTROL_BYTES = 64 * 1024;
/** Streams reset by this side whose late frames are still recognised (and dropped) rather than treated as errors. */
export const H2_RECENTLY_RESET = 256;
/** How often the shared sweep looks at every connection's clocks and refills their budgets. */
export const H2_SWEEP_MS = 1_000;
