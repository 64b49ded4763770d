/**
 * What a request names, read without trusting it: the Host header and the
 * path. Both the admin port and the edge take these from strangers, and
 * `new URL(req.url)` throws on many Host values Bun lets through
 * (`a@b`, `x y`, `[::1`, `%00`, an empty Host, a port past 65535), so
 * nothing here throws: a value that is not well formed is `undefined`,
 * which the caller answers with 400.
 */

export interface ParsedHost {
  /** Lower-cased, without a trailing dot or the port; IPv6 literals keep their brackets. */
  hostname: string;
  port?: number;
}

const MAX_HOST_LENGTH = 255;
/** RFC 3986 reg-name as DNS uses it: labels of letters, digits, '-' and '_', dot-separated, at most 63 each. */
const LABEL = /^[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?$/;
const IPV6_LITERAL = /^\[[0-9a-f:.]{2,45}(?:%25[a-z0-9._~-]+)?\]$/;

/** The Host header split into name and port, or undefined when it is not a valid host[:port]. */
export function parseHost(raw: string | null | undefined): ParsedHost | undefined {
  if (!raw || raw.length > MAX_HOST_LENGTH) return undefined;
  const value = raw.toLowerCase();
  let hostname = value;
  let port: number | undefined;
  const colon = value.lastIndexOf(":");
  if (colon !== -1 && !value.endsWith("]")) {
    const digits = value.slice(colon + 1);
    hostname = value.slice(0, colon);
    if (digits !== "") {
      if (!/^[0-9]{1,5}$/.test(digits)) return undefined;
      port = Number(digits);
      if (port > 65535) return undefined;
    }
  }
  if (hostname.startsWith("[")) return IPV6_LITERAL.test(hostname) ? { hostname, port } : undefined;
  if (hostname.endsWith(".")) hostname = hostname.slice(0, -1);
  if (hostname === "" || !hostname.split(".").every((label) => LABEL.test(label))) return undefined;
  return { hostname, port };
}

/** The path and query of a request, or undefined when its target cannot be read. */
export function requestPath(req: Request): { pathname: string; search: string } | undefined {
  const raw = req.url;
  // Bun leaves the URL relative ("/p") when the Host header is not one it can use
  const url = URL.parse(raw.startsWith("/") ? `http://invalid${raw}` : raw);
  if (!url) return undefined;
  return { pathname: url.pathname, search: url.search };
}

/** The request line's target as the visitor wrote it (`text`: the head as it came, `method` its first word). */
export function targetAsWritten(text: string, method: string): string {
  const end = text.indexOf("\r\n");
  const line = end < 0 ? text : text.slice(0, end);
  return line.slice(method.length + 1, line.length - " HTTP/1.1".length);
}
