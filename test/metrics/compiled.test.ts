/**
 * The compiled executable serves /metrics (prom-client and the process
 * gauges work inside it), /healthz and /readyz, and logs JSON lines.
 */
import { expect, test } from "bun:test";
import { compiledBurrow } from "../harness/compiled.ts";
import { scrape, sample } from "../harness/metrics.ts";
import { startServer } from "../harness/server.ts";

const METRICS_TOKEN = "compiled-metrics-token-42";

test("from the compiled executable: /metrics with the bearer token, /healthz, /readyz, JSON log lines", async () => {
  const binary = await compiledBurrow();
  await using server = await startServer({ executable: binary, args: ["--log-format", "json"], env: { BURROW_METRICS_TOKEN: METRICS_TOKEN } });
  const e = await scrape(server.adminUrl, { Authorization: `Bearer ${METRICS_TOKEN}` });
  expect(sample(e, "burrow_process_resident_memory_bytes")).toBeGreaterThan(0);
  expect(e.samples.has("burrow_event_loop_lag_p99_seconds")).toBe(true);
  expect(e.samples.has('burrow_visitor_requests_total{protocol="http",status="2xx"}')).toBe(true);
  expect(e.samples.has("burrow_visitor_request_duration_seconds_count")).toBe(true);
  expect([...e.samples.keys()].some((k) => k.startsWith("burrow_build_info{version="))).toBe(true);
  expect((await fetch(`${server.adminUrl}/metrics`)).status).toBe(401);
  expect(await (await fetch(`${server.adminUrl}/healthz`)).text()).toBe("ok\n");
  expect(await (await fetch(`${server.adminUrl}/readyz`)).json()).toEqual({ status: "ready" });
  expect(await server.stop()).toBe(0);
  for (const line of server.output.lines.filter((l) => l.trim() !== "")) expect(() => JSON.parse(line), line).not.toThrow();
}, 120_000);
