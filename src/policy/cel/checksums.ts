/**
 * ngrok's non-cryptographic hashes: `hash.crc32` (the IEEE polynomial),
 * `hash.crc64` (the ISO polynomial, as Go's hash/crc64 ISO table, which
 * ngrok's documented values are) and `hash.xxhash64` (XXH64, seed 0),
 * each as a function and as a string method, in hex by default or base64,
 * of the big-endian bytes of the sum. CRC-32 and XXH64 are Bun's own;
 * CRC-64/ISO is a table here (nothing kept in node_modules computes it).
 */
import { celFunc, celMethod, CelScalar, type CelFunc } from "@bufbuild/cel";
import { pay } from "./cost.ts";

const { STRING } = CelScalar;

/** Go's crc64.ISO: the reflected polynomial 0xD800000000000000, all ones in and out; kept as two 32-bit halves (no bigint a byte). */
const ISO_HIGH = new Uint32Array(256);
const ISO_LOW = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  let high = 0;
  let low = i;
  for (let bit = 0; bit < 8; bit++) {
    const odd = low & 1;
    low = ((low >>> 1) | ((high & 1) << 31)) >>> 0;
    high = high >>> 1;
    if (odd) high = (high ^ 0xd8000000) >>> 0;
  }
  ISO_HIGH[i] = high;
  ISO_LOW[i] = low;
}

export function crc64Iso(data: Uint8Array): bigint {
  let high = 0xffffffff;
  let low = 0xffffffff;
  for (let i = 0; i < data.length; i++) {
    const index = (low ^ data[i]!) & 0xff;
    low = ((low >>> 8) | ((high & 0xff) << 24)) ^ ISO_LOW[index]!;
    high = (high >>> 8) ^ ISO_HIGH[index]!;
  }
  return (BigInt((high ^ 0xffffffff) >>> 0) << 32n) | BigInt((low ^ 0xffffffff) >>> 0);
}

export function crc32(data: Uint8Array): bigint {
  return BigInt(Bun.hash.crc32(data) >>> 0);
}

export function xxhash64(data: Uint8Array): bigint {
  return Bun.hash.xxHash64(data, 0n);
}

const encoder = new TextEncoder();

/** The sum of `text`'s UTF-8 bytes, written in `format`: its `bytes` big-endian bytes as hex or base64. */
function sum(hash: (data: Uint8Array) => bigint, bytes: number, text: string, format: string): string {
  if (format !== "hex" && format !== "base64") throw new Error(`hash format '${format}' is neither 'hex' nor 'base64'`);
  pay(text.length);
  const value = hash(encoder.encode(text));
  const hex = value.toString(16).padStart(bytes * 2, "0");
  return format === "hex" ? hex : Buffer.from(hex, "hex").toString("base64");
}

export const CHECKSUM_FUNCTIONS: CelFunc[] = (
  [
    ["crc32", crc32, 4],
    ["crc64", crc64Iso, 8],
    ["xxhash64", xxhash64, 8],
  ] as const
).flatMap(([name, hash, bytes]) => [
  celFunc(`hash.${name}`, [STRING], STRING, (s) => sum(hash, bytes, s, "hex")),
  celFunc(`hash.${name}`, [STRING, STRING], STRING, (s, f) => sum(hash, bytes, s, f)),
  celMethod(name, STRING, [], STRING, function () {
    return sum(hash, bytes, this, "hex");
  }),
  celMethod(name, STRING, [STRING], STRING, function (f) {
    return sum(hash, bytes, this, f);
  }),
]);
