/**
 * ngrok's `conn.bytes_in`, `conn.bytes_out` (int) and `conn.server_region`
 * (string) in the engine and the edge's facts: every phase has them, typed
 * as ngrok has them (used as another type: refused at load); a request's
 * and a connection's facts read the counts when a rule reads them, not
 * when the facts were made; the region is this node's unless the visit
 * came from another node, whose meta is read warily (a region that is no
 * region name reads empty, a count that is no count reads 0).
 */
import { describe, expect, test } from "bun:test";
import { connectFacts } from "../../src/edge/traffic-policy/connect.ts";
import { requestFacts } from "../../src/edge/traffic-policy/http-request.ts";
import { nodeRegion, setNodeRegion } from "../../src/edge/traffic-policy/node-region.ts";
import { relayedEnds, relayedRegion } from "../../src/cluster/relayed-doors.ts";
import type { RelayedMeta } from "../../src/protocol/messages.ts";
import { parseRequestHead, isRefusal } from "../../src/http/request-head.ts";
import type { Tunnel } from "../../src/edge/registry.ts";
import { answered, errorsOf, policyOf, requestInput } from "./policy-harness.ts";

const TUNNEL = { id: "t-1", subdomain: "app", protocol: "http", username: "alice" } as unknown as Tunnel;

function head(text: string) {
  const h = parseRequestHead(text);
  if (isRefusal(h)) throw new Error("bad head");
  return h;
}

const ECHO = `
on_http_request:
  - actions:
      - type: custom-response
        config:
          status_code: 200
          body: "\${string(conn.bytes_in)}|\${string(conn.bytes_out)}|\${conn.server_region}"
`;

describe("in the engine", () => {
  test("interpolated from the connection's facts; absent: 0, 0 and empty", async () => {
    const input = requestInput();
    input.conn = { ...input.conn, bytesIn: 1234, bytesOut: 56, serverRegion: "eu" };
    expect(answered(await policyOf(ECHO).run("on_http_request", input))?.body).toBe("1234|56|eu");
    expect(answered(await policyOf(ECHO).run("on_http_request", requestInput()))?.body).toBe("0|0|");
  });

  test("every phase has them, as ints and a string", () => {
    for (const phase of ["on_tcp_connect", "on_http_request", "on_http_response"]) {
      const action = phase === "on_http_response" ? "custom-response, config: { status_code: 403 }" : "deny";
      policyOf(`${phase}:\n  - expressions: ["conn.bytes_in > 1000 && conn.bytes_out + 1 > 1 && conn.server_region.startsWith('eu')"]\n    actions: [{ type: ${action} }]\n`);
    }
  });

  test("used as another type, refused at load", () => {
    for (const wrong of ["conn.bytes_in", "conn.bytes_in > 'x'", "conn.bytes_out.startsWith('1')", "conn.server_region > 3", "size(conn.bytes_out) > 0"]) {
      let errors: ReturnType<typeof errorsOf>;
      try {
        errors = errorsOf(`on_http_request:\n  - expressions: ["${wrong}"]\n    actions: [{ type: deny }]\n`);
      } catch (err) {
        throw new Error(`${wrong}: ${String(err)}`);
      }
      expect(errors.map((e) => e.code)).toContain("CEL_TYPE");
    }
  });
});

describe("the edge's facts", () => {
  const base = { client: "203.0.113.1", clientPort: 5000, serverPort: 80, openedAt: 0, host: "app.example.com", secure: false, head: head("GET / HTTP/1.1\r\nHost: app.example.com") };

  test("the counts as they are when a rule reads them, the node's region unless told another", () => {
    const ends = { socket: {}, bytesIn: 10, bytesOut: 0 };
    const before = nodeRegion();
    setNodeRegion("us-east-1");
    try {
      const facts = requestFacts(TUNNEL, { ...base, ends });
      const connect = connectFacts(TUNNEL, { client: "203.0.113.1", clientPort: 5000, serverPort: 80, ends, host: "app.example.com", protocol: "http" });
      ends.bytesIn = 500;
      ends.bytesOut = 70;
      expect([facts.conn.bytesIn, facts.conn.bytesOut, facts.conn.serverRegion]).toEqual([500, 70, "us-east-1"]);
      expect([connect.conn.bytesIn, connect.conn.bytesOut, connect.conn.serverRegion]).toEqual([500, 70, "us-east-1"]);
      expect(requestFacts(TUNNEL, { ...base, ends, region: "eu" }).conn.serverRegion).toBe("eu");
      expect(requestFacts(TUNNEL, { ...base, region: "" }).conn.serverRegion).toBe("");
      expect(requestFacts(TUNNEL, base).conn.bytesIn).toBe(0);
    } finally {
      setNodeRegion(before);
    }
  });

  test("another node's meta: a region that is no region name reads empty, a count that is no count 0", () => {
    const meta = (extra: Record<string, unknown>) => ({ tunnel: "app", kind: "h1", remote: "203.0.113.1:5000", ...extra }) as unknown as RelayedMeta;
    expect(relayedRegion(meta({ region: "eu-west-1" }))).toBe("eu-west-1");
    for (const region of [undefined, "", "EU", "eu west", "a".repeat(64), 7, { eu: 1 }]) expect(relayedRegion(meta({ region }))).toBe("");
    expect(relayedEnds(meta({ bytesIn: 120, bytesOut: 3 }))).toMatchObject({ bytesIn: 120, bytesOut: 3 });
    for (const n of [undefined, -1, 1.5, "12", Number.MAX_SAFE_INTEGER + 2, Infinity]) expect(relayedEnds(meta({ bytesIn: n, bytesOut: n }))).toMatchObject({ bytesIn: 0, bytesOut: 0 });
    // no local end told (a relayed request): no server address, as before
    expect(relayedEnds(meta({})).socket.localAddress).toBeUndefined();
    expect(relayedEnds(meta({ local: "198.51.100.2:443" })).socket.localAddress).toBe("198.51.100.2");
  });
});
