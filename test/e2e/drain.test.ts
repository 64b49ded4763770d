/**
 * SIGTERM drains: the public ports are let go at once (a server taking over
 * can listen on them straight away), visitor requests in flight finish up to
 * --drain-timeout, and only then are agents told to go and the process exits.
 */
import { expect, test } from "bun:test";
import { connect } from "node:net";
import { withTunnel } from "../harness/tunnel.ts";
import { within } from "../harness/wait.ts";

/** The local service: answers after ?ms= milliseconds. */
async function upstream(req: Request): Promise<Response> {
  const ms = Number(new URL(req.url).searchParams.get("ms") ?? 0);
  await Bun.sleep(ms);
  return new Response(`slept ${ms}`);
}

/** Whether a new TCP connection to the port is refused right now. */
const refuses = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(false)));
    s.once("error", () => resolve(true));
  });

const slowTunnel = (serverArgs: string[] = []) => withTunnel({ server: { args: serverArgs }, username: "drainer", upstream, args: ["--subdomain", "slow"] });

test("a request in flight when SIGTERM arrives completes, while the public port is already free for a successor", async () => {
  await using tunnel = await slowTunnel();
  const { server } = tunnel;
  const pending = tunnel.fetch("/?ms=1500");
  await Bun.sleep(300); // let the request reach the local service; it sleeps 1.5 s there
  server.proc.kill("SIGTERM");
  await server.output.waitFor(/draining visitor requests in_flight=1/, 5_000);
  // the port is let go at once: a successor could listen on it now
  expect(await refuses(server.edgePort)).toBe(true);
  const successor = Bun.listen({ hostname: "127.0.0.1", port: server.edgePort, socket: { data() {} } });
  successor.stop(true);
  const res = await within(pending, 10_000, "the request in flight");
  expect(res.status).toBe(200);
  expect(await res.text()).toBe("slept 1500");
  expect(await within(server.stop(), 10_000, "the server to exit")).toBe(0);
  expect(server.output.text()).not.toContain("drain timeout");
}, 30_000);

test("past --drain-timeout the requests still in flight are cut and the server exits", async () => {
  await using tunnel = await slowTunnel(["--drain-timeout", "1"]);
  const { server } = tunnel;
  const pending = tunnel.fetch("/?ms=8000").then(
    (r) => r.status,
    () => "cut",
  );
  await Bun.sleep(300); // the request is at the local service
  const t0 = Date.now();
  server.proc.kill("SIGTERM");
  expect(await within(server.stop(), 10_000, "the server to exit")).toBe(0);
  expect(Date.now() - t0).toBeLessThan(4_000);
  expect(server.output.text()).toContain("drain timeout: cutting the requests still in flight in_flight=1");
  expect(await within(pending, 5_000, "the cut request to end")).not.toBe(200);
}, 30_000);
