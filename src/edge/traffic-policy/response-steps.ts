/**
 * The order a filtered response keeps (response-filter.ts): each step
 * (a head judged, a piece of body, credit, the end) runs at once while
 * nothing waits, the usual response, without a closure; once one waits (a
 * run's action, a compressor), the steps after it wait their turn, and
 * run at once again when all that waited is done. A step that fails cuts
 * the visitor's connection, and nothing runs after it.
 */
import { log } from "../../log.ts";

/** Where the filtered bytes go: the visitor's connection (forward.ts), or a stream back to another node (cluster). */
export interface Outlet {
  /** Bytes for the visitor, in order; a string is text to send as latin1 (a head's fields). */
  write(bytes: Uint8Array | string): void;
  /** `n` bytes of the agent's are dealt with: their credit goes back once what was written before is taken. */
  credit(n: number): void;
  /** The response went out whole. */
  finished(): void;
  /** The run failed (a bug, a compressor's error): the visitor's connection is cut. */
  broken(why: string): void;
}

export abstract class ResponseSteps {
  /** The last step that waits (a run's action, a compressor), while one does: the steps after it wait their turn. */
  protected tail: Promise<void> | undefined;
  /** Steps queued behind it and not done yet. */
  private behind = 0;
  protected cancelled = false;

  constructor(protected readonly out: Outlet) {}

  /** What the response holds is given back: it is not sent (a step failed). */
  protected abstract releaseHeld(): void;

  /** Runs `step` after everything before it (at once when nothing waits); a failure cuts the connection. */
  protected then(step: () => void | Promise<void>): void {
    if (this.cancelled) return;
    if (this.tail === undefined) {
      let out: void | Promise<void>;
      try {
        out = step();
      } catch (err) {
        return this.fail(err);
      }
      if (out instanceof Promise) this.wait(out);
      return;
    }
    this.wait(this.tail.then(() => (this.cancelled ? undefined : step())));
  }

  /** `step` waits: what comes after it waits for it; once all that waited is done, steps run at once again. */
  protected wait(step: Promise<void>): void {
    this.behind++;
    const tail = step.then(
      () => {
        if (--this.behind === 0 && this.tail === tail) this.tail = undefined;
      },
      (err) => {
        if (--this.behind === 0 && this.tail === tail) this.tail = undefined;
        this.fail(err);
      },
    );
    this.tail = tail;
  }

  protected fail(err: unknown): void {
    if (this.cancelled) return;
    this.cancelled = true;
    this.releaseHeld();
    log.warn("traffic policy's response failed", { err: String(err) });
    this.out.broken("the tunnel's traffic policy could not be applied to the response");
  }
}
