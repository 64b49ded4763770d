/**
 * Opening a visitor's stream on an agent's connection, or on a link to the
 * node that has the agent (cluster/relay.ts). When the mux refuses, the
 * visitor gets its 502 page or a closed connection as always, and the log
 * says why: the connection closing, too many streams open at once on it, or
 * its stream ids used up (the agent must reconnect to get new ones). Once
 * every 10 s per reason, since a busy agent meets the cap once per visitor.
 */
import { log, quietWarnings } from "../log.ts";
import { OpenRefused, type Mux, type Stream } from "../protocol/mux.ts";

const refused = quietWarnings(10_000);

/** A stream on `mux`, or undefined when it refuses; `fields` name the connection in the log line (session or node). */
export function openStream(mux: Mux, meta: unknown, end: boolean, fields: Record<string, unknown>): Stream | undefined {
  try {
    return mux.open(meta, end);
  } catch (err) {
    if (err instanceof OpenRefused) refused(err.reason, "stream not opened", { ...fields, reason: err.reason, streams: mux.streamCount });
    else log.error("stream not opened", { ...fields, err: String(err) });
    return undefined;
  }
}
