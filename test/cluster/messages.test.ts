/**
 * What a node reads from a NOTIFY payload: the messages nodes send, and for
 * anything else (not JSON, not an object, an unknown kind, a field of the
 * wrong type) the reason it is not one. Pure: no database.
 */
import { expect, test } from "bun:test";
import { readMessage, type Message } from "../../src/cluster/messages.ts";

test("the messages nodes send are read as sent", () => {
  const sent: Message[] = [
    { kind: "close-user", userId: 5, code: "USER_DISABLED", message: "the user was disabled", from: "n1" },
    { kind: "close-token", tokenId: 7, code: "TOKEN_DISABLED", message: "the token was revoked", from: "n1" },
    { kind: "user-access", userId: 5, from: "n2" },
    { kind: "taken", name: "http:demo", sessionId: "s-1", from: "n2" },
    { kind: "login-failed", address: "203.0.113.7", username: "admin", from: "n3" },
    { kind: "login-ok", username: "admin", from: "n3" },
    { kind: "acme-certificate", id: "burrow.test", from: "n1" },
    { kind: "acme-challenge", type: "dns-01", name: "_acme-challenge.burrow.test", value: "v", added: true, from: "n1" },
    { kind: "acme-seen", id: "dns-01 _acme-challenge.burrow.test v", to: "n1", from: "n2" },
    { kind: "pool", name: "api", from: "n2" },
  ];
  for (const m of sent) expect(readMessage(JSON.stringify(m))).toEqual(m);
});

test("a close with a code this version does not know is still a close (a newer node may send one)", () => {
  const m: Message = { kind: "close-token", tokenId: 7, code: "SOME_NEWER_CODE", message: "m", from: "n9" };
  expect(readMessage(JSON.stringify(m))).toEqual(m);
});

test("anything else is no message, with the reason", () => {
  expect(readMessage("not json {")).toEqual({ problem: "not JSON" });
  for (const payload of ["null", "42", '"close-user"', "[]", '{"kind":"close-user"}', '{"kind":"reboot","from":"n1"}', '{"kind":"close-user","userId":"5","code":"X","message":"m","from":"n1"}']) {
    const read = readMessage(payload);
    expect(read, payload).toHaveProperty("problem");
  }
  expect(readMessage('{"kind":"close-user","userId":"5","code":"X","message":"m","from":"n1"}')).toEqual({ problem: expect.stringContaining("userId") });
});
