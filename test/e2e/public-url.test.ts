/**
 * Behind a TLS-terminating proxy the edge listens on plain HTTP and another
 * port; --public-url tells it how visitors really reach it, for the URLs it
 * hands out and the X-Forwarded-Proto it sends.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { burrowCommand } from "../harness/server.ts";
import { withServer, withTunnel, type Rig } from "../harness/tunnel.ts";

/** A server behind a TLS proxy (--public-url https://localhost), with a user's token. */
let rig: Rig;
let seenProto: string | null = null;
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => {
    seenProto = req.headers.get("x-forwarded-proto");
    return new Response("behind a proxy");
  },
});

beforeAll(async () => {
  rig = await withServer({ server: { args: ["--public-url", "https://localhost"] }, username: "proxied" });
});
afterAll(async () => {
  await rig?.close();
  upstream.stop(true);
});

test("the agent is given the public https URL without the edge's own port", async () => {
  await using agent = await rig.startAgent({ kind: "http", target: upstream.port!, args: ["--subdomain", "shop"] });
  expect(agent.publicUrl).toBe("https://shop.localhost");
  const res = await tunnelFetch(rig.server.edgePort, "shop", "/");
  expect(await res.text()).toBe("behind a proxy");
  expect(seenProto).toBe("https");
});

test("behind a TLS proxy, with no certificate of its own, the server offers no direct port and says why", async () => {
  // a direct port would carry in the clear what the agents' WebSocket carries over the proxy's TLS
  const { server } = rig;
  expect(await server.output.waitFor(/admin api listening/, 1_000)).toContain(" agent_port=off");
  expect(server.agentPort).toBeUndefined();
  await server.output.waitFor(/no direct agent port/, 1_000);
  const token = await signedIn(server).then(async (api) => api.createToken(await api.createUser("no-direct")));
  await using agent = await rig.startAgent({ kind: "http", target: upstream.port!, token });
  expect(await server.output.waitFor(/agent connected .*user=no-direct /, 5_000)).toContain("transport=websocket");
  expect(agent.output.text()).not.toMatch(/direct port|reconnecting/);
  expect(await (await tunnelFetch(server.edgePort, agent.subdomain!, "/")).text()).toBe("behind a proxy");
});

test("behind a plain-http proxy (--public-url http://...), agents still move to the direct port", async () => {
  await using plain = await withTunnel({ server: { args: ["--public-url", "http://localhost:8080"] }, username: "plain-proxied", upstream: upstream.port! });
  expect(plain.server.agentPort).toBeGreaterThan(0);
  expect(plain.agent.publicUrl).toBe(`http://${plain.agent.subdomain}.localhost:8080`);
  expect(await plain.server.output.waitFor(/agent connected .*user=plain-proxied /, 5_000)).toContain("transport=direct");
});

test("the panel's server info names the public URL", async () => {
  expect((await rig.api.get("/api/server")).body).toEqual({ domain: "localhost", edge_url: "https://localhost", tcp_host: "localhost" });
});

for (const bad of ["ftp://localhost", "https://elsewhere.example", "https://localhost/path", "not a url"]) {
  test(`--public-url '${bad}' is a usage error (exit 2)`, () => {
    const out = Bun.spawnSync([...burrowCommand(), "server", "--public-url", bad, "--admin-port", "0", "--http-port", "0"], { stderr: "pipe" });
    expect(out.exitCode).toBe(2);
    expect(out.stderr.toString()).toMatch(/^burrow: --public-url/);
  });
}
