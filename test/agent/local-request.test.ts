/**
 * The agent's one read of a request head (agent/local-http/request.ts): read
 * for its framing, its fields read only when it asks to switch, once, and
 * carried on for the 101's check; a switch the tunnel does not allow taken
 * off from those fields, as http/upgrade.ts headAllowedToSwitch takes it off
 * a head's text.
 */
import { describe, expect, test } from "bun:test";
import { localRequest, readHead, withAllowedSwitch, type ReadHead } from "../../src/agent/local-http/request.ts";
import { headAllowedToSwitch } from "../../src/http/upgrade.ts";

const read = (text: string): ReadHead => readHead(text) as ReadHead;
const bytesOf = (b: Uint8Array) => Buffer.from(b).toString("latin1");

describe("the agent's one read of a request head", () => {
  test("a plain request is read without its fields, and goes on as it came", () => {
    const r = read("GET /a HTTP/1.1\r\nHost: a\r\nX-A: 1");
    expect(r.head.whole).toBe(false);
    expect(withAllowedSwitch(r, undefined)).toBe(r);
  });

  test("a WebSocket upgrade carries every field on, read once", () => {
    const r = read("GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13");
    const allowed = withAllowedSwitch(r, undefined);
    expect(allowed).toBe(r);
    expect(allowed.head.whole).toBe(true);
    expect(allowed.head.fields).toContainEqual(["Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="]);
  });

  test.each([
    ["GET /x HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings, keep-alive\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQCAAAAAAIAAAAA\r\nX-A:  1 ", undefined],
    ["GET http://b.example/x HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: h2c", "svc:8080"],
    ["GET /x HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: h2c, websocket", undefined],
  ])("a switch the tunnel does not allow is taken off as headAllowedToSwitch takes it off the text: %j", (text, host) => {
    const off = withAllowedSwitch(read(text), undefined);
    expect(off.head.upgrade).toBeUndefined();
    const now = localRequest(off, host);
    // what it was before: the request made first, the switch taken off its bytes, and read again
    const made = bytesOf(localRequest(read(text), host).bytes);
    const taken = headAllowedToSwitch(made, undefined);
    const before = localRequest(read(taken.slice(0, -4)), undefined);
    expect(bytesOf(now.bytes)).toBe(bytesOf(before.bytes));
    expect([now.head.keepAlive, now.head.host]).toEqual([before.head.keepAlive, before.head.host]);
  });
});
