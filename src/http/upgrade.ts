/**
 * Protocol switches (RFC 9110 §7.8, RFC 6455 §4): which a tunnel lets a
 * request ask for, and whether a service's 101 answers what was asked.
 *
 * After a 101 the connection is a pipe: nothing in it is read as HTTP any
 * more, so no per-request rule (routes, access rules, header rules, the
 * identity headers, the inspector) sees what follows. A switch is therefore
 * passed only for what a tunnel serves knowingly: `websocket`, and the
 * tokens its agent names (--allow-upgrade). Any other Upgrade is taken off
 * the request, which goes on as a plain one; and the pipe opens only after
 * a 101 that answers the request: for a WebSocket, a Sec-WebSocket-Accept
 * made from the visitor's Sec-WebSocket-Key, so a service that answers a
 * bare 101 to anything (the h2c-smuggling class) never opens one.
 *
 * Shared by the edge (visitors' requests, relayed ones) and the agent (the
 * requests it sends its local service, a private tunnel's connectors' too).
 */
import { createHash } from "node:crypto";
import type { HeaderList } from "../protocol/messages.ts";
import { isRefusal, parseRequestHead } from "./request-head.ts";
import type { ParsedHead } from "./response-head.ts";
import { parseHead } from "./response-head.ts";

export const WEBSOCKET = "websocket";
/** RFC 6455 §1.3: the value a WebSocket's Sec-WebSocket-Key is hashed with. */
const WEBSOCKET_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/**
 * What a tunnel lets a request switch to besides `websocket`: tokens in
 * lower case, or "any" where the decision is another node's (a relayed
 * request: the agent's node takes off what its tunnel does not allow).
 */
export type AllowedUpgrades = ReadonlySet<string> | "any" | undefined;

/** The protocol names an Upgrade value lists ("h2c", "websocket"), without versions, lower-cased. */
function protocolNames(upgrade: string): string[] {
  const names: string[] = [];
  for (const item of upgrade.split(",")) {
    const trimmed = item.trim().toLowerCase();
    if (trimmed === "") continue;
    const slash = trimmed.indexOf("/");
    names.push(slash < 0 ? trimmed : trimmed.slice(0, slash));
  }
  return names;
}

/**
 * Whether a request asking to switch to `upgrade` (its Upgrade field) goes
 * on with it: every protocol it names is websocket or one the tunnel allows.
 * A list with any other is taken off whole, not trimmed: what a client
 * offers together it may rely on together.
 */
export function upgradeAllowed(upgrade: string, allowed: AllowedUpgrades): boolean {
  if (upgrade === WEBSOCKET || allowed === "any") return true;
  const names = protocolNames(upgrade);
  if (names.length === 0) return false;
  for (const name of names) if (name !== WEBSOCKET && !allowed?.has(name)) return false;
  return true;
}

/** Request fields that only mean something with a switch: taken off with it. */
export function isUpgradeField(lower: string): boolean {
  return lower === "upgrade" || lower === "http2-settings";
}

/** A Connection value without the options of a switch ("upgrade", "http2-settings"); "" when nothing else is left. */
export function connectionWithoutUpgrade(value: string): string {
  return value
    .split(",")
    .map((t) => t.trim())
    .filter((t) => t !== "" && !isUpgradeField(t.toLowerCase()))
    .join(", ");
}

/**
 * `fields` with the switch taken off: Upgrade and HTTP2-Settings dropped,
 * and their options dropped from Connection (a Connection left empty goes).
 */
export function withoutUpgrade(fields: readonly [string, string][]): [string, string][] {
  const out: [string, string][] = [];
  for (const field of fields) {
    const lower = field[0].toLowerCase();
    if (isUpgradeField(lower)) continue;
    if (lower !== "connection") {
      out.push(field);
      continue;
    }
    const rest = connectionWithoutUpgrade(field[1]);
    if (rest !== "") out.push([field[0], rest]);
  }
  return out;
}

/** An Upgrade or HTTP2-Settings line in a head's text. */
const SWITCH_LINE = /\r\n(?:upgrade|http2-settings)[ \t]*:/i;

/**
 * A request head's text (its blank line included) as it goes on to a
 * tunnel that allows `allowed`: as it came, or without the switch it asks
 * for (withoutUpgrade), its request line as it came. A head that cannot be
 * read goes as it came: its reader refuses it.
 */
export function headAllowedToSwitch(text: string, allowed: AllowedUpgrades): string {
  if (!SWITCH_LINE.test(text)) return text;
  const head = parseRequestHead(text.endsWith("\r\n\r\n") ? text.slice(0, -4) : text);
  if (isRefusal(head) || (head.upgrade !== undefined && upgradeAllowed(head.upgrade, allowed))) return text;
  let out = text.slice(0, text.indexOf("\r\n") + 2);
  for (const [name, value] of withoutUpgrade(head.fields)) out += `${name}: ${value}\r\n`;
  return `${out}\r\n`;
}

/** What a WebSocket server answers a Sec-WebSocket-Key with (RFC 6455 §4.2.2). */
export function websocketAccept(key: string): string {
  return createHash("sha1").update(key + WEBSOCKET_GUID).digest("base64");
}

/** The values of a field, by its lower-case name. */
function valuesOf(fields: readonly [string, string][], lower: string): string[] {
  const out: string[] = [];
  for (const [name, value] of fields) if (name.toLowerCase() === lower) out.push(value);
  return out;
}

/** A response head's every field: a head read for its framing only kept none of them. */
export function responseFields(head: ParsedHead, requestMethod: string): HeaderList {
  const text = head.text ?? (head.bytes ? Buffer.from(head.bytes.buffer, head.bytes.byteOffset, head.bytes.byteLength - 4).toString("latin1") : undefined);
  if (text === undefined) return head.headers;
  const full = parseHead(text, requestMethod, true);
  return typeof full === "string" ? [] : full.headers;
}

/**
 * Why a 101 does not answer a request that asked to switch to `asked` (its
 * Upgrade field, allowed), or undefined when it does: its Upgrade names one
 * protocol the request named; a WebSocket's also carries the
 * Sec-WebSocket-Accept made from the request's one Sec-WebSocket-Key.
 */
export function switchRefusal(asked: string, requestFields: readonly [string, string][], responseHeaders: readonly [string, string][]): string | undefined {
  const chosen = valuesOf(responseHeaders, "upgrade");
  const names = chosen.length === 1 ? protocolNames(chosen[0]!) : [];
  if (names.length !== 1) return "its local service switched protocols without naming one protocol in Upgrade";
  const name = names[0]!;
  if (!protocolNames(asked).includes(name)) return "its local service switched to a protocol the request did not ask for";
  if (name !== WEBSOCKET) return undefined;
  const keys = valuesOf(requestFields, "sec-websocket-key");
  const accepts = valuesOf(responseHeaders, "sec-websocket-accept");
  if (keys.length !== 1 || accepts.length !== 1 || accepts[0] !== websocketAccept(keys[0]!)) {
    return "its local service switched to a WebSocket without the Sec-WebSocket-Accept the request's key asks for";
  }
  return undefined;
}
