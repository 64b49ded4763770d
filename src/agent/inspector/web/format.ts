/** Pure helpers for showing captures: sizes, times, bodies as text, JSON, form fields or hex, and curl. */
import type { HeaderList } from "./api.ts";

export function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(n < 10 * 1024 ? 1 : 0)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export function duration(ms: number | null): string {
  if (ms === null) return "…";
  if (ms < 1) return "<1 ms";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
}

/** "14:03:07.123", local time. */
export function clock(iso: string): string {
  const d = new Date(iso);
  const two = (x: number) => String(x).padStart(2, "0");
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}

export function fromBase64(b64: string): Uint8Array {
  const bin = atob(b64);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function toBase64(data: Uint8Array): string {
  let bin = "";
  for (let i = 0; i < data.length; i += 0x8000) bin += String.fromCharCode(...data.subarray(i, i + 0x8000));
  return btoa(bin);
}

export const header = (headers: HeaderList, name: string) => headers.find(([n]) => n.toLowerCase() === name)?.[1];

export type BodyView =
  | { kind: "empty" }
  | { kind: "json"; text: string }
  | { kind: "form"; fields: [string, string][] }
  | { kind: "image"; src: string }
  | { kind: "text"; text: string }
  | { kind: "hex"; text: string };

const IMAGE_TYPES = /^image\/(png|jpeg|gif|webp|avif|bmp|x-icon|vnd\.microsoft\.icon|svg\+xml)$/;

/** Text when the bytes are UTF-8 without binary control characters; undefined otherwise. */
export function asText(data: Uint8Array): string | undefined {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(data);
  } catch {
    return undefined;
  }
  return /[\x00-\x08\x0e-\x1f\x7f]/.test(text) ? undefined : text;
}

/** The best way to show a body of this content type. */
export function viewBody(data: Uint8Array, contentType: string | null): BodyView {
  if (data.length === 0) return { kind: "empty" };
  const type = (contentType ?? "").split(";")[0]!.trim().toLowerCase();
  if (IMAGE_TYPES.test(type)) return { kind: "image", src: `data:${type};base64,${toBase64(data)}` };
  const text = asText(data);
  if (text === undefined) return { kind: "hex", text: hexDump(data) };
  if (type === "application/json" || type.endsWith("+json") || /^\s*[[{]/.test(text)) {
    try {
      return { kind: "json", text: JSON.stringify(JSON.parse(text), null, 2) };
    } catch {
      // not JSON after all: shown as text
    }
  }
  if (type === "application/x-www-form-urlencoded") return { kind: "form", fields: [...new URLSearchParams(text)] };
  return { kind: "text", text };
}

/** Shown at most: a hex dump of megabytes helps nobody and slows the page. */
export const HEX_MAX_BYTES = 64 * 1024;

/** "00000000  48 65 6c 6c 6f 0a ...  |Hello.|", 16 bytes a line. */
export function hexDump(data: Uint8Array): string {
  const lines: string[] = [];
  const end = Math.min(data.length, HEX_MAX_BYTES);
  for (let at = 0; at < end; at += 16) {
    const row = data.subarray(at, Math.min(at + 16, end));
    const hex = [...row].map((b) => b.toString(16).padStart(2, "0"));
    const left = hex.slice(0, 8).join(" ");
    const right = hex.slice(8).join(" ");
    const ascii = [...row].map((b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : ".")).join("");
    lines.push(`${at.toString(16).padStart(8, "0")}  ${left.padEnd(23)}  ${right.padEnd(23)}  |${ascii}|`);
  }
  if (data.length > end) lines.push(`… ${data.length - end} more bytes`);
  return lines.join("\n");
}

/** A single-quoted shell word. */
const quote = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;

/** Headers curl sets for itself, or that would be wrong on the public side. */
const CURL_SKIPS = new Set(["host", "content-length", "connection", "transfer-encoding"]);

/**
 * The request as a curl command to the tunnel's public address. A text body
 * goes in --data-binary; a binary one through printf, byte for byte.
 */
export function curlCommand(base: string, method: string, path: string, headers: HeaderList, body: Uint8Array): string {
  const parts = ["curl"];
  if (method !== "GET" || body.length > 0) parts.push("-X", quote(method));
  parts.push(quote(base.replace(/\/$/, "") + path));
  for (const [name, value] of headers) if (!CURL_SKIPS.has(name.toLowerCase())) parts.push("-H", quote(`${name}: ${value}`));
  if (body.length === 0) return parts.join(" ");
  const text = asText(body);
  if (text !== undefined) return [...parts, "--data-binary", quote(text)].join(" ");
  const escaped = [...body].map((b) => `\\x${b.toString(16).padStart(2, "0")}`).join("");
  return `printf '%b' ${quote(escaped)} | ${[...parts, "--data-binary", "@-"].join(" ")}`;
}

export type StatusClass = "" | "1xx" | "2xx" | "3xx" | "4xx" | "5xx" | "failed" | "pending";

export function statusClass(s: { status: number | null; state: string }): StatusClass {
  if (s.state === "failed" && s.status === null) return "failed";
  if (s.status === null) return "pending";
  return `${Math.floor(s.status / 100)}xx` as StatusClass;
}
