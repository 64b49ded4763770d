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
import { isRefusal, parseRequestHead, type RequestHead } from "../../http/request-head.ts";
import { headAllowedToSwitch, upgradeAllowed } from "../../http/upgrade.ts";

export interface LocalRequest {
  head: RequestHead;
  /** The head's bytes, blank line included: one socket write. */
  bytes: Uint8Array;
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
export function readHead(headText: string, fields: boolean, user?: string): { head: RequestHead; text: string } | string {
  // every field of burrow's the connector sent, in any spelling (X_Burrow_User, x-burrow-user-email: burrow-fields.ts)
  const text = user === undefined ? headText : `${headText.replace(BURROW_FIELD_LINES, "")}\r\n${USER_HEADER}: ${user}`;
  const head = parseRequestHead(text, fields);
  if (isRefusal(head)) return `the request head cannot be read: ${head.why}`;
  return { head, text };
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
export function localRequest(head: RequestHead, text: string, host: string | undefined, received?: Uint8Array): LocalRequest {
  if (head.targetAsSent && (host === undefined || host === head.host)) return { head, bytes: received ?? Buffer.from(`${text}${HEAD_END}`, "latin1") };
  const judged = headAsJudged(text, head);
  const edited = host === undefined ? judged : withHost(judged, host);
  return { head: host === undefined ? head : { ...head, host }, bytes: Buffer.from(`${edited}${HEAD_END}`, "latin1") };
}

/**
 * The request as it goes to a tunnel that allows `allowed` switches: as it
 * is, or, when it asks for another (h2c without --allow-upgrade h2c), as a
 * plain request without it (http/upgrade.ts). The edge takes such a switch
 * off already; a private tunnel's connector's requests it never reads.
 */
export function withAllowedSwitch(request: LocalRequest, allowed: ReadonlySet<string> | undefined): LocalRequest {
  const asked = request.head.upgrade;
  if (asked === undefined || upgradeAllowed(asked, allowed)) return request;
  const text = headAllowedToSwitch(Buffer.from(request.bytes.buffer, request.bytes.byteOffset, request.bytes.byteLength).toString("latin1"), allowed);
  const plain = readHead(text.slice(0, -HEAD_END.length), false);
  return typeof plain === "string" ? request : localRequest(plain.head, plain.text, undefined);
}
