/**
 * What the edge counts for the metrics, as plain numbers it adds to on its
 * hot paths: no label objects, no allocation, no Date per request (the
 * registry reads them at scrape time, registry.ts). Every label value that
 * can come out of here is from a closed list, never a name, path or address.
 */
import { ERROR_STATUS } from "../core/errors.ts";
import { WireError } from "../protocol/wire.ts";
import { Buckets } from "./buckets.ts";
import { UdpCounters } from "./udp-counters.ts";

/** A visitor request's kind: the `protocol` label of the requests counter (http: HTTP/1.x; h2: an HTTP/2 stream). */
export const REQUEST_KINDS = ["http", "websocket", "h2"] as const;
export const HTTP_REQUEST = 0;
export const WEBSOCKET_REQUEST = 1;
export const H2_REQUEST = 2;
export type RequestKind = typeof HTTP_REQUEST | typeof WEBSOCKET_REQUEST | typeof H2_REQUEST;

/** Status classes by the status's first digit; "other" for a status outside 100-599. */
export const STATUS_CLASSES = ["other", "1xx", "2xx", "3xx", "4xx", "5xx"] as const;

/** Time to response head, seconds: from a millisecond landing page to a minute's long poll. */
export const REQUEST_DURATION_BOUNDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
/** One traffic flush: a handful of upserts, normally well under a millisecond. */
export const FLUSH_DURATION_BOUNDS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1];

/** Who ended a stream early: the edge (visitor gone, timeout), the agent (its service failed), or the connection closing under it. */
export type ResetBy = "edge" | "agent" | "session";

/** Codes the edge's handshakes and resets are labelled with; anything else counts as OTHER. */
const KNOWN_CODES: ReadonlySet<string> = new Set([
  ...Object.keys(ERROR_STATUS),
  ...Object.values(WireError),
  "READY",
  "MOVE",
]);

export const knownCode = (code: string): string => (KNOWN_CODES.has(code) ? code : "OTHER");

export class EdgeCounters {
  /** Visitor requests, at [kind * STATUS_CLASSES.length + class]. */
  readonly requests = new Float64Array(REQUEST_KINDS.length * STATUS_CLASSES.length);
  /** Seconds from a visitor request's arrival to its response head. */
  readonly requestDuration = new Buckets(REQUEST_DURATION_BOUNDS);
  /** Connections to TCP tunnels' ports that became a stream to an agent. */
  tcpConnections = 0;
  /** udp tunnels' datagrams and flows. */
  readonly udp = new UdpCounters();
  /** Agent handshakes by result: READY, MOVE (sent to the direct port) or the refusal's code. */
  readonly handshakes = new Map<string, number>();
  /** Streams ended by a reset, by "by code". */
  readonly resets = new Map<string, number>();
  readonly flushDuration = new Buckets(FLUSH_DURATION_BOUNDS);
  /** Rows the traffic flushes upserted (one per user and day with traffic). */
  flushRows = 0;
  flushErrors = 0;

  /** A visitor request got its response head (or upgrade): `startedAt` is its performance.now() on arrival. */
  request(kind: RequestKind, status: number, startedAt: number): void {
    const cls = status >= 100 && status < 600 ? (status / 100) | 0 : 0;
    this.requests[kind * STATUS_CLASSES.length + cls]!++;
    this.requestDuration.observe((performance.now() - startedAt) / 1000);
  }

  handshake(result: string): void {
    const key = knownCode(result);
    this.handshakes.set(key, (this.handshakes.get(key) ?? 0) + 1);
  }

  reset(by: ResetBy, code: string): void {
    const key = `${by} ${knownCode(code)}`;
    this.resets.set(key, (this.resets.get(key) ?? 0) + 1);
  }

  flushed(seconds: number, rows: number, errors: number): void {
    this.flushDuration.observe(seconds);
    this.flushRows += rows;
    this.flushErrors += errors;
  }
}
