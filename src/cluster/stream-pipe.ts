/**
 * What a node does with a stream another node relays to one of its
 * tunnels: joined to a stream to the agent (protocol/stream-join.ts).
 */
import type { Stream } from "../protocol/mux.ts";
import { joinStreams as join } from "../protocol/stream-join.ts";
import { WireError } from "../protocol/wire.ts";

/**
 * `down`: the stream the relaying node opened; `up`: the one opened to the
 * agent. `change` may rewrite the agent's bytes on their way (header rules).
 */
export function joinStreams(down: Stream, up: Stream, change?: (chunk: Uint8Array, emit: (bytes: Uint8Array) => void) => void): void {
  join(down, up, { change });
}

/** A relayed stream that cannot be served here: its tunnel left this node. */
export function refuseRelayed(down: Stream): void {
  down.reset(WireError.UPSTREAM_FAILED);
}
