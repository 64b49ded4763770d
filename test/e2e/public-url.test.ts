/**
 * Behind a TLS-terminating proxy the edge listens on plain HTTP and another
 * port; --public-url tells it how visitors really reach it, for the URLs it
 * hands out and the X-Forwarded-Proto it sends.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let token: string;
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
  server = await startServer({ args: ["--public-url", "https://localhost"] });
  const api = await signedIn(server);
  const id = await api.createUser("proxied");
  token = await api.createToken(id);
});
afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
});

test("the agent is given the public https URL without the edge's own port", async () => {
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "shop"] });
  expect(agent.publicUrl).toBe("https://shop.localhost");
  const res = await tunnelFetch(server.edgePort, "shop", "/");
  expect(await res.text()).toBe("behind a proxy");
  expect(seenProto).toBe("https");
});

test("the panel's server info names the public URL", async () => {
  const api = await signedIn(server);
  expect((await api.get("/api/server")).body).toEqual({ domain: "localhost", edge_url: "https://localhost", tcp_host: "localhost" });
});

for (const bad of ["ftp://localhost", "https://elsewhere.example", "https://localhost/path", "not a url"]) {
  test(`--public-url '${bad}' is a usage error (exit 2)`, () => {
    const out = Bun.spawnSync([...burrowCommand(), "server", "--public-url", bad, "--admin-port", "0", "--http-port", "0"], { stderr: "pipe" });
    expect(out.exitCode).toBe(2);
    expect(out.stderr.toString()).toMatch(/^burrow: --public-url/);
  });
}
