/**
 * The peer's SETTINGS (RFC 9113 §6.5.2), checked and applied to what this
 * side sends, on either side of a connection: the HPACK table our encoder
 * may use, the initial window of every stream, the largest frame (up to
 * H2_MAX_FRAME_SENT). SETTINGS_ENABLE_PUSH is checked as the role allows
 * (a client may say 0 or 1, a server only 0); SETTINGS_MAX_CONCURRENT_STREAMS
 * is returned, for a client to open no more streams than that (a server
 * pushes none, so it bounds nothing there); SETTINGS_MAX_HEADER_LIST_SIZE is
 * advisory; settings of unknown ids are ignored, as the RFC asks.
 */
import { H2_MAX_FRAME_SENT } from "./limits.ts";
import type { Http2Role } from "./role.ts";
import type { Sender } from "./sender.ts";
import type { StreamState } from "./stream-state.ts";
import { ConnectionError, DEFAULT_MAX_FRAME_SIZE, ErrorCode, LARGEST_MAX_FRAME_SIZE, MAX_WINDOW, Setting } from "./wire.ts";

/** Applies a SETTINGS payload (not an ACK); returns its SETTINGS_MAX_CONCURRENT_STREAMS when it has one. Throws the ConnectionError a bad one is. */
export function applySettings(payload: Uint8Array, sender: Sender, streams: Iterable<StreamState>, role: Http2Role): number | undefined {
  if (payload.byteLength % 6 !== 0) throw new ConnectionError(ErrorCode.FRAME_SIZE_ERROR, "SETTINGS of a length not a multiple of 6");
  let initialWindow = -1;
  let maxStreams: number | undefined;
  for (let at = 0; at < payload.byteLength; at += 6) {
    const id = (payload[at]! << 8) | payload[at + 1]!;
    const value = ((payload[at + 2]! << 24) | (payload[at + 3]! << 16) | (payload[at + 4]! << 8) | payload[at + 5]!) >>> 0;
    switch (id) {
      case Setting.HEADER_TABLE_SIZE:
        sender.encoder.setPeerTableSize(value);
        break;
      case Setting.ENABLE_PUSH:
        if (value > role.peerEnablePushMax) throw new ConnectionError(ErrorCode.PROTOCOL_ERROR, `SETTINGS_ENABLE_PUSH from a ${role.peer} other than ${role.peerEnablePushMax ? "0 or 1" : "0"}`);
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
