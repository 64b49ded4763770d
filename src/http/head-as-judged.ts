/**
 * A request head's text as it was judged, for whoever reads it next: the
 * request line in origin form with the path in its normal form
 * (request-path.ts), and an absolute-form target's authority as the Host
 * field (RFC 9112 §3.2.2), so that the next reader cannot route or judge
 * the request by another path or name than the edge and the agent did.
 * Everything else as it came.
 */
import type { RequestHead } from "./request-head.ts";

/** The Host line (one at most: the parser refuses two); header values never hold CR. */
const HOST_LINE = /\r\nhost:[^\r]*/i;

/** `text` (a head without its blank line) as `head` was judged; the same string when it is so already. */
export function headAsJudged(text: string, head: RequestHead): string {
  if (head.targetAsSent) return text;
  const lineEnd = text.indexOf("\r\n");
  const judged = `${head.method} ${head.target} HTTP/1.${head.minor}${lineEnd < 0 ? "" : text.slice(lineEnd)}`;
  return head.absolute && head.host !== undefined ? withHost(judged, head.host) : judged;
}

/** `text` (a head without its blank line) with `host` as its Host: in the field's place, with its name's case, or last when it has none. */
export function withHost(text: string, host: string): string {
  const line = HOST_LINE.exec(text);
  if (!line) return `${text}\r\nHost: ${host}`;
  return `${text.slice(0, line.index)}\r\n${line[0].slice(2, line[0].indexOf(":"))}: ${host}${text.slice(line.index + line[0].length)}`;
}
