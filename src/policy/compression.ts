/**
 * Response compression, for the compress-response action: which coding a
 * response gets (the visitor's Accept-Encoding with its q-values, RFC 9110
 * §12.5.3, against the codings the policy allows), when it gets none, and
 * the compressor the edge streams the body through. Never on a body the
 * service encoded already, on a range (206, or a request that asked for
 * one: the offsets would be the encoded body's), on a response without a
 * body, or one marked `Cache-Control: no-transform`. Each piece of body is
 * flushed through as it comes, so an event stream or a long download is
 * not held back to fill a compression window.
 */
import * as zlib from "node:zlib";

/** What the edge can compress with: gzip, deflate, Brotli and Zstandard (Bun's node:zlib has them all). */
export const CODINGS = ["gzip", "deflate", "br", "zstd"] as const;
export type Coding = (typeof CODINGS)[number];

/** ngrok's default list, burrow's zstd added; `compress` (LZW) is taken in a config but never chosen. */
export const DEFAULT_CODINGS: readonly Coding[] = ["gzip", "deflate", "br", "zstd"];

/** Each coding's q-value in an Accept-Encoding (absent: not acceptable, unless `*` says otherwise). */
function qualities(acceptEncoding: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const part of acceptEncoding.split(",")) {
    const [name, ...params] = part.split(";").map((s) => s.trim().toLowerCase());
    if (!name) continue;
    let q = 1;
    for (const p of params) {
      const m = /^q\s*=\s*([01](?:\.\d{0,3})?)$/.exec(p);
      if (m) q = Math.min(1, Number(m[1]));
    }
    out.set(name === "x-gzip" ? "gzip" : name, q);
  }
  return out;
}

/** The allowed coding the visitor prefers (the highest q above 0; ties in the policy's order), or undefined. */
export function negotiate(acceptEncoding: string | undefined, allowed: readonly Coding[]): Coding | undefined {
  if (!acceptEncoding) return undefined;
  const q = qualities(acceptEncoding);
  const star = q.get("*") ?? 0;
  let best: Coding | undefined;
  let bestQ = 0;
  for (const c of allowed) {
    const value = q.get(c) ?? star;
    if (value > bestQ) [best, bestQ] = [c, value];
  }
  return best;
}

export interface CompressionQuestion {
  method: string;
  header(of: "req" | "res", name: string): string | undefined;
  status: number;
}

/** The coding this response gets, or why none. */
export function compressionFor(q: CompressionQuestion, allowed: readonly Coding[]): { coding: Coding } | { coding?: undefined; why: string; alreadyCompressed?: boolean } {
  const encoding = q.header("res", "content-encoding")?.trim().toLowerCase();
  if (encoding && encoding !== "identity") return { why: `the service encoded it already (${encoding})`, alreadyCompressed: true };
  if (q.method === "HEAD") return { why: "a HEAD response has no body" };
  if (q.status < 200 || q.status === 204 || q.status === 304) return { why: `a ${q.status} has no body` };
  if (q.status === 206 || q.header("res", "content-range") !== undefined || q.header("req", "range") !== undefined) return { why: "a range is never compressed" };
  if (/(^|,)\s*no-transform\s*(,|$)/i.test(q.header("res", "cache-control") ?? "")) return { why: "Cache-Control: no-transform" };
  if (q.header("res", "content-length")?.trim() === "0") return { why: "the body is empty" };
  const coding = negotiate(q.header("req", "accept-encoding"), allowed);
  return coding ? { coding } : { why: "the visitor accepts none of the allowed codings" };
}

/** The response head's changes for a compressed body: no Content-Length, the coding, Vary, a strong ETag made weak. */
export function compressedHead(headers: [string, string][], coding: Coding): [string, string][] {
  const out: [string, string][] = [];
  let vary = false;
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    if (lower === "content-length") continue;
    if (lower === "etag" && !value.startsWith("W/")) out.push([name, `W/${value}`]);
    else if (lower === "vary") {
      vary = true;
      out.push([name, /(^|,)\s*(accept-encoding|\*)\s*(,|$)/i.test(value) ? value : `${value}, Accept-Encoding`]);
    } else out.push([name, value]);
  }
  out.push(["content-encoding", coding]);
  if (!vary) out.push(["vary", "Accept-Encoding"]);
  return out;
}

/** A body compressed as it streams: each push gives back what can be sent now (flushed), end() the rest. */
export interface ResponseCompressor {
  push(chunk: Uint8Array): Promise<Uint8Array>;
  end(): Promise<Uint8Array>;
}

function stream(coding: Coding): zlib.Gzip | zlib.Deflate | zlib.BrotliCompress {
  switch (coding) {
    case "gzip":
      return zlib.createGzip();
    case "deflate":
      return zlib.createDeflate();
    case "br":
      // quality 4: near gzip's speed with a better ratio; 11 (the default) is for files compressed once
      return zlib.createBrotliCompress({ params: { [zlib.constants.BROTLI_PARAM_QUALITY]: 4 } });
    case "zstd":
      return (zlib as unknown as { createZstdCompress(): zlib.Gzip }).createZstdCompress();
  }
}

export function createCompressor(coding: Coding): ResponseCompressor {
  const z = stream(coding);
  let out: Buffer[] = [];
  let failed: Error | undefined;
  z.on("data", (d: Buffer) => out.push(d));
  z.on("error", (e) => (failed = e));
  const take = () => {
    const all = Buffer.concat(out);
    out = [];
    return new Uint8Array(all.buffer, all.byteOffset, all.length);
  };
  return {
    push(chunk) {
      return new Promise((resolve, reject) => {
        z.write(chunk);
        // a sync flush: what the visitor can decode now goes out now
        z.flush(() => (failed ? reject(failed) : resolve(take())));
      });
    },
    end() {
      return new Promise((resolve, reject) => {
        z.once("end", () => (failed ? reject(failed) : resolve(take())));
        z.end();
      });
    },
  };
}
