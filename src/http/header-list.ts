/** Header lists for request and response heads, without hop-by-hop headers. */
import type { HeaderList } from "../protocol/messages.ts";

/** Headers that describe one connection, not the message: never forwarded. */
export const HOP_BY_HOP: ReadonlySet<string> = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

export function headerList(headers: Headers, drop: ReadonlySet<string> = new Set()): HeaderList {
  const connectionListed = new Set(
    (headers.get("connection") ?? "")
      .split(",")
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: HeaderList = [];
  for (const [name, value] of headers) {
    const lower = name.toLowerCase();
    if (HOP_BY_HOP.has(lower) || connectionListed.has(lower) || drop.has(lower)) continue;
    if (lower === "set-cookie") continue; // kept apart below: it must not be joined with commas
    out.push([lower, value]);
  }
  for (const cookie of headers.getSetCookie()) out.push(["set-cookie", cookie]);
  return out;
}

export function toHeaders(list: HeaderList): Headers {
  const h = new Headers();
  for (const [name, value] of list) {
    try {
      h.append(name, value);
    } catch {
      // a header the platform refuses (invalid characters) is dropped, not fatal
    }
  }
  return h;
}
