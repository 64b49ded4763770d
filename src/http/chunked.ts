/**
 * Decodes a chunked body (RFC 9112 §7.1) as its bytes arrive, in any split.
 * Chunk data comes out as subarrays of the input, never copied. Sizes are
 * read strictly (hex digits only, bounded), lines must end in CRLF, and a
 * size line or trailer section that keeps growing is an error, so a broken
 * service can neither make two readings of the body possible nor make the
 * decoder hold memory. Extensions are read and dropped; so are trailers,
 * unless the reader asks to keep them (`keepTrailers`: an HTTP/2 stream
 * sends them as a trailing HEADERS frame; HTTP/1.1 passes them on as bytes).
 */

const enum State {
  Size,
  /** After the size: optional whitespace, then extensions or the line end. */
  AfterSize,
  Extension,
  SizeLf,
  Data,
  DataCr,
  DataLf,
  /** At the start of a trailer line, or of the blank line that ends the body. */
  TrailerStart,
  Trailer,
  TrailerLf,
  EndLf,
  Done,
}

const CR = 0x0d;
const LF = 0x0a;
/** 16 hex digits would pass 2^53; no real chunk is near 2^48 bytes. */
const MAX_SIZE_DIGITS = 12;
/** Size plus extensions, per chunk line. */
const MAX_SIZE_LINE = 4096;
const MAX_TRAILER_BYTES = 64 * 1024;

function hexValue(b: number): number {
  if (b >= 0x30 && b <= 0x39) return b - 0x30;
  if (b >= 0x61 && b <= 0x66) return b - 0x61 + 10;
  if (b >= 0x41 && b <= 0x46) return b - 0x41 + 10;
  return -1;
}

/** A control byte other than HTAB: never valid inside a chunk line or trailer. */
const isControl = (b: number) => (b < 0x20 && b !== 0x09) || b === 0x7f;

export class ChunkedDecoder {
  private state = State.Size;
  private size = 0;
  private digits = 0;
  private lineBytes = 0;
  private trailerBytes = 0;
  /** Where the body ended in the last input that finished it: what follows is not part of this response. */
  endedAt = -1;
  /** With `keepTrailers`: the trailer section's lines as they came, each ended by CRLF, once the body is done ("" for none). */
  trailerText: string | undefined;

  /** `keepTrailers`: gather the trailer section (bounded as it is read) into trailerText. */
  constructor(keepTrailers = false) {
    if (keepTrailers) this.trailerText = "";
  }

  get done(): boolean {
    return this.state === State.Done;
  }

  /**
   * Decodes `bytes` from `start`, handing chunk data to `data`. Returns an
   * error reason if the body is malformed; once `done`, `endedAt` is where
   * in `bytes` the body ended.
   */
  feed(bytes: Uint8Array, start: number, data: (piece: Uint8Array) => void): string | undefined {
    let i = start;
    const n = bytes.byteLength;
    while (i < n) {
      switch (this.state) {
        case State.Size: {
          const b = bytes[i]!;
          const v = hexValue(b);
          if (v >= 0) {
            if (++this.digits > MAX_SIZE_DIGITS) return "chunk size too large";
            this.size = this.size * 16 + v;
            this.lineBytes++;
            i++;
            break;
          }
          if (this.digits === 0) return "malformed chunk size";
          this.state = State.AfterSize;
          break;
        }
        case State.AfterSize: {
          const b = bytes[i++]!;
          if (++this.lineBytes > MAX_SIZE_LINE) return "chunk line too long";
          if (b === 0x20 || b === 0x09) break;
          if (b === 0x3b /* ; */) this.state = State.Extension;
          else if (b === CR) this.state = State.SizeLf;
          else return "malformed chunk size";
          break;
        }
        case State.Extension: {
          const b = bytes[i++]!;
          if (++this.lineBytes > MAX_SIZE_LINE) return "chunk line too long";
          if (b === CR) this.state = State.SizeLf;
          else if (isControl(b)) return "malformed chunk extension";
          break;
        }
        case State.SizeLf: {
          if (bytes[i++] !== LF) return "chunk line not ended by CRLF";
          this.lineBytes = 0;
          this.digits = 0;
          this.state = this.size === 0 ? State.TrailerStart : State.Data;
          break;
        }
        case State.Data: {
          const take = Math.min(this.size, n - i);
          data(bytes.subarray(i, i + take));
          this.size -= take;
          i += take;
          if (this.size === 0) this.state = State.DataCr;
          break;
        }
        case State.DataCr:
          if (bytes[i++] !== CR) return "chunk data not followed by CRLF";
          this.state = State.DataLf;
          break;
        case State.DataLf:
          if (bytes[i++] !== LF) return "chunk data not followed by CRLF";
          this.state = State.Size;
          break;
        case State.TrailerStart: {
          const b = bytes[i++]!;
          if (b === CR) this.state = State.EndLf;
          else if (isControl(b)) return "malformed trailer";
          else this.state = State.Trailer;
          if (++this.trailerBytes > MAX_TRAILER_BYTES) return "trailers too large";
          if (this.trailerText !== undefined && b !== CR) this.trailerText += String.fromCharCode(b);
          break;
        }
        case State.Trailer: {
          const b = bytes[i++]!;
          if (++this.trailerBytes > MAX_TRAILER_BYTES) return "trailers too large";
          if (b === CR) this.state = State.TrailerLf;
          else if (isControl(b)) return "malformed trailer";
          // a few short lines when there are any: kept a character at a time
          if (this.trailerText !== undefined) this.trailerText += String.fromCharCode(b);
          break;
        }
        case State.TrailerLf:
          if (bytes[i++] !== LF) return "trailer line not ended by CRLF";
          if (this.trailerText !== undefined) this.trailerText += "\n";
          this.state = State.TrailerStart;
          break;
        case State.EndLf:
          if (bytes[i++] !== LF) return "chunked body not ended by CRLF";
          this.state = State.Done;
          this.endedAt = i;
          return undefined;
        case State.Done:
          this.endedAt = i;
          return undefined;
      }
    }
    return undefined;
  }
}

/** `data` (not empty: a chunk of size 0 ends a body) as one chunk of a chunked body, size line and CRLF around it, in one buffer. */
export function encodeChunk(data: Uint8Array): Uint8Array {
  const size = `${data.byteLength.toString(16)}\r\n`;
  const out = Buffer.allocUnsafe(size.length + data.byteLength + 2);
  out.write(size, 0, "latin1");
  out.set(data, size.length);
  out[out.length - 2] = CR;
  out[out.length - 1] = LF;
  return out;
}

/** The last chunk, and the end of a chunked body without trailers. */
export const LAST_CHUNK: Uint8Array = Buffer.from("0\r\n\r\n", "latin1");
