import { afterAll, expect, test } from "bun:test";
import { withTunnel } from "../harness/tunnel.ts";

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => new Response(`hello from ${new URL(req.url).pathname}`, { headers: { "x-upstream": "yes" } }),
});
afterAll(() => void upstream.stop(true));

test("an http tunnel carries a request to the local service and back", async () => {
  await using t = await withTunnel({ username: "alice", upstream: `127.0.0.1:${upstream.port}`, args: ["--subdomain", "demo"] });
  expect(t.agent.publicUrl).toBe(`http://demo.localhost:${t.server.edgePort}`);
  const res = await t.fetch("/some/path?q=1");
  expect(res.status).toBe(200);
  expect(res.headers.get("x-upstream")).toBe("yes");
  expect(await res.text()).toBe("hello from /some/path");
  expect(await t.agent.stop()).toBe(0);
});
