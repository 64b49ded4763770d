/**
 * A visitor's request head as the local service is to read it: the text the
 * edge sent, read (parseRequestHead) for what the agent must know (how the
 * body is framed, whether the connection may carry another request, an
 * upgrade), and changed only where it must: the Host the tunnel asks for,
 * and a switch the tunnel does not allow taken off (withAllowedSwitch).
 * Header names keep their case and order, the version stays what the
 * visitor spoke, and nothing is added, but on a private tunnel's connection
 * (`burrow connect`): there X-Burrow-User says who the connector is, as the
 * edge vouched, and any field of burrow's the connector sent is dropped.
 */
import { BURROW_FIELD_LINES } from "../../http/burrow-fields.ts";
import { isRefusal, parseRequestHead, type RequestHead } from "../../http/request-head.ts";
import { headAllowedToSwitch, upgradeAllowed } from "../../http/upgrade.ts";

export interface LocalRequest {
  head: RequestHead;
  /** The head's bytes, blank line included: one socket write. */
  bytes: Uint8Array;
}

const HEAD_END = "\r\n\r\n";
/** The Host line (one at most: the parser refuses two); header values never hold CR. */
const HOST_LINE = /\r\nhost:[^\r]*/i;
/** The header a private http tunnel's service reads the connector's username from. */
export const USER_HEADER = "X-Burrow-User";

/**
 * The request, or why it cannot be sent (a head the agent cannot read is
 * an edge's fault, said in the stream's reset). `host`: sent instead of
 * the visitor's Host (--host-header); it was checked when it was given.
 * `fields` false: the head's fields are not kept (nobody shows them).
 */
export function prepareRequest(text: string, host?: string, fields = true): LocalRequest | string {
  if (!text.endsWith(HEAD_END)) return "the request head does not end with a blank line";
  return prepareHead(text.slice(0, -HEAD_END.length), host, fields);
}

/**
 * prepareHead on a private tunnel's connection: the head with X-Burrow-User
 * set to `user` last, every field of burrow's the connector sent dropped
 * first, in any spelling (X_Burrow_User, x-burrow-user-email: burrow-fields.ts).
 */
export function prepareConnectorHead(headText: string, host: string | undefined, user: string): LocalRequest | string {
  const vouched = `${headText.replace(BURROW_FIELD_LINES, "")}\r\n${USER_HEADER}: ${user}`;
  return prepareHead(vouched, host, false);
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
  const plain = prepareHead(text.slice(0, -HEAD_END.length), undefined, false);
  return typeof plain === "string" ? request : plain;
}

/**
 * prepareRequest for a head read from the stream's bytes: `head` without its
 * blank line, `received` its bytes as they came (blank line included), sent
 * as they are when nothing changes.
 */
export function prepareHead(headText: string, host: string | undefined, fields: boolean, received?: Uint8Array): LocalRequest | string {
  const head = parseRequestHead(headText, fields);
  if (isRefusal(head)) return `the request head cannot be read: ${head.why}`;
  if (host === undefined || host === head.host) return { head, bytes: received ?? Buffer.from(`${headText}${HEAD_END}`, "latin1") };
  const text = `${headText}${HEAD_END}`;
  const line = HOST_LINE.exec(text);
  // the visitor's name for the field is kept ("Host", "host"); a request without one (HTTP/1.0) gets one last
  const edited = line
    ? `${text.slice(0, line.index)}\r\n${line[0].slice(2, line[0].indexOf(":"))}: ${host}${text.slice(line.index + line[0].length)}`
    : `${text.slice(0, -2)}Host: ${host}\r\n\r\n`;
  return { head: { ...head, host }, bytes: Buffer.from(edited, "latin1") };
}
