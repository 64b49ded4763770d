/**
 * A response's rules run in its head (edge/traffic-policy/response-head-rules.ts),
 * without a socket: what they make of the head, and a run that fails (past
 * its cost) answered 500 in the response's place, as the response filter
 * answers it.
 */
import { describe, expect, test } from "bun:test";
import { EDGE_READS } from "../../src/edge/forward.ts";
import { requestFacts } from "../../src/edge/traffic-policy/http-request.ts";
import { LayeredRun } from "../../src/edge/traffic-policy/layered-run.ts";
import { judgeHeadInPlace } from "../../src/edge/traffic-policy/response-head-rules.ts";
import { TunnelPolicy } from "../../src/edge/traffic-policy/tunnel-policy.ts";
import type { Tunnel } from "../../src/edge/registry.ts";
import { parseRequestHead, type RequestHead } from "../../src/http/request-head.ts";
import { framingOf } from "../../src/http/response-head-bytes.ts";
import { loadPolicy, type Policy } from "../../src/policy/index.ts";

const REQUEST = "GET /x HTTP/1.1\r\nHost: t.localhost";
const tunnel = { subdomain: "t", protocol: "http", username: "u" } as unknown as Tunnel;

function layers(text: string, costLimit?: number): TunnelPolicy {
  const policy = loadPolicy(text, costLimit ? { limits: { costLimit } } : {});
  if (Array.isArray(policy)) throw new Error(JSON.stringify(policy));
  return TunnelPolicy.of([], policy as Policy)!;
}

function judged(policy: TunnelPolicy, response: string) {
  const head = parseRequestHead(REQUEST, EDGE_READS) as RequestHead;
  const run = new LayeredRun(requestFacts(tunnel, { client: "127.0.0.1", clientPort: 1, serverPort: 80, openedAt: 0, secure: false, host: "t.localhost", head, text: REQUEST }));
  const bytes = Buffer.from(response, "latin1");
  const parsed = framingOf(bytes, "GET")!;
  expect(parsed).toBeDefined();
  return { change: judgeHeadInPlace(run, policy, parsed, bytes, 0, bytes.length, "GET"), bytes };
}

describe("response rules run in the head", () => {
  test("fields added go before the blank line; a field removed has the head written anew; constant fields need no run", () => {
    const added = judged(layers("on_http_response:\n  - expressions: [\"res.status_code == 200\"]\n    actions: [{ type: add-headers, config: { headers: { x-a: b } } }]\n"), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect(added.change).toMatchObject({ from: added.bytes.length - 2, to: added.bytes.length - 2, put: "x-a: b\r\n", answered: false });
    const known = layers("on_http_response:\n  - actions: [{ type: add-headers, config: { headers: { x-a: b } } }]\n");
    expect(known.responseFields).toBe("x-a: b\r\n");
    const knownChange = judged(known, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").change!;
    expect(knownChange).toMatchObject({ answered: false });
    // the bytes made at load, spliced as they are
    expect(knownChange.put).toBe(known.responseFieldBytes!);
    expect(Buffer.from(knownChange.put as Uint8Array).toString("latin1")).toBe("x-a: b\r\n");
    const removed = judged(layers("on_http_response:\n  - actions: [{ type: remove-headers, config: { headers: [x-secret] } }]\n"), "HTTP/1.1 200 OK\r\nX-Secret: s\r\nContent-Length: 0\r\n\r\n");
    expect(removed.change?.from).toBe(0);
    expect(Buffer.from(removed.change!.put as Uint8Array).toString("latin1")).toBe("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
    expect(judged(layers("on_http_response:\n  - actions: [{ type: remove-headers, config: { headers: [x-secret] } }]\n"), "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n").change).toBeUndefined();
  });

  test("a run past its cost answers 500 in the response's place, never the response with its rules skipped", () => {
    const fields = Array.from({ length: 900 }, (_, i) => `X-${i}: v\r\n`).join("");
    const policy = layers("on_http_response:\n  - expressions: [\"res.headers.exists(k, k == 'nope')\"]\n    actions: [{ type: add-headers, config: { headers: { x-a: b } } }]\n", 100);
    expect(policy.responseInHead).toBe(true);
    const { change } = judged(policy, `HTTP/1.1 200 OK\r\n${fields}Content-Length: 0\r\n\r\n`);
    expect(change?.answered).toBe(true);
    expect(change?.from).toBe(0);
    expect(Buffer.from(change!.put as Uint8Array).toString("latin1")).toStartWith("HTTP/1.1 500 ");
  });
});
