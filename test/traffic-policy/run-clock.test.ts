/**
 * The clock a request's policies run on: the wall clock at the moment the
 * edge read the request (edge/wall-clock.ts, from the visit's own reading),
 * as `req.ts.header_received` and `time.now` give it. Through the real
 * server and agent, on a fresh connection and on a kept one, whose later
 * requests must get their own time, not the connection's first.
 */
import { expect, test } from "bun:test";
import { wallClockAt } from "../../src/edge/wall-clock.ts";
import { withPolicy, type Echoed } from "./rig.ts";

const POLICY = `
on_http_request:
  - actions:
      - type: add-headers
        config: { headers: { x-received: "\${req.ts.header_received}", x-now: "\${time.now}" } }
`;

test("the wall clock at a monotonic reading: whole ms, within a few of Date.now()", () => {
  const at = wallClockAt(performance.now());
  expect(Number.isInteger(at)).toBe(true);
  expect(Math.abs(at - Date.now())).toBeLessThan(50);
  // a reading a second ago is a second ago on the wall clock too
  expect(Math.abs(Date.now() - 1000 - wallClockAt(performance.now() - 1000))).toBeLessThan(50);
});

test("each request's run is on the wall clock of its own arrival, on a kept connection too", async () => {
  await using t = await withPolicy(POLICY);
  const before = Date.now();
  // curl's --next: one connection, two requests a moment apart (the second after a pause on the service's side)
  const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", t.url("/first"), "--next", "-sS", t.url("/second")], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  expect(code).toBe(0);
  const after = Date.now();
  // the echo answers with the request it got, one JSON after the other
  const seen = out.split(/(?<=\})(?=\{)/).map((j) => (JSON.parse(j) as Echoed).headers);
  expect(seen).toHaveLength(2);
  for (const h of seen) {
    const received = Date.parse(h["x-received"]!);
    expect(received).toBeGreaterThanOrEqual(before - 1000);
    expect(received).toBeLessThanOrEqual(after + 1000);
    expect(Math.abs(Date.parse(h["x-now"]!) - received)).toBeLessThan(2000);
  }
  expect(Date.parse(seen[1]!["x-received"]!)).toBeGreaterThanOrEqual(Date.parse(seen[0]!["x-received"]!));
}, 30_000);
