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
 * agent. `reply` may change the agent's REPLY on its way (header rules).
 */
export function joinStreams(down: Stream, up: Stream, reply: (meta: unknown) => unknown = (m) => m): void {
  up.onReply = (meta) => down.reply(reply(meta));
  forward(down, up);
  forward(up, down);
  down.whenReset((code) => up.reset(code));
  up.whenReset((code) => down.reset(code));
}

function forward(from: Stream, to: Stream): void {
  let owed = 0;
  from.onData = (chunk) => {
    if (to.write(chunk)) from.consumed(chunk.byteLength);
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
