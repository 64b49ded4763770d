/**
 * A server's SETTINGS (RFC 9113 §6.5.2), checked and applied to what a
 * client connection sends: the HPACK table our encoder may use, the
 * initial window of every stream, the largest frame (up to
 * H2_MAX_FRAME_SENT); and how many streams it may open at once, which it
 * returns. SETTINGS_ENABLE_PUSH from a server must be 0;
 * SETTINGS_MAX_HEADER_LIST_SIZE is advisory; settings of unknown ids are
 * ignored, as the RFC asks. As peer-settings.ts is for the server's
 * connection.
 */
import type { ClientSender } from "./client-sender.ts";
import type { H2ClientStream } from "./client-stream.ts";
import { H2_MAX_FRAME_SENT } from "./limits.ts";
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, ErrorCode, LARGEST_MAX_FRAME_SIZE, MAX_WINDOW, Setting } from "./wire.ts";

/** Applies a SETTINGS payload (not an ACK); returns its SETTINGS_MAX_CONCURRENT_STREAMS when it has one. Throws the ConnectionError a bad one is. */
export function applyServerSettings(payload: Uint8Array, sender: ClientSender, streams: Iterable<H2ClientStream>): number | undefined {
  if (payload.byteLength % 6 !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS of a length not a multiple of 6");
  let initialWindow = -1;
  let maxStreams: number | undefined;
  for (let at = 0; at < payload.byteLength; at += 6) {
    const setting = (payload[at]! << 8) | payload[at + 1]!;
    const value = ((payload[at + 2]! << 24) | (payload[at + 3]! << 16) | (payload[at + 4]! << 8) | payload[at + 5]!) >>> 0;
    switch (setting) {
      case Setting.HEADER_TABLE_SIZE:
        sender.encoder.setPeerTableSize(value);
        break;
      case Setting.ENABLE_PUSH:
        if (value !== 0) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS_ENABLE_PUSH from a server other than 0");
        break;
      case Setting.MAX_CONCURRENT_STREAMS:
        maxStreams = value;
        break;
      case Setting.INITIAL_WINDOW_SIZE:
        if (value > MAX_WINDOW) throw new ConnectionError(ErrorCode.FLOW_CONTROL_ERROR, "SETTINGS_INITIAL_WINDOW_SIZE past 2^31-1");
        initialWindow = value;
        break;
      case Setting.MAX_FRAME_SIZE:
        if (value < DEFAULT_MAX_FRAME_SIZE || value > LARGEST_MAX_FRAME_SIZE) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, "SETTINGS_MAX_FRAME_SIZE out of range");
        sender.maxFrameSize = Math.min(value, H2_MAX_FRAME_SENT);
        break;
    }
  }
  if (initialWindow >= 0) sender.setInitialWindow(initialWindow, streams);
  return maxStreams;
}
