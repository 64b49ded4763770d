/**
 * How the edge reads request bodies for the traffic policy actions that
 * need them (request-body.ts): the limits, and the one budget every body
 * being read at once shares. Apart from the reading itself, so that a
 * tunnel's layers (tunnel-policy.ts) can carry it without importing the
 * connections it reads from.
 */

export interface BodyReading {
  /** --policy-body-limit: the largest body read; a larger one is not. */
  maxBytes: number;
  /** --policy-body-timeout: how long the whole body may take to arrive. */
  timeoutMs: number;
  /** What every body being read holds at once (--policy-body-memory): the response bodies held to be rewritten too. */
  memory: BodyMemory;
  /** --policy-response-body-limit: the largest response body response-body-find-replace rewrites (DEFAULT_RESPONSE_BODY_BYTES when unsaid); a larger one passes unchanged. */
  responseMaxBytes?: number;
  /** --policy-sse-event-limit: the largest event of a text/event-stream response sse-find-replace rewrites (DEFAULT_SSE_EVENT_BYTES when unsaid); a larger one passes unchanged. */
  sseEventMaxBytes?: number;
}

/** --policy-sse-event-limit's default. */
export const DEFAULT_SSE_EVENT_BYTES = 256 * 1024;

/** --policy-response-body-limit's default. */
export const DEFAULT_RESPONSE_BODY_BYTES = 4 * 1024 * 1024;

/** The bytes every body being read holds together, against their cap. */
export class BodyMemory {
  held = 0;
  constructor(readonly max: number) {}

  take(n: number): boolean {
    if (this.held + n > this.max) return false;
    this.held += n;
    return true;
  }

  give(n: number): void {
    this.held = Math.max(0, this.held - n);
  }
}
