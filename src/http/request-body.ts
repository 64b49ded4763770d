/**
 * Follows a request body by its framing as its bytes pass on their way to a
 * server, to know where it ends (a connection carries the next request only
 * after the whole body) and, for a reader that wants it (the agent's
 * inspector), what it holds without the chunked framing. The bytes
 * themselves are never held or changed here: a piece of data is a subarray
 * of the input, handed on at once.
 */
import { ChunkedDecoder } from "./chunked.ts";
import type { RequestFraming } from "./request-head.ts";

const ignore = (_piece: Uint8Array): void => {};

export class RequestBodyReader {
  private remaining: number;
  private readonly chunked: ChunkedDecoder | undefined;
  /** The body's last byte has passed (at once for a request without one). */
  done: boolean;
  /** Where the body ended in the input that ended it: bytes from here on are not the body's. */
  endedAt = 0;

  constructor(framing: RequestFraming, length: number) {
    this.remaining = framing === "length" ? length : 0;
    this.chunked = framing === "chunked" ? new ChunkedDecoder() : undefined;
    this.done = framing === "none" || (framing === "length" && length === 0);
  }

  /**
   * Reads the next bytes of the body; `data` is given its content (chunk
   * sizes, extensions and trailers taken off). Returns why the body is
   * malformed, if it is. Once `done`, `endedAt` says where in `bytes` it ended.
   */
  feed(bytes: Uint8Array, data: (piece: Uint8Array) => void = ignore): string | undefined {
    if (this.done) {
      this.endedAt = 0;
      return undefined;
    }
    if (this.chunked) {
      const error = this.chunked.feed(bytes, 0, data);
      if (error) return error;
      if (this.chunked.done) {
        this.done = true;
        this.endedAt = this.chunked.endedAt;
      }
      return undefined;
    }
    const take = Math.min(this.remaining, bytes.byteLength);
    data(take === bytes.byteLength ? bytes : bytes.subarray(0, take));
    this.remaining -= take;
    if (this.remaining === 0) {
      this.done = true;
      this.endedAt = take;
    }
    return undefined;
  }
}
