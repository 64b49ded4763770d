/**
 * Protocol switches (the h2c-smuggling class): which Upgrade a tunnel lets
 * through, what is taken off a request that asks for another, and which 101
 * answers what was asked; and burrow's own fields in every spelling, which
 * a reader of some fields is always handed.
 */
import { describe, expect, test } from "bun:test";
import { isBurrowField, isEdgeSetFieldAt } from "../../src/http/burrow-fields.ts";
import { isRefusal, parseRequestHead } from "../../src/http/request-head.ts";
import { ResponseParser } from "../../src/http/response-reader.ts";
import type { ParsedHead } from "../../src/http/response-head.ts";
import { connectionWithoutUpgrade, headAllowedToSwitch, responseFields, switchRefusal, upgradeAllowed, websocketAccept, withoutUpgrade } from "../../src/http/upgrade.ts";

const KEY = "dGhlIHNhbXBsZSBub25jZQ==";
const ACCEPT = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

describe("h2c smuggling: which switch a request may ask for", () => {
  test("websocket always; another token only when the tunnel names it; a list only when it names them all", () => {
    const h2c = new Set(["h2c"]);
    expect(upgradeAllowed("websocket", undefined)).toBe(true);
    expect(upgradeAllowed("WebSocket", undefined)).toBe(true);
    expect(upgradeAllowed("h2c", undefined)).toBe(false);
    expect(upgradeAllowed("foo", h2c)).toBe(false);
    expect(upgradeAllowed("h2c", h2c)).toBe(true);
    expect(upgradeAllowed("h2c/1.0", h2c)).toBe(true);
    expect(upgradeAllowed("h2c, websocket", h2c)).toBe(true);
    expect(upgradeAllowed("websocket, h2c", undefined)).toBe(false);
    expect(upgradeAllowed("websocket, foo", h2c)).toBe(false);
    expect(upgradeAllowed(" , ", h2c)).toBe(false);
    expect(upgradeAllowed("anything", "any")).toBe(true);
  });

  test("what asks for a switch is taken off: Upgrade, HTTP2-Settings, their Connection options", () => {
    expect(
      withoutUpgrade([
        ["Host", "x"],
        ["Connection", "Upgrade, HTTP2-Settings, keep-alive"],
        ["Upgrade", "h2c"],
        ["HTTP2-Settings", "AAMAAABkAAQ"],
        ["X-Other", "1"],
      ]),
    ).toEqual([
      ["Host", "x"],
      ["Connection", "keep-alive"],
      ["X-Other", "1"],
    ]);
    expect(withoutUpgrade([["connection", "upgrade"], ["upgrade", "foo"]])).toEqual([]);
    expect(connectionWithoutUpgrade("close")).toBe("close");
  });

  test("a head is passed as it came when its switch is allowed, and without the switch when not, its request line as it came", () => {
    const head = "GET http://a.example/x HTTP/1.1\r\nHost: a.example\r\nConnection: Upgrade\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMA\r\nX-A: 1\r\n\r\n";
    expect(headAllowedToSwitch(head, new Set(["h2c"]))).toBe(head);
    expect(headAllowedToSwitch(head, undefined)).toBe("GET http://a.example/x HTTP/1.1\r\nHost: a.example\r\nX-A: 1\r\n\r\n");
    // an Upgrade without Connection's option asks for nothing: it goes too
    expect(headAllowedToSwitch("GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", undefined)).toBe("GET / HTTP/1.1\r\nHost: a\r\n\r\n");
    const plain = "GET / HTTP/1.1\r\nHost: a\r\nX-Upgrade-Me: no\r\n\r\n";
    expect(headAllowedToSwitch(plain, undefined)).toBe(plain);
  });
});

