/**
 * A HELLO for several tunnels, on the wire: with `partial`, the edge grants
 * what it can and names each refused tunnel in READY by its index; without
 * it, one refused tunnel refuses the HELLO, as before.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { jsonPayload } from "../../src/protocol/frames.ts";
import { PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { freeRange } from "../harness/ports.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
let token: string;
let holder: TestAgent;
let range: { first: number; last: number };
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });
/** Something else on the first port of the tunnel range: PORT_UNAVAILABLE there. */
let squatter: { stop(closeActive?: boolean): void } | undefined;

beforeAll(async () => {
  range = freeRange(4);
  server = await startServer({ args: ["--tcp-ports", `${range.first}-${range.last}`, "--agent-port", "off"] });
  api = await signedIn(server);
  token = await api.createToken(await api.createUser("partial-user"));
  const other = await api.createToken(await api.createUser("partial-other"));
  holder = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token: other, args: ["--subdomain", "held"] });
  squatter = Bun.listen({ hostname: "0.0.0.0", port: range.first, socket: { data() {} } });
});
afterAll(async () => {
  await holder?.stop();
  squatter?.stop(true);
  await server?.stop();
  upstream.stop(true);
});

const hello = (partial: boolean) =>
  jsonPayload({
    version: PROTOCOL_VERSION,
    token,
    agent: "raw-test",
    partial,
    tunnels: [
      { protocol: "http", subdomain: "held" }, // another user's live tunnel
      { protocol: "http", subdomain: "free-one" },
      { protocol: "tcp", port: range.first }, // taken by a process outside burrow
      { protocol: "http", subdomain: "-bad-" },
    ],
  });

test("partial: READY grants the free tunnel with its index and names the three refused ones with their codes", async () => {
  const answer = await sayHello({ port: server.edgePort, via: "websocket", payload: hello(true), from: "127.0.0.21" });
  expect(answer.type).toBe("READY");
  expect(answer.ready.tunnels).toHaveLength(1);
  expect(answer.ready.tunnels[0]).toMatchObject({ index: 1, protocol: "http", subdomain: "free-one" });
  expect(answer.ready.refused.map((r: { index: number; code: string }) => [r.index, r.code])).toEqual([
    [0, "SUBDOMAIN_TAKEN"],
    [2, "PORT_UNAVAILABLE"],
    [3, "SUBDOMAIN_INVALID"],
  ]);
  for (const r of answer.ready.refused) expect(r.message.length).toBeGreaterThan(0);
});

test("without partial, the same HELLO is refused whole with the first refusal", async () => {
  const answer = await sayHello({ port: server.edgePort, via: "websocket", payload: hello(false), from: "127.0.0.22" });
  expect(answer.type).toBe("ERROR");
  expect(answer.refusal?.code).toBe("SUBDOMAIN_TAKEN");
  expect(answer.ready).toBeUndefined();
});

test("partial with every tunnel refused is an ERROR with the first code, not an empty READY", async () => {
  const payload = jsonPayload({
    version: PROTOCOL_VERSION,
    token,
    partial: true,
    tunnels: [
      { protocol: "http", subdomain: "held" },
      { protocol: "tcp", port: range.first },
    ],
  });
  const answer = await sayHello({ port: server.edgePort, via: "websocket", payload, from: "127.0.0.23" });
  expect(answer.type).toBe("ERROR");
  expect(answer.refusal?.code).toBe("SUBDOMAIN_TAKEN");
});
