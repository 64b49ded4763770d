/**
 * The edge's plain counters and how the registry renders them: status
 * classes, cumulative buckets with Prometheus's `le` (less than or equal),
 * codes outside the closed lists folded into OTHER.
 */
import { afterEach, expect, test } from "bun:test";
import { Buckets } from "../../src/metrics/buckets.ts";
import { EdgeCounters, HTTP_REQUEST, WEBSOCKET_REQUEST } from "../../src/metrics/edge-counters.ts";
import { createMetrics, type ServerMetrics } from "../../src/metrics/registry.ts";
import { parseExposition, sample } from "../harness/metrics.ts";

let metrics: ServerMetrics | undefined;
afterEach(() => metrics?.stop());

const render = async (edge: EdgeCounters) => {
  metrics = createMetrics({ edge, live: () => undefined, logins: () => ({ failed: 2, throttled: 1 }), auditWriteFailures: () => 3 });
  return parseExposition(await metrics.render());
};

test("a value on a bucket's bound counts in that bucket; the rest in +Inf", () => {
  const b = new Buckets([0.1, 1]);
  for (const v of [0.05, 0.1, 0.5, 1, 7]) b.observe(v);
  expect([...b.counts]).toEqual([2, 2, 1]);
  expect(b.count).toBe(5);
  expect(b.sum).toBeCloseTo(8.65);
});

test("requests by protocol and status class; the histogram cumulative, as Prometheus reads it", async () => {
  const edge = new EdgeCounters();
  const now = performance.now();
  for (const status of [200, 204, 302, 404, 502, 101]) edge.request(HTTP_REQUEST, status, now);
  edge.request(WEBSOCKET_REQUEST, 101, now);
  edge.request(HTTP_REQUEST, 99, now); // no such status class
  const e = await render(edge);
  expect(sample(e, 'burrow_visitor_requests_total{protocol="http",status="2xx"}')).toBe(2);
  expect(sample(e, 'burrow_visitor_requests_total{protocol="http",status="1xx"}')).toBe(1);
  expect(sample(e, 'burrow_visitor_requests_total{protocol="websocket",status="1xx"}')).toBe(1);
  expect(sample(e, 'burrow_visitor_requests_total{protocol="http",status="other"}')).toBe(1);
  expect(e.samples.has('burrow_visitor_requests_total{protocol="websocket",status="other"}')).toBe(false);
  expect(e.samples.has('burrow_visitor_requests_total{protocol="websocket",status="5xx"}')).toBe(true);
  expect(sample(e, "burrow_visitor_request_duration_seconds_count")).toBe(8);
  expect(sample(e, 'burrow_visitor_request_duration_seconds_bucket{le="+Inf"}')).toBe(8);
  // every observation took well under a second: all are in le="1" already, and the buckets never decrease
  expect(sample(e, 'burrow_visitor_request_duration_seconds_bucket{le="1"}')).toBe(8);
  const buckets = [...e.samples].filter(([k]) => k.startsWith("burrow_visitor_request_duration_seconds_bucket")).map(([, v]) => v);
  expect(buckets).toEqual([...buckets].sort((a, b) => a - b));
  expect(sample(e, "burrow_admin_login_failures_total")).toBe(2);
  expect(sample(e, "burrow_admin_logins_throttled_total")).toBe(1);
  expect(sample(e, "burrow_audit_write_failures_total")).toBe(3);
});

test("handshake results and reset codes outside the closed lists count as OTHER: a peer cannot make new series", async () => {
  const edge = new EdgeCounters();
  edge.handshake("READY");
  edge.handshake("AUTH_FAILED");
  edge.handshake("made-up-by-a-peer-1");
  edge.handshake("made-up-by-a-peer-2");
  edge.reset("agent", "UPSTREAM_FAILED");
  edge.reset("agent", "anything the agent wrote");
  const e = await render(edge);
  expect(sample(e, 'burrow_agent_handshakes_total{result="OTHER"}')).toBe(2);
  expect(sample(e, 'burrow_agent_handshakes_total{result="AUTH_FAILED"}')).toBe(1);
  expect(sample(e, 'burrow_streams_reset_total{by="agent",code="UPSTREAM_FAILED"}')).toBe(1);
  expect(sample(e, 'burrow_streams_reset_total{by="agent",code="OTHER"}')).toBe(1);
  expect(e.text).not.toContain("made-up");
});

test("admin requests: a method outside the usual ones is labelled other", async () => {
  metrics = createMetrics({ edge: new EdgeCounters(), live: () => undefined, logins: () => ({ failed: 0, throttled: 0 }), auditWriteFailures: () => 0 });
  metrics.adminRequest("unmatched", "BREW", 404);
  metrics.adminRequest("/api/users/:id", "GET", 200);
  const e = parseExposition(await metrics.render());
  expect(sample(e, 'burrow_admin_requests_total{route="unmatched",method="other",status="404"}')).toBe(1);
  expect(sample(e, 'burrow_admin_requests_total{route="/api/users/:id",method="GET",status="200"}')).toBe(1);
});
