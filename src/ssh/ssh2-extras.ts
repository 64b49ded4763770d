/**
 * Two messages ssh2's server cannot say with words, said here through its
 * packet writer (ssh2 1.x's internals, which this file alone touches): a
 * DISCONNECT with a description, which OpenSSH prints ("Received disconnect
 * from ...: 2: <description>"), and a channel open refused with a
 * description (ssh2's reject() sends none), which OpenSSH prints as "open
 * failed: ... <description>". test/ssh/ holds both to what OpenSSH shows.
 */
import type { Connection } from "ssh2";
// the package's own helpers, a file of the package the server is part of
import utils from "ssh2/lib/protocol/utils.js";

/** SSH_MSG_DISCONNECT's reasons (RFC 4253 §11.1) the gateway gives. */
export const DISCONNECT = { PROTOCOL_ERROR: 2, BY_APPLICATION: 11, TOO_MANY_CONNECTIONS: 12, NO_MORE_AUTH_METHODS_AVAILABLE: 14 } as const;

/** Channel open failures (RFC 4254 §5.1). */
export const OPEN_FAILURE = { ADMINISTRATIVELY_PROHIBITED: 1, CONNECT_FAILED: 2 } as const;

const MESSAGE_DISCONNECT = 1;
/** Descriptions are cut to this: OpenSSH prints 400 characters of one at most. */
const MAX_DESCRIPTION = 400;

interface Internals {
  _sock?: { end(): void; destroy(): void; writable?: boolean };
  _protocol?: {
    _packetRW: { write: { allocStartKEX: number; alloc(length: number, force?: boolean): Buffer; finalize(packet: Buffer, force?: boolean): Buffer } };
    channelOpenFail(recipient: number, reason: number, description?: string): void;
    _burrowOpenFailure?: { reason: number; description: string };
  };
}

/** Text a client's terminal may show: no control characters, no more than it prints. */
function plain(text: string): string {
  return text.replace(/[\x00-\x1f\x7f-\x9f]/g, " ").slice(0, MAX_DESCRIPTION);
}

/** Ends the connection with a DISCONNECT that says why; then its socket ends. */
export function disconnectWith(client: Connection, reason: number, description: string): void {
  const { _protocol: proto, _sock: sock } = client as unknown as Internals;
  try {
    if (proto && sock?.writable !== false) {
      const text = Buffer.from(plain(description), "utf8");
      const length = 1 + 4 + 4 + text.length + 4;
      let p = proto._packetRW.write.allocStartKEX;
      const packet = proto._packetRW.write.alloc(length, true);
      packet[p] = MESSAGE_DISCONNECT;
      packet.writeUInt32BE(reason, ++p);
      packet.writeUInt32BE(text.length, (p += 4));
      packet.set(text, (p += 4));
      packet.writeUInt32BE(0, p + text.length); // no language tag
      utils.sendPacket(proto, proto._packetRW.write.finalize(packet, true), true);
    }
  } catch {
    // the connection is already going: nothing more to say on it
  }
  sock?.end();
}

/**
 * Calls `reject` (ssh2's for a channel open) so that the refusal carries
 * `reason` and `description`. ssh2's reject writes CHANNEL_OPEN_FAILURE at
 * once, so the words are taken by that very call.
 */
export function refuseOpen(client: Connection, reject: () => void, reason: number, description: string): void {
  const proto = (client as unknown as Internals)._protocol;
  if (!proto) return reject();
  if (!Object.hasOwn(proto, "channelOpenFail")) {
    const original = proto.channelOpenFail.bind(proto);
    proto.channelOpenFail = (recipient, fallbackReason, fallback) => {
      const words = proto._burrowOpenFailure;
      proto._burrowOpenFailure = undefined;
      original(recipient, words?.reason ?? fallbackReason, words?.description ?? fallback);
    };
  }
  proto._burrowOpenFailure = { reason, description: plain(description) };
  try {
    reject();
  } finally {
    proto._burrowOpenFailure = undefined;
  }
}
