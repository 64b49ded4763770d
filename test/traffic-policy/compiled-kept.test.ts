/**
 * Tunnel policies kept compiled (--policy-compiled-kept): the same policy
 * of the same tunnel, at an agent's next handshake, is the policy compiled
 * before while it is among the most recently used kept; past the cap the
 * least recently used is compiled again.
 */
import { expect, test } from "bun:test";
import { EdgePolicies } from "../../src/edge/traffic-policy/edge-policies.ts";

const A = "on_http_request:\n  - expressions: [\"req.url.path == '/a'\"]\n    actions: [{ type: deny }]\n";
const B = "on_http_request:\n  - expressions: [\"req.url.path == '/b'\"]\n    actions: [{ type: deny }]\n";

test("by default both are kept: each handshake after the first finds its policy compiled", () => {
  const edge = new EdgePolicies("example.com");
  const a = edge.own(A, "a", true, 1);
  const b = edge.own(B, "b", true, 1);
  expect(edge.own(A, "a", true, 1)).toBe(a);
  expect(edge.own(B, "b", true, 1)).toBe(b);
});

test("with one kept, another tunnel's policy puts the first out: it is compiled again; the one kept is not", () => {
  const edge = new EdgePolicies("example.com", { compiledKept: 1 });
  const a = edge.own(A, "a", true, 1);
  const b = edge.own(B, "b", true, 1);
  expect(edge.own(B, "b", true, 1)).toBe(b);
  const again = edge.own(A, "a", true, 1);
  expect(again).not.toBe(a);
  expect(again).not.toBeInstanceOf(Error);
});
