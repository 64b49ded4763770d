/**
 * Visitor requests waiting for their response to begin (REPLY, or on a
 * kept stream its first bytes). Each needs a deadline (--response-timeout)
 * and, while it waits, to notice the visitor leaving so the agent can drop
 * the local request. A timer and an abort
 * listener per request show up in profiles at thousands of requests a
 * second, and almost every request is answered within milliseconds; so one
 * sweep every SWEEP_MS looks at what is still waiting and enforces the
 * deadlines.
 */
import type { Stream } from "../protocol/mux.ts";

const SWEEP_MS = 50;

/** The local service gave no response head in time: slow or stuck, not refused. */
export class ResponseTimeout extends Error {
  constructor(readonly timeoutMs: number) {
    super(`it did not answer within ${Math.round(timeoutMs / 1000)} s`);
  }
}

const waiting = new Set<ResponseWait>();
let sweeper: ReturnType<typeof setInterval> | undefined;

function sweep(): void {
  const now = performance.now();
  for (const w of waiting) {
    if (now >= w.deadline) {
      waiting.delete(w);
      // told before the reset, whose listener would otherwise give the reason as a closed tunnel
      w.watch!.timedOut(w.timeoutMs);
      w.stream.reset();
    } else if (w.stream.peerEnded) {
      // the agent ended the stream without a REPLY (a REPLY with FIN is delivered before its FIN):
      // no answer will come, so the visitor need not wait out the deadline
      waiting.delete(w);
      w.watch!.failed("its agent ended the request without an answer");
      w.stream.reset();
    }
  }
  if (waiting.size === 0 && sweeper !== undefined) {
    clearInterval(sweeper);
    sweeper = undefined;
  }
}

/** Told of the response's start: exactly one of these is called, once. */
export interface ReplyWatch {
  /** No response will come: why, as the visitor's page says it. */
  failed(why: string): void;
  timedOut(timeoutMs: number): void;
}

/**
 * The wait for the response to a request on `stream` (its REPLY, or on a
 * kept stream its first bytes), one request at a time, armed again for
 * each request a kept stream carries: the caller calls `answered` when it
 * comes, or `resetBy` when the stream is reset; `watch.timedOut` comes
 * after the timeout, `watch.failed` when the agent ends the stream without
 * an answer. No timer or promise per request: one sweep for all of them.
 */
export class ResponseWait {
  deadline = 0;
  timeoutMs = 0;
  watch: ReplyWatch | undefined;

  constructor(readonly stream: Stream) {}

  arm(timeoutMs: number, watch: ReplyWatch): this {
    this.deadline = performance.now() + timeoutMs;
    this.timeoutMs = timeoutMs;
    this.watch = watch;
    waiting.add(this);
    if (sweeper === undefined) {
      sweeper = setInterval(sweep, SWEEP_MS);
      sweeper.unref();
    }
    return this;
  }

  /** The response began: true if it was still awaited (not timed out or failed). */
  answered(): boolean {
    return waiting.delete(this);
  }

  /** The stream was reset while the response was awaited: the watch is told why. */
  resetBy(code: string): void {
    if (waiting.delete(this)) this.watch!.failed(describeReset(code));
  }
}

/** A reset code in the words of the visitor's page. */
function describeReset(code: string): string {
  const [name, ...rest] = code.split(" ");
  if (name === "UPSTREAM_FAILED") return rest.length ? `the agent could not reach it (${rest.join(" ")})` : "the agent could not reach it";
  return "the tunnel's connection closed";
}
