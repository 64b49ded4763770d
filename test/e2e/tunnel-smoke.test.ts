import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let token: string;
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => new Response(`hello from ${new URL(req.url).pathname}`, { headers: { "x-upstream": "yes" } }),
});

beforeAll(async () => {
  server = await startServer();
  const api = await signedIn(server);
  const id = await api.createUser("alice");
  token = await api.createToken(id);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
});

test("an http tunnel carries a request to the local service and back", async () => {
  await using agent = await startAgent({ kind: "http", target: `127.0.0.1:${upstream.port}`, server: server.edgeUrl, token, args: ["--subdomain", "demo"] });
  expect(agent.publicUrl).toBe(`http://demo.localhost:${server.edgePort}`);
  const res = await tunnelFetch(server.edgePort, "demo", "/some/path?q=1");
  expect(res.status).toBe(200);
  expect(res.headers.get("x-upstream")).toBe("yes");
  expect(await res.text()).toBe("hello from /some/path");
  expect(await agent.stop()).toBe(0);
});
