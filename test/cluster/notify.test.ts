/**
 * A node on a real PostgreSQL database (Debian's, private, on loopback) that
 * hears a NOTIFY payload on the cluster's channel that is no message: it logs
 * that, with the reason and only the start of the payload, and goes on
 * acting on the messages that follow.
 */
import { SQL } from "bun";
import { afterAll, beforeAll, expect, test } from "bun:test";
import { SHOWN_PAYLOAD } from "../../src/cluster/messages.ts";
import { signedIn } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const SECRET = "cluster-secret-for-tests-0123456789";
const CHANNEL = "burrow_cluster";

let pg: TestPostgres;
let node: TestServer;
let client: SQL;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

beforeAll(async () => {
  pg = await startPostgres();
  const url = await pg.newDatabase();
  node = await startServer({ args: ["--database", url, "--node-id", "n1", "--cluster-secret", SECRET] });
  client = new SQL(url);
});
afterAll(async () => {
  await client?.close();
  await node?.stop();
  upstream.stop(true);
  await pg?.stop();
});

test("a payload that is no message is logged with why and its start only; the next message is acted on", async () => {
  const api = await signedIn(node);
  const userId = await api.createUser("notified");
  const token = await api.createToken(userId);
  await using agent = await startAgent({ kind: "http", target: upstream.port!, server: node.edgeUrl, token });

  // the right kind with a field of the wrong type, padded far past what a line shows
  const padding = "x".repeat(4_000);
  const from = node.output.lines.length;
  await client`SELECT pg_notify(${CHANNEL}, ${JSON.stringify({ kind: "close-token", tokenId: "not-a-number", code: "TOKEN_DISABLED", message: "m", from: "n9", padding })})`;
  const line = await node.output.waitFor(/cluster message not understood/, 10_000, from);
  expect(line).toContain("tokenId");
  expect(line).toContain("bytes=");
  expect(line).not.toContain(padding.slice(0, SHOWN_PAYLOAD));
  expect(line.length).toBeLessThan(1_000);

  // the listener is still there: a real message from another node closes the token's tunnel here
  const tokenId = (await api.get(`/api/users/${userId}/tokens`)).body[0].id;
  await client`SELECT pg_notify(${CHANNEL}, ${JSON.stringify({ kind: "close-token", tokenId, code: "TOKEN_DISABLED", message: "revoked on n9", from: "n9" })})`;
  await agent.output.waitFor(/TOKEN_DISABLED/, 10_000);
}, 30_000);
