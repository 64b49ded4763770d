/**
 * A visitor's request head as the local service is to read it: the text the
 * edge sent, read (parseRequestHead) for what the agent must know (how the
 * body is framed, whether the connection may carry another request, an
 * upgrade), and changed only where it must: the Host the tunnel asks for
 * (and the request line, for a target that is not in origin form with its
 * path normal: none an edge of this version sends), and a switch the tunnel
 * does not allow taken off (withAllowedSwitch). Header names keep their
 * case and order, the version stays what the visitor spoke, and nothing is
 * added, but on a private tunnel's connection (`burrow connect`): there
 * X-Burrow-User says who the connector is, as the edge vouched, and any
 * field of burrow's the connector sent is dropped.
 */
import { BURROW_FIELD_LINES } from "../../http/burrow-fields.ts";
import { headAsJudged, withHost } from "../../http/head-as-judged.ts";
import { hasBareLf, headTextOf } from "../../http/head-reader.ts";
import { everyField, isRefusal, MAX_REQUEST_FIELDS, parseRequestHead, type RequestHead } from "../../http/request-head.ts";
import { requestHeadOf } from "../../http/request-head-bytes.ts";
import { upgradeAllowed, withoutUpgrade } from "../../http/upgrade.ts";

export interface LocalRequest {
  /** Read for what the agent must know; with every field when it asks to switch (withAllowedSwitch), for the 101's check. */
  head: RequestHead;
  /** The head's bytes, blank line included: one socket write. */
  bytes: Uint8Array;
}

/**
 * A head as read: its text without the blank line, or (read from its bytes,
 * as a kept stream's heads are) its bytes with the blank line, whose text
 * is made only where something reads it (headTextOf).
 */
export interface ReadHead {
  head: RequestHead;
  text: string | undefined;
  bytes?: Uint8Array;
}

/** The text of `read` (its head without the blank line). */
export function textOf(read: ReadHead): string {
  return (read.text ??= headTextOf(read.bytes!));
}

const HEAD_END = "\r\n\r\n";
/** The header a private http tunnel's service reads the connector's username from. */
export const USER_HEADER = "X-Burrow-User";

/**
 * The head as the agent reads it (its path made normal, as routes match
 * it), or why it cannot be read. `headText` is without its blank line; on
 * a private tunnel's connection (`user`), X-Burrow-User is set to `user`
 * last, every field of burrow's the connector sent dropped first.
 */
export function readHead(headText: string, user?: string): ReadHead | string {
  // every field of burrow's the connector sent, in any spelling (X_Burrow_User, x-burrow-user-email: burrow-fields.ts)
  const text = user === undefined ? headText : `${headText.replace(BURROW_FIELD_LINES, "")}\r\n${USER_HEADER}: ${user}`;
  // the one parse of the head on the agent: its fields are read only for a switch (withAllowedSwitch), or when an inspector shows them
  const head = parseRequestHead(text, false);
  if (isRefusal(head)) return `the request head cannot be read: ${head.why}`;
  return { head, text };
}

/**
 * A head that came in a kept stream's bytes (`raw`, its blank line
 * included), read from them without a string (http/request-head-bytes.ts)
 * when it is the common kind; from its text otherwise, as readHead reads
 * OPEN's, and always on a private tunnel's connection (`user`), whose head
 * is edited as text.
 */
export function readHeadBytes(raw: Uint8Array, user?: string): ReadHead | string {
  if (user === undefined) {
    const head = requestHeadOf(raw, false, MAX_REQUEST_FIELDS);
    if (head) return { head, text: undefined, bytes: raw };
  }
  if (hasBareLf(raw)) return "bare-lf";
  return readHead(headTextOf(raw), user);
}

/**
 * The request as the local service is to get it: `text` (the head, without
 * its blank line) as it came, `received` its bytes when at hand, unless
 * something changes. `host`: sent instead of the visitor's Host
 * (--host-header; it was checked when it was given). An edge sends the
 * target in origin form with its path normal; an older server or a
 * connector may not: the head then goes as it was judged
 * (http/head-as-judged.ts), the rule's Host after.
 */
export function localRequest(read: ReadHead, host: string | undefined, received?: Uint8Array): LocalRequest {
  const { head } = read;
  if (head.targetAsSent && (host === undefined || host === head.host)) return { head, bytes: received ?? Buffer.from(`${textOf(read)}${HEAD_END}`, "latin1") };
  const judged = headAsJudged(textOf(read), head);
  const edited = host === undefined ? judged : withHost(judged, host);
  return { head: host === undefined ? head : { ...head, host }, bytes: Buffer.from(`${edited}${HEAD_END}`, "latin1") };
}

/**
 * The head as it goes to a tunnel that allows `allowed` switches: as it
 * is, or, when it asks for another (h2c without --allow-upgrade h2c), as a
 * plain request without it (http/upgrade.ts withoutUpgrade), its request
 * line as it came. The edge takes such a switch off already; a private
 * tunnel's connector's requests it never reads. A head that asks to switch
 * has the rest of its fields read here, once (everyField), and carries
 * them on: the 101's check reads its Sec-WebSocket-Key (exchange.ts).
 */
export function withAllowedSwitch(read: ReadHead, allowed: ReadonlySet<string> | undefined): ReadHead {
  const { head } = read;
  const asked = head.upgrade;
  if (asked === undefined) return read;
  const text = textOf(read);
  everyField(head, text);
  if (upgradeAllowed(asked, allowed)) return read;
  const fields = withoutUpgrade(head.fields);
  const lineEnd = text.indexOf("\r\n");
  let plain = lineEnd < 0 ? text : text.slice(0, lineEnd);
  for (const [name, value] of fields) plain += `\r\n${name}: ${value}`;
  return { head: { ...head, upgrade: undefined, fields, names: fields.map((f) => f[0].toLowerCase()) }, text: plain };
}
