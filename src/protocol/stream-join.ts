/**
 * Two mux streams joined end to end: a relayed stream and the one opened to
 * the agent (several nodes), or a connector's stream and the one opened to a
 * private tunnel's agent (`burrow connect`). Bytes go each way as they come,
 * and credit goes back to the sender only when the other side has sent them
 * on, so a slow end holds up its own stream only. Datagrams (a udp flow)
 * go on as they come, or are dropped.
 */
import type { Stream } from "./mux.ts";

export interface JoinOptions {
  /** Rewrites the agent's bytes on their way (header rules). */
  change?: (chunk: Uint8Array, emit: (bytes: Uint8Array) => void) => void;
  /** Bytes sent on toward the agent (`up`), and back from it: a tunnel's traffic. */
  countUp?(n: number): void;
  countDown?(n: number): void;
}

/** `down`: the stream that came in; `up`: the one opened to the agent. */
export function joinStreams(down: Stream, up: Stream, options: JoinOptions = {}): void {
  up.onReply = (meta) => down.reply(meta);
  forward(down, up, undefined, options.countUp);
  forward(up, down, options.change, options.countDown);
  // a udp flow's datagrams, each whole, never held: one the other side cannot take is dropped, as UDP drops it
  carryDatagrams(down, up, options.countUp);
  carryDatagrams(up, down, options.countDown);
  down.whenReset((code) => up.reset(code));
  up.whenReset((code) => down.reset(code));
}

function forward(from: Stream, to: Stream, change?: JoinOptions["change"], count?: (n: number) => void): void {
  let owed = 0;
  from.onData = (chunk) => {
    count?.(chunk.byteLength);
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

function carryDatagrams(from: Stream, to: Stream, count?: (n: number) => void): void {
  from.onDatagram = (datagram) => {
    if (to.sendDatagram(datagram)) count?.(datagram.byteLength);
  };
}
