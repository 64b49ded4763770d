/**
 * A peer that connects and resets at once (an agent's happy-eyeballs race
 * to `localhost`, a port scanner) can be gone before the listener's open
 * handler runs; Bun then reports no remote address. The direct port must
 * drop such a socket quietly, not throw from open (which logged "agent
 * socket error ... e.startsWith" for every such connection), and keep
 * serving agents.
 */
import { expect, test } from "bun:test";
import { connect } from "node:net";
import { startServer } from "../harness/server.ts";

/** Connects to 127.0.0.1:port and resets the connection (RST) as soon as it is up. */
function connectAndReset(port: number): Promise<void> {
  return new Promise((resolve) => {
    const socket = connect(port, "127.0.0.1", () => {
      (socket as unknown as { resetAndDestroy(): void }).resetAndDestroy();
      resolve();
    });
    socket.on("error", () => resolve());
  });
}

test("connections reset before open leave no error on the direct port", async () => {
  await using server = await startServer();
  const port = server.agentPort!;
  for (let i = 0; i < 200; i++) await connectAndReset(port);
  // a connection made after them is still accepted and served
  await new Promise<void>((resolve, reject) => {
    const socket = connect(port, "127.0.0.1", () => {
      socket.end();
      resolve();
    });
    socket.on("error", reject);
  });
  const ready = await fetch(`${server.adminUrl}/readyz`);
  expect(ready.status).toBe(200);
  await Bun.sleep(200); // let the server write what it would have logged
  const out = server.output.text();
  expect(out).not.toContain("agent socket error");
  expect(out).not.toContain("startsWith");
}, 30_000);