describe("h2c smuggling: which 101 answers what was asked", () => {
  const asked: [string, string][] = [
    ["Host", "a"],
    ["Sec-WebSocket-Key", KEY],
  ];

  test("Sec-WebSocket-Accept is RFC 6455's for its sample key", () => {
    expect(websocketAccept(KEY)).toBe(ACCEPT);
  });

  test("a WebSocket's 101 needs the Accept of the request's one key", () => {
    expect(switchRefusal("websocket", asked, [["Upgrade", "websocket"], ["Sec-WebSocket-Accept", ACCEPT]])).toBeUndefined();
    expect(switchRefusal("websocket", asked, [["upgrade", "WebSocket"], ["sec-websocket-accept", ACCEPT]])).toBeUndefined();
    expect(switchRefusal("websocket", asked, [["Upgrade", "websocket"]])).toMatch(/Sec-WebSocket-Accept/);
    expect(switchRefusal("websocket", asked, [["Upgrade", "websocket"], ["Sec-WebSocket-Accept", "x"]])).toMatch(/Sec-WebSocket-Accept/);
    expect(switchRefusal("websocket", asked, [["Upgrade", "websocket"], ["Sec-WebSocket-Accept", ACCEPT], ["Sec-WebSocket-Accept", ACCEPT]])).toMatch(/Sec-WebSocket-Accept/);
    expect(switchRefusal("websocket", [["Host", "a"]], [["Upgrade", "websocket"], ["Sec-WebSocket-Accept", ACCEPT]])).toMatch(/Sec-WebSocket-Accept/);
    expect(switchRefusal("websocket", [...asked, ["Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA=="]], [["Upgrade", "websocket"], ["Sec-WebSocket-Accept", ACCEPT]])).toMatch(/Sec-WebSocket-Accept/);
  });

  test("another protocol's 101 must name one protocol the request named", () => {
    expect(switchRefusal("h2c", [], [["Upgrade", "h2c"]])).toBeUndefined();
    expect(switchRefusal("h2c", [], [])).toMatch(/without naming one protocol/);
    expect(switchRefusal("h2c", [], [["Upgrade", "foo"]])).toMatch(/did not ask for/);
    expect(switchRefusal("h2c", [], [["Upgrade", "h2c, foo"]])).toMatch(/without naming one protocol/);
    expect(switchRefusal("h2c", [], [["Upgrade", "websocket"], ["Sec-WebSocket-Accept", ACCEPT]])).toMatch(/did not ask for/);
    // asked for both: the one it names decides what is checked
    expect(switchRefusal("h2c, websocket", asked, [["Upgrade", "websocket"]])).toMatch(/Sec-WebSocket-Accept/);
  });

  test("a 101 read for its framing only still shows its fields", () => {
    let head: ParsedHead | undefined;
    const parser = new ResponseParser("GET", { head: (h) => (head = h), body: () => {}, end: () => {} }, false);
    parser.push(Buffer.from(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${ACCEPT}\r\n\r\n`));
    expect(head!.headers).toEqual([]);
    expect(responseFields(head!, "GET")).toContainEqual(["Sec-WebSocket-Accept", ACCEPT]);
  });
});

describe("identity headers: burrow's own fields in every spelling", () => {
  test("X-Burrow-* in any case, with _ for -, and nothing else", () => {
    for (const name of ["x-burrow-user", "x_burrow_user", "x-burrow_user-email", "x_burrow-skip-warning", "x-burrow-anything"]) expect(isBurrowField(name)).toBe(true);
    for (const name of ["x-burrow", "x-burrow-", "x-burrowuser", "xx-burrow-user", "y-burrow-user", "x-forwarded-for", "burrow-user"]) expect(isBurrowField(name)).toBe(false);
    const at = (line: string) => isEdgeSetFieldAt(line, 0, line.indexOf(":"));
    for (const line of ["X_BURROW_User: alice", "x-real-ip: 1", "X-Real-IP: 1", "FORWARDED: for=x"]) expect(at(line)).toBe(true);
    for (const line of ["X-Burrow: 1", "X-Real-IPs: 1", "Forwarded-For: 1", "sec-ch-ua: x", "X-Forwarded-For: 1"]) expect(at(line)).toBe(false);
  });

  test("a reader of some fields is handed those the edge takes out whatever their length, and no other", () => {
    const head = parseRequestHead("GET / HTTP/1.1\r\nHost: a\r\nX_Burrow_User: alice\r\nX-Burrow-A-Very-Long-Name-Of-Its-Own: 1\r\nsec-ch-ua: x\r\nX-Real-IP: 6.6.6.6\r\nforwarded: for=x\r\nX-Other-Field: 2", new Set([4]));
    if (isRefusal(head)) throw new Error(head.why);
    expect(head.names).toEqual(["host", "x_burrow_user", "x-burrow-a-very-long-name-of-its-own", "x-real-ip", "forwarded"]);
  });
});
