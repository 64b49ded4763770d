/** The agent reaches the server through a SOCKS5 proxy (Debian's danted), and the handshake declares it. */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { danteAvailable, startDante } from "../harness/dante.ts";

let server: TestServer;
let api: AdminClient;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("via socks") });

async function tokenFor(username: string, settings: Record<string, unknown> = {}) {
  const id = await api.createUser(username, settings);
  return api.createToken(id);
}

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
});

const hasDante = danteAvailable();

test.skipIf(!hasDante)("an agent with --proxy socks5://... tunnels through the proxy", async () => {
  await using proxy = await startDante();
  const token = await tokenFor("socks-user");
  await using agent = await startAgent({
    kind: "http",
    target: upstream.port!,
    server: server.edgeUrl,
    token,
    args: ["--proxy", proxy.url, "--subdomain", "socksy"],
  });
  expect(await proxy.connects()).toEqual([`127.0.0.1:${server.edgePort}`]);
  const res = await tunnelFetch(server.edgePort, "socksy", "/");
  expect(await res.text()).toBe("via socks");
  // through a proxy the agent does not ask for the direct port, which the proxy would not carry
  expect(await server.output.waitFor(/agent connected .*user=socks-user /, 5_000)).toContain("transport=websocket");
  expect(agent.output.text()).not.toContain("direct port");
});

test.skipIf(!hasDante)("ALL_PROXY=socks5://... is used when no --proxy is given", async () => {
  await using proxy = await startDante();
  const token = await tokenFor("socks-env-user");
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, env: { ALL_PROXY: proxy.url } });
  expect(agent.publicUrl).toStartWith("http://");
  expect(await proxy.connects()).toEqual([`127.0.0.1:${server.edgePort}`]);
  expect(await server.output.waitFor(/agent connected .*user=socks-env-user /, 5_000)).toContain("transport=websocket");
});

test.skipIf(!hasDante)("a user who may not use a proxy is refused with PROXY_DENIED, even through SOCKS", async () => {
  await using proxy = await startDante();
  const token = await tokenFor("no-proxy-user", { can_use_proxy: false });
  const { proc, output } = spawnAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--proxy", proxy.url] });
  try {
    expect(await proc.exited).toBe(1);
    expect(output.text()).toContain("PROXY_DENIED");
    expect(await proxy.connects()).toEqual([`127.0.0.1:${server.edgePort}`]);
  } finally {
    proc.kill();
  }
});
