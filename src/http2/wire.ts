/**
 * Every fact of HTTP/2's wire (RFC 9113) that the server connection uses, in
 * one place: the connection preface, the frame header, frame types and
 * flags, settings and error codes, and the protocol's own bounds.
 *
 * A frame is a 9-byte header and its payload:
 *
 *   length u24 | type u8 | flags u8 | R(1) stream u31 | payload
 *
 * all big-endian. Stream 0 is the connection itself (SETTINGS, PING,
 * GOAWAY, its WINDOW_UPDATE); a client opens odd-numbered streams, each a
 * request and its response.
 */

/** What a client sends first, before its SETTINGS (RFC 9113 §3.4). */
export const PREFACE = new Uint8Array(Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1"));

export const FRAME_HEADER_LENGTH = 9;

export const FrameType = {
  DATA: 0x0,
  HEADERS: 0x1,
  PRIORITY: 0x2,
  RST_STREAM: 0x3,
  SETTINGS: 0x4,
  PUSH_PROMISE: 0x5,
  PING: 0x6,
  GOAWAY: 0x7,
  WINDOW_UPDATE: 0x8,
  CONTINUATION: 0x9,
} as const;

export const Flag = {
  /** DATA, HEADERS: the sender's last frame on the stream. */
  END_STREAM: 0x1,
  /** SETTINGS, PING: the answer to the peer's. */
  ACK: 0x1,
  /** HEADERS, CONTINUATION: the field block ends in this frame. */
  END_HEADERS: 0x4,
  /** DATA, HEADERS: a pad length byte first, that many bytes of padding last. */
  PADDED: 0x8,
  /** HEADERS: 5 bytes of priority (RFC 7540's scheme) before the field block. */
  PRIORITY: 0x20,
} as const;

export const Setting = {
  HEADER_TABLE_SIZE: 0x1,
  ENABLE_PUSH: 0x2,
  MAX_CONCURRENT_STREAMS: 0x3,
  INITIAL_WINDOW_SIZE: 0x4,
  MAX_FRAME_SIZE: 0x5,
  MAX_HEADER_LIST_SIZE: 0x6,
  /** RFC 9218: the sender ignores RFC 7540's priorities (so do we: PRIORITY frames are read and dropped). */
  NO_RFC7540_PRIORITIES: 0x9,
} as const;

/** Error codes of RST_STREAM and GOAWAY (RFC 9113 §7). */
export const ErrorCode = {
  NO_ERROR: 0x0,
  PROTOCOL_ERROR: 0x1,
  INTERNAL_ERROR: 0x2,
  FLOW_CONTROL_ERROR: 0x3,
  SETTINGS_TIMEOUT: 0x4,
  STREAM_CLOSED: 0x5,
  FRAME_SIZE_ERROR: 0x6,
  REFUSED_STREAM: 0x7,
  CANCEL: 0x8,
  COMPRESSION_ERROR: 0x9,
  CONNECT_ERROR: 0xa,
  ENHANCE_YOUR_CALM: 0xb,
  INADEQUATE_SECURITY: 0xc,
  HTTP_1_1_REQUIRED: 0xd,
} as const;
export type ErrorCodeValue = (typeof ErrorCode)[keyof typeof ErrorCode];

const ERROR_NAMES = Object.fromEntries(Object.entries(ErrorCode).map(([name, code]) => [code, name])) as Record<number, string>;

/** An error code's name, for logs and reset reasons; an unknown code as its number (a peer may send any). */
export function errorName(code: number): string {
  return ERROR_NAMES[code] ?? `0x${code.toString(16)}`;
}

const TYPE_NAMES = Object.fromEntries(Object.entries(FrameType).map(([name, type]) => [type, name])) as Record<number, string>;

/** "HEADERS stream=1 flags=0x5 length=30", for logs and test titles. */
export function describeFrame(type: number, flags: number, stream: number, length: number): string {
  return `${TYPE_NAMES[type] ?? `type 0x${type.toString(16)}`} stream=${stream} flags=0x${flags.toString(16)} length=${length}`;
}

/** The frame size every peer takes before SETTINGS says otherwise, and the smallest it may say (RFC 9113 §6.5.2). */
export const DEFAULT_MAX_FRAME_SIZE = 16_384;
/** The largest SETTINGS_MAX_FRAME_SIZE a peer may set. */
export const LARGEST_MAX_FRAME_SIZE = 16_777_215;
/** A flow-control window before SETTINGS or WINDOW_UPDATE changes it (RFC 9113 §6.9.2). */
export const DEFAULT_WINDOW = 65_535;
/** No window may grow past this (RFC 9113 §6.9.1): a peer's increment that would is a FLOW_CONTROL_ERROR. */
export const MAX_WINDOW = 2 ** 31 - 1;
/** The HPACK dynamic table both sides start with (RFC 9113 §6.5.2). */
export const DEFAULT_HEADER_TABLE_SIZE = 4_096;
/** Stream ids are 31 bits. */
export const MAX_STREAM_ID = 2 ** 31 - 1;

/** A connection error: the whole connection ends with GOAWAY and this code. */
export class ConnectionError extends Error {
  override name = "ConnectionError";
  constructor(
    readonly code: ErrorCodeValue,
    message: string,
  ) {
    super(message);
  }
}

/** A stream error: the stream ends with RST_STREAM and this code; the connection goes on. */
export class StreamError extends Error {
  override name = "StreamError";
  constructor(
    readonly stream: number,
    readonly code: ErrorCodeValue,
    message: string,
  ) {
    super(message);
  }
}
