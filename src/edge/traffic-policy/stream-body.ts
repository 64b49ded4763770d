/**
 * A request's body read for the traffic policy actions that need it
 * (request-body.ts) from a stream rather than a connection: an HTTP/2
 * stream (its DATA, ended by END_STREAM), or a mux stream relayed from
 * another node (the body with the framing its head says). What is read is
 * credited to the sender as it is taken, so a body larger than one window
 * still comes; over the limit nothing more is taken, and what follows waits
 * in the stream, uncredited, for whoever forwards it.
 *
 * A stream hands a new handler the bytes it kept, in one loop: a reader
 * that stops within that loop keeps what the loop still hands it (`after`,
 * in order) and lets go of the stream a microtask later, once the loop is
 * over, so that no byte falls between two handlers.
 */
import type { RequestHead } from "../../http/request-head.ts";
import type { H2Stream } from "../../http2/stream.ts";
import type { Stream } from "../../protocol/mux.ts";
import { BodyGatherer, type BodyFailure, type BodyReading, type ReadBody } from "./request-body.ts";

/**
 * A body read from an HTTP/2 stream. `after`: bytes that came once reading
 * stopped, not credited; `ended`: the stream's end came to the reader
 * after it stopped. H2Exchange.start sends raw, then `after`, then the
 * stream's own, and ends the request when it ended.
 */
export interface H2Body extends ReadBody {
  after: Uint8Array[];
  ended: boolean;
}

/** An HTTP/2 stream's body. */
export function readH2Body(stream: H2Stream, head: RequestHead, reading: BodyReading): Promise<H2Body | BodyFailure> {
  const gatherer = new BodyGatherer("stream", head.framing === "length" ? head.length : 0, reading);
  if (!stream.hasBody || gatherer.done) return Promise.resolve({ ...gatherer.finish(), after: [], ended: false });
  return new Promise((resolve) => {
    let read: H2Body | undefined;
    const settle = (out: ReadBody | BodyFailure) => {
      if (read || settled) return;
      settled = true;
      clearTimeout(timer);
      stream.onReset = undefined;
      queueMicrotask(() => {
        stream.onData = undefined;
        stream.onEnd = undefined;
      });
      if (typeof out !== "object" || !("raw" in out)) {
        gatherer.drop();
        return resolve(out);
      }
      read = { ...out, after: [], ended: false };
      resolve(read);
    };
    let settled = false;
    const timer = setTimeout(() => settle("timeout"), reading.timeoutMs);
    stream.onReset = () => settle("gone");
    // set before onData: an end that came with the bytes the stream kept is told after them
    stream.onEnd = () => {
      if (read) read.ended = true;
      else settle(gatherer.finish());
    };
    stream.onData = (chunk) => {
      if (chunk.byteLength === 0) return;
      if (read) return void read.after.push(chunk.slice());
      if (settled) return;
      const taken = gatherer.feed(chunk);
      if (taken === "busy") return settle("busy");
      if (typeof taken === "object") return settle(taken);
      // held here now: the client may send more (the forward sends these on without crediting them again)
      stream.consumed(taken);
      if (gatherer.over) settle(gatherer.finish());
    };
  });
}

/** A relayed stream's body. What came after it (or, over the limit, the rest) is given back to the stream, in front. */
export function readRelayedBody(down: Stream, head: RequestHead, reading: BodyReading): Promise<ReadBody | BodyFailure> {
  const gatherer = new BodyGatherer(head.framing, head.length, reading);
  if (gatherer.done) return Promise.resolve(gatherer.finish());
  return new Promise((resolve) => {
    const after: Uint8Array[] = [];
    let settled = false;
    const settle = (out: ReadBody | BodyFailure) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      if (typeof out !== "object" || !("raw" in out)) gatherer.drop();
      queueMicrotask(() => {
        down.onData = undefined;
        if (down.isClosed) return;
        for (let i = after.length - 1; i >= 0; i--) down.unread(after[i]!);
      });
      resolve(out);
    };
    const timer = setTimeout(() => settle("timeout"), reading.timeoutMs);
    down.whenReset(() => settle("gone"));
    down.onData = (chunk) => {
      if (settled) return void after.push(chunk);
      const taken = gatherer.feed(chunk);
      if (taken === "busy") return settle("busy");
      if (typeof taken === "object") return settle(taken);
      down.consumed(taken);
      if (taken < chunk.byteLength) after.push(chunk.subarray(taken));
      if (gatherer.done) settle(gatherer.finish());
    };
  });
}
