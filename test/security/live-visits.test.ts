/**
 * A rule checked once, when a visit came: a raw tcp connection, a
 * WebSocket's pipe and a connector's stream stay open after they were let
 * through, so when an admin narrows the owner's allow_cidrs the edge must
 * judge each of them again by the new IP rules (the 5 s promise), not only
 * the visits that come after. Each test keeps a visit open from 127.0.0.1,
 * sets allow_cidrs to a range without it, and waits for that visit to end.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect as tcpConnect, type Socket } from "node:net";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { startConnector } from "../harness/connector.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { endsWithin } from "../harness/live-visits.ts";

let server: TestServer;
let admin: AdminClient;
const tokens: Record<string, string> = {};
const userIds: Record<string, number> = {};
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, d) => void s.write(d) } });
const wsEcho = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req, srv) => (srv.upgrade(req) ? undefined : new Response("no")),
  websocket: { message: (ws, m) => void ws.send(m) },
});
const children: ReturnType<typeof Bun.spawn>[] = [];
/** The promise: a change reaches what is live within 5 s; ten times that as the liveness bound. */
const WITHIN_MS = 50_000;

beforeAll(async () => {
  server = await startServer();
  admin = await signedIn(server);
  for (const name of ["alice", "bob"]) {
    userIds[name] = await admin.createUser(name);
    tokens[name] = await admin.createToken(userIds[name]!, `${name}-laptop`);
  }
});

afterAll(async () => {
  for (const c of children) c.kill("SIGKILL");
  echo.stop(true);
  wsEcho.stop(true);
  await server?.stop();
});

async function narrow(allow: string[]): Promise<void> {
  const res = await admin.call("PUT", `/api/users/${userIds.alice}`, { allow_cidrs: allow });
  expect(res.status).toBe(200);
}

/** A tcp connection to `port` that echoes: resolves once it answered, with a promise of its close. */
async function heldOpen(port: number): Promise<{ socket: Socket; closed: Promise<void> }> {
  const socket = tcpConnect(port, "127.0.0.1");
  socket.on("error", () => {});
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  const echoed = new Promise<void>((resolve) => socket.once("data", () => resolve()));
  socket.write("ping");
  await echoed;
  return { socket, closed };
}

describe("a rule checked once when a visit came: visits that stay are judged again when an admin narrows the rules", () => {
  test("a raw tcp connection from an address the new allow_cidrs leave out is cut", async () => {
    await using agent = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: tokens.alice! });
    const held = await heldOpen(agent.port!);
    try {
      await narrow(["10.0.0.0/8"]);
      expect(await endsWithin(held.closed, WITHIN_MS)).toBe(true);
    } finally {
      held.socket.destroy();
      await narrow([]);
    }
  }, 90_000);

  test("a connection from an address the new rules still allow goes on", async () => {
    await using agent = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: tokens.alice! });
    const held = await heldOpen(agent.port!);
    try {
      await narrow(["127.0.0.0/8", "::1/128"]);
      // the change has been judged once a new visit meets it: a new connection still passes
      const fresh = await heldOpen(agent.port!);
      fresh.socket.destroy();
      const answered = new Promise<string>((resolve) => held.socket.once("data", (d) => resolve(d.toString())));
      held.socket.write("still here");
      expect(await answered).toBe("still here");
    } finally {
      held.socket.destroy();
      await narrow([]);
    }
  }, 90_000);

  test("a WebSocket's pipe through an http tunnel is cut", async () => {
    await using agent = await startAgent({ kind: "http", target: wsEcho.port!, server: server.edgeUrl, token: tokens.alice! });
    const ws = new WebSocket(`ws://127.0.0.1:${server.edgePort}/`, { headers: { host: `${agent.subdomain}.localhost:${server.edgePort}` } } as any);
    const closed = new Promise<void>((resolve) => ws.addEventListener("close", () => resolve()));
    await new Promise<void>((resolve, reject) => {
      ws.addEventListener("open", () => resolve());
      ws.addEventListener("error", () => reject(new Error("the WebSocket did not open")));
    });
    const echoed = new Promise<void>((resolve) => ws.addEventListener("message", () => resolve(), { once: true }));
    ws.send("ping");
    await echoed;
    try {
      await narrow(["10.0.0.0/8"]);
      expect(await endsWithin(closed, WITHIN_MS)).toBe(true);
    } finally {
      ws.close();
      await narrow([]);
    }
  }, 90_000);

  test("a connector's stream to a private tunnel is cut", async () => {
    await using _agent = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token: tokens.alice!, args: ["--private", "--name", "db", "--share", "bob"] });
    const bob = startConnector({ server: server.edgeUrl, token: tokens.bob!, target: "alice/db" });
    children.push(bob.proc);
    const held = await heldOpen(await bob.port());
    try {
      await narrow(["10.0.0.0/8"]);
      expect(await endsWithin(held.closed, WITHIN_MS)).toBe(true);
    } finally {
      held.socket.destroy();
      bob.proc.kill("SIGKILL");
      await narrow([]);
    }
  }, 90_000);
});
