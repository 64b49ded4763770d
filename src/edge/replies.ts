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

/**
 * The waits the sweep looks at. A wait stays in it from one request to the
 * next on a busy kept stream (answered() only disarms it; the sweep drops
 * the disarmed), so a request costs no set insert and delete.
 */
const waiting = new Set<ResponseWait>();
let sweeper: ReturnType<typeof setInterval> | undefined;
/**
 * The sweeps so far: a wait's age is counted in them rather than read from
 * the clock per request. Sweeps come at least SWEEP_MS apart (later under
 * load), so a wait is timed out no sooner than its timeout.
 */
let sweeps = 0;

function sweep(): void {
  sweeps++;
  for (const w of waiting) {
    if (!w.armed) {
      waiting.delete(w);
      w.listed = false;
    } else if ((sweeps - w.armedAt) * SWEEP_MS > w.timeoutMs) {
      w.disarm();
      // told before the reset, whose listener would otherwise give the reason as a closed tunnel
      w.watch!.timedOut(w.timeoutMs);
      w.stream.reset();
    } else if (w.stream.peerEnded) {
      // the agent ended the stream without a REPLY (a REPLY with FIN is delivered before its FIN):
      // no answer will come, so the visitor need not wait out the deadline
      w.disarm();
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
  /** The sweep it was armed after (its age is counted in sweeps). */
  armedAt = 0;
  timeoutMs = 0;
  watch: ReplyWatch | undefined;
  /** A response is awaited. */
  armed = false;
  /** In the sweep's set (armed, or disarmed since its last look). */
  listed = false;

  constructor(readonly stream: Stream) {}

  arm(timeoutMs: number, watch: ReplyWatch): this {
    // the sweep after this one is the first to count: a wait armed just before a sweep is not a sweep old
    this.armedAt = sweeps + 1;
    this.timeoutMs = timeoutMs;
    this.watch = watch;
    this.armed = true;
    if (!this.listed) {
      this.listed = true;
      waiting.add(this);
    }
    if (sweeper === undefined) {
      sweeper = setInterval(sweep, SWEEP_MS);
      sweeper.unref();
    }
    return this;
  }

  /** @internal No response is awaited any more (the sweep drops it). */
  disarm(): void {
    this.armed = false;
  }

  /** The response began: true if it was still awaited (not timed out or failed). */
  answered(): boolean {
    if (!this.armed) return false;
    this.armed = false;
    return true;
  }

  /** The stream was reset while the response was awaited: the watch is told why. */
  resetBy(code: string): void {
    if (!this.armed) return;
    this.armed = false;
    this.watch!.failed(describeReset(code));
  }
}

/** A reset code in the words of the visitor's page. */
function describeReset(code: string): string {
  const [name, ...rest] = code.split(" ");
  if (name === "UPSTREAM_FAILED") return rest.length ? `the agent could not reach it (${rest.join(" ")})` : "the agent could not reach it";
  return "the tunnel's connection closed";
}
