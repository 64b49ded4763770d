/**
 * A response relayed back to another node (cluster/relay.ts) through the
 * tunnel's on_http_response here, where its rules live: the agent's stream
 * (`up`) read with the response parser, its bytes through the policies'
 * filter (response-filter.ts) onto the stream back (`down`). Credit goes
 * back to the agent only once the stream back took what its bytes became,
 * and `down` ends only after the filter sent everything. After a 101 the
 * bytes pass as they come, both ways.
 */
import { ResponseParser } from "../../http/response-reader.ts";
import type { ParsedHead } from "../../http/response-head.ts";
import type { Stream } from "../../protocol/mux.ts";
import { WireError } from "../../protocol/wire.ts";
import type { ResponseFilter } from "./response-filter.ts";
import type { Outlet } from "./response-steps.ts";

/** Takes over `up`'s bytes toward `down` (joinStreams has joined the rest: the request's way, resets, the REPLY). */
export function filterRelayedResponse(
  down: Stream,
  up: Stream,
  method: string,
  filterOf: (out: Outlet) => ResponseFilter,
): void {
  let owed = 0;
  let blocked = false;
  let piping = false;
  let failed = false;
  let pushing = false;
  const fail = () => {
    if (failed) return;
    failed = true;
    filter.cancel();
    down.reset(WireError.CANCELLED);
    up.reset(WireError.CANCELLED);
  };
  const out: Outlet = {
    write(bytes) {
      if (!down.write(typeof bytes === "string" ? Buffer.from(bytes, "latin1") : bytes)) blocked = true;
    },
    credit(n) {
      if (blocked || owed > 0) owed += n;
      else up.consumed(n);
    },
    finished: () => down.end(),
    broken: fail,
  };
  const filter = filterOf(out);
  let response: ParsedHead | undefined;
  const parser = new ResponseParser(method, {
    head: (h) => void (response = h),
    body: (piece) => filter.body(piece),
    end() {
      if (response?.status === 101) piping = true;
      // after the chunk's credit (onData), unless the agent's end ended it (a body read until close)
      else if (!pushing) filter.end();
    },
    raw(bytes, part) {
      if (part === "interim") filter.interim(bytes);
      else if (part === "head") filter.head(response!, bytes);
      else filter.raw(bytes);
    },
  });
  down.onDrain = () => {
    blocked = false;
    if (owed === 0) return;
    const n = owed;
    owed = 0;
    up.consumed(n);
  };
  up.onData = (chunk) => {
    if (failed) return up.consumed(chunk.byteLength);
    if (piping) {
      out.write(chunk);
      return out.credit(chunk.byteLength);
    }
    pushing = true;
    const error = parser.push(chunk);
    pushing = false;
    // a malformed response: the visitor's node refuses it, as it would the agent's; here the stream is cut
    if (error) return fail();
    const end = parser.complete ? parser.endedAt : chunk.byteLength;
    filter.credit(end);
    if (parser.complete && !piping) filter.end();
    if (end < chunk.byteLength) {
      const rest = chunk.subarray(end);
      if (piping) {
        out.write(rest);
        out.credit(rest.byteLength);
      } else up.consumed(rest.byteLength); // past the response's end: not the visitor's
    }
  };
  up.onEnd = () => {
    if (piping) return down.end();
    if (parser.complete) return; // the filter ends `down` once it sent everything
    parser.closed(); // a body read until close ends here, and the filter with it
    if (!parser.complete) fail();
  };
}
