/** The inspector's bounds, in one place: what it keeps, and for how long nobody waits on it. */

/** Requests kept unless --inspect-keep says otherwise; the oldest leave first. */
export const DEFAULT_KEEP = 1000;
/** --inspect-keep's range: at least one, and no more than memory can bear at the body caps below. */
export const MAX_KEEP = 100_000;
/** Bytes of each body (request and response, each) kept; beyond it a body is counted and marked truncated. */
export const MAX_BODY_BYTES = 1024 * 1024;
/**
 * All kept bodies together, unless --inspect-memory says otherwise: past it the
 * oldest requests leave before --inspect-keep is reached, so a thousand large
 * uploads cannot take gigabytes of the user's memory.
 */
export const DEFAULT_MEMORY_MIB = 256;
export const MAX_TOTAL_BODY_BYTES = DEFAULT_MEMORY_MIB * 1024 * 1024;
/** --inspect-memory's range, in MiB. */
export const MAX_MEMORY_MIB = 65_536;
/** WebSocket messages kept per connection (the last ones), and bytes kept of each. */
export const WS_MESSAGES_KEPT = 50;
export const WS_MESSAGE_BYTES = 16 * 1024;
/** A decoded (gzip, br, deflate) view stops here: a small body can inflate to gigabytes. */
export const MAX_DECODED_BYTES = 8 * 1024 * 1024;
/** How often the live stream sends what changed: many requests in one window cost one batch. */
export const STREAM_BATCH_MS = 100;
/** Bytes waiting for one live-stream client; a client that falls this far behind is dropped. */
export const STREAM_CLIENT_MAX_BYTES = 1024 * 1024;
/** A comment line on idle live streams, so a gone client is noticed and proxies keep the line open. */
export const STREAM_KEEPALIVE_MS = 15_000;
/** Live-stream clients at once. */
export const MAX_STREAM_CLIENTS = 32;
/** How long a replay waits for the local service's response head. */
export const REPLAY_HEAD_TIMEOUT_MS = 30_000;
/** Ports tried in turn when no --inspect-addr is given. */
export const DEFAULT_PORTS = { host: "127.0.0.1", first: 4040, last: 4049 } as const;
