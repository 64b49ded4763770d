/**
 * Two mux streams joined end to end: what a node does with a stream another
 * node relays to one of its tunnels. Bytes go each way as they come, and
 * credit goes back to the sender only when the other side has sent them on,
 * so a slow visitor or service holds up its own stream, as on one node.
 */
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";

/**
 * `down`: the stream the relaying node opened; `up`: the one opened to the
 * agent. `change` may rewrite the agent's bytes on their way (header rules).
 */
export function joinStreams(down: Stream, up: Stream, change?: (chunk: Uint8Array, emit: (bytes: Uint8Array) => void) => void): void {
  up.onReply = (meta) => down.reply(meta);
  forward(down, up);
  forward(up, down, change);
  down.whenReset((code) => up.reset(code));
  up.whenReset((code) => down.reset(code));
}

function forward(from: Stream, to: Stream, change?: (chunk: Uint8Array, emit: (bytes: Uint8Array) => void) => void): void {
  let owed = 0;
  from.onData = (chunk) => {
    let sent = true;
    if (change) change(chunk, (bytes) => void (sent = to.write(bytes) && sent));
    else sent = to.write(chunk);
    if (sent) from.consumed(chunk.byteLength);
    else owed += chunk.byteLength;
  };
  to.onDrain = () => {
    if (owed === 0) return;
    from.consumed(owed);
    owed = 0;
  };
  from.onEnd = () => to.end();
}

/** A relayed stream that cannot be served here: its tunnel left this node. */
export function refuseRelayed(down: Stream): void {
  down.reset(WireError.UPSTREAM_FAILED);
}
