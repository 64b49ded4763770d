/**
 * What the agent's request path tells the inspector, and nothing more: the
 * hooks http.ts and local-http/ call as a request passes. They copy what
 * they keep and return at once; they never hold a chunk back or ask the
 * stream to wait.
 */
import type { HeaderList } from "../../protocol/messages.ts";

/**
 * A head's fields to be read when someone asks (most captures are never
 * looked at): its text, without the blank line, and for a response the
 * method of the request it answers.
 */
export class HeadText {
  constructor(
    readonly text: string,
    /** "request", or the method a response answers. */
    readonly of: string,
  ) {}
}
import type { TunnelView } from "../output.ts";

/** A visitor's request as the inspector captures it: its head as the visitor sent it. */
export interface TappedRequest {
  method: string;
  /** The request target as sent ("/a?b"). */
  path: string;
  /**
   * Header fields in order, names as sent; or how to read them when someone
   * asks: the head's text, or its bytes as they came (blank line included;
   * copied at once, the buffer is the stream's).
   */
  headers: HeaderList | HeadText | Uint8Array;
  /** It asks for a WebSocket (Upgrade: websocket). */
  websocket: boolean;
  /** The visitor's address, "ip:port". */
  remote: string;
  /** The path route that serves it (--route), when one does. */
  route?: string;
  /** When it came (performance.now()), if the caller read the clock already. */
  started?: number;
  /** The session's stream that carried it: what the server's POLICY_PASSED note names it by. */
  stream?: number;
}

/** One request (or WebSocket) as it passes through the agent. */
export interface ExchangeTap {
  /** A piece of the visitor's request body (chunked framing taken off), on its way to the local service. */
  requestChunk(chunk: Uint8Array): void;
  /**
   * The local service's final response head: status and header fields as it
   * sent them, or how to read them when asked: its text, or its bytes as they
   * came (blank line included; copied at once, the buffer is the socket's).
   */
  response(status: number, headers: HeaderList | HeadText | Uint8Array): void;
  /** response() with the head's bytes as a place in a read, src[start, end) (copied at once; no view of them made). */
  responseHeadIn?(status: number, src: Uint8Array, start: number, end: number): void;
  /** A piece of the response body (chunked framing taken off), on its way to the visitor. */
  responseChunk(chunk: Uint8Array): void;
  /** responseChunk() for src[start, end), without a view of it. */
  responseChunkIn?(src: Uint8Array, start: number, end: number): void;
  /** The response is complete (after a 101: the switched connection closed). */
  done(): void;
  /** It ended without a complete response: why, as a short phrase. */
  failed(why: string): void;
  /** After a 101: bytes of the new protocol as they pass, one way or the other. */
  switchedBytes(from: "visitor" | "service", bytes: Uint8Array): void;
}

/** Where the agent reports requests; absent when the inspector is off. */
export interface RequestTaps {
  /** A tap for this request to this tunnel, or undefined when it is not to be captured. */
  begin(tunnel: TunnelView, request: TappedRequest): ExchangeTap | undefined;
}
