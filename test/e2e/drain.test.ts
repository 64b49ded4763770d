/**
 * SIGTERM drains: the public ports are let go at once (a server taking over
 * can listen on them straight away), visitor requests in flight finish up to
 * --drain-timeout, and only then are agents told to go and the process exits.
 */
import { expect, test } from "bun:test";
import { refuses } from "../harness/ports.ts";
import { withTunnel } from "../harness/tunnel.ts";
import { within } from "../harness/wait.ts";

/** Resolved when a request reaches the local service. */
let arrived = Promise.withResolvers<void>();

/** The local service: answers after ?ms= milliseconds. */
async function upstream(req: Request): Promise<Response> {
  arrived.resolve();
  const ms = Number(new URL(req.url).searchParams.get("ms") ?? 0);
  await Bun.sleep(ms);
  return new Response(`slept ${ms}`);
}

const slowTunnel = (serverArgs: string[] = []) => withTunnel({ server: { args: serverArgs }, username: "drainer", upstream, args: ["--subdomain", "slow"] });

test("a request in flight when SIGTERM arrives completes, while the public port is already free for a successor", async () => {
  await using tunnel = await slowTunnel();
  const { server } = tunnel;
  arrived = Promise.withResolvers();
  const pending = tunnel.fetch("/?ms=3000");
  await within(arrived.promise, 10_000, "the request to reach the local service"); // it sleeps 3 s there
  server.proc.kill("SIGTERM");
  await server.output.waitFor(/draining visitor requests in_flight=1/, 5_000);
  // the port is let go at once: a successor could listen on it now
  expect(await refuses(server.edgePort)).toBe(true);
  const successor = Bun.listen({ hostname: "127.0.0.1", port: server.edgePort, socket: { data() {} } });
  successor.stop(true);
  const res = await within(pending, 10_000, "the request in flight");
  expect(res.status).toBe(200);
  expect(await res.text()).toBe("slept 3000");
  expect(await within(server.stop(), 10_000, "the server to exit")).toBe(0);
  expect(server.output.text()).not.toContain("drain timeout");
}, 30_000);

test("past --drain-timeout the requests still in flight are cut and the server exits", async () => {
  await using tunnel = await slowTunnel(["--drain-timeout", "1"]);
  const { server } = tunnel;
  // the local service would answer after 30 s; the server, draining for 1 s at most, exits long before
  arrived = Promise.withResolvers();
  const pending = tunnel.fetch("/?ms=30000").then(
    (r) => r.status,
    () => "cut",
  );
  await within(arrived.promise, 10_000, "the request to reach the local service");
  const t0 = Date.now();
  server.proc.kill("SIGTERM");
  expect(await within(server.stop(), 20_000, "the server to exit")).toBe(0);
  expect(Date.now() - t0).toBeLessThan(15_000);
  expect(server.output.text()).toContain("drain timeout: cutting the requests still in flight in_flight=1");
  expect(await within(pending, 5_000, "the cut request to end")).not.toBe(200);
}, 45_000);
