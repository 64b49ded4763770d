/**
 * A body as its Content-Encoding says to read it (gzip, br, deflate, zstd,
 * or a list of them), for the inspector's decoded view; the raw bytes stay
 * as they were. A cut-off body (captured up to the cap) decodes as far as
 * it goes, and no body inflates past MAX_DECODED_BYTES.
 */
import * as zlib from "node:zlib";
import { MAX_DECODED_BYTES } from "./limits.ts";

export type Decoded = { bytes: Uint8Array; encoding: string } | { error: string; encoding: string };

type Decoder = (input: Uint8Array) => Uint8Array;

const partial = { finishFlush: zlib.constants.Z_SYNC_FLUSH, maxOutputLength: MAX_DECODED_BYTES };
const DECODERS: Record<string, Decoder> = {
  gzip: (b) => zlib.gunzipSync(b, partial),
  "x-gzip": (b) => zlib.gunzipSync(b, partial),
  // "deflate" in HTTP is zlib-wrapped, though some servers send it raw
  deflate: (b) => {
    try {
      return zlib.inflateSync(b, partial);
    } catch {
      return zlib.inflateRawSync(b, partial);
    }
  },
  br: (b) => zlib.brotliDecompressSync(b, { finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH, maxOutputLength: MAX_DECODED_BYTES }),
};
const zstd = (zlib as { zstdDecompressSync?: (b: Uint8Array, o: object) => Uint8Array }).zstdDecompressSync;
if (zstd) DECODERS.zstd = (b) => zstd(b, { maxOutputLength: MAX_DECODED_BYTES });

/** The codings of a Content-Encoding value in the order they were applied; undefined for none or identity. */
export function codings(contentEncoding: string | undefined): string[] | undefined {
  const list = (contentEncoding ?? "")
    .split(",")
    .map((c) => c.trim().toLowerCase())
    .filter((c) => c !== "" && c !== "identity");
  return list.length > 0 ? list : undefined;
}

/** The decoded body, or why there is none; undefined when the body is not encoded. */
export function decodeBody(bytes: Uint8Array, contentEncoding: string | undefined): Decoded | undefined {
  const list = codings(contentEncoding);
  if (!list) return undefined;
  const encoding = list.join(", ");
  let out = bytes;
  // the last coding applied is undone first
  for (const coding of list.reverse()) {
    const decode = DECODERS[coding];
    if (!decode) return { error: `unknown content-encoding ${coding}`, encoding };
    try {
      out = decode(out);
    } catch (err) {
      const code = (err as { code?: string }).code;
      if (code === "ERR_BUFFER_TOO_LARGE" || err instanceof RangeError) return { error: `decoded body larger than ${MAX_DECODED_BYTES / 1024 / 1024} MiB`, encoding };
      return { error: `not valid ${coding}: ${(err as Error).message.split("\n")[0]}`, encoding };
    }
  }
  return { bytes: out, encoding };
}
