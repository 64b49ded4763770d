/**
 * Chaos: the public port's per-address cap on a host whose TCP table is
 * large. Before it refuses a client at its cap, the edge asks the kernel
 * which connections are still open (edge/kernel-sockets.ts reads and parses
 * all of /proc/net/tcp and tcp6), at most every 50 ms. That table holds
 * every socket of the host (of its network namespace), TIME_WAIT ones
 * included, and anyone can fill it with TIME_WAIT: each connection the
 * server closes first (a 503 over the cap, an ERROR to a bad HELLO) stays
 * there for a minute.
 *
 * Promised (src/edge/visitor-connections.ts on RECONCILE_EVERY_MS: "a read
 * of /proc/net/tcp costs about 1 ms per 10k sockets"; README, "Connections"
 * and its chaos paragraph): under descriptor-exhaustion's idle-request
 * flood the cap holds (at most 256 of 1,000 connections left open, the rest
 * answered 503 and closed, within 10 s) and the server stays under half a
 * core.
 *
 * BUG, hence test.todo. With 30,000 TIME_WAIT sockets in the table
 * (measured on 2 cores):
 * - one establishedPeers() call takes 60-75 ms, about 20 times the
 *   documented cost;
 * - that outlasts RECONCILE_EVERY_MS (50 ms, counted from the start of the
 *   last read), so the throttle never skips a read: every request over the
 *   cap re-reads the whole table. The flood is refused at about 12
 *   connections a second, with the server at 100 % of a core throughout;
 *   after 10 s about 900 of the 1,000 connections are still open (256
 *   admitted, ~120 refused, the rest waiting for an answer).
 * Each refusal (503, then the server closes) adds a TIME_WAIT socket of its
 * own, so a client at its cap can grow the table it makes the server read.
 * Reproduce: `npx bun test --todo test/chaos/large-socket-table.test.ts`
 * (about 15 s), or run test/chaos/descriptor-exhaustion.test.ts within a
 * minute of anything that made ~30,000 short loopback connections (an
 * unpaced handshake-flood.test.ts did): its first two tests fail. Not run
 * by default: the table it fills slows the tests that follow for a minute.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { establishedPeers } from "../../src/edge/kernel-sockets.ts";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { within } from "../harness/wait.ts";

const TABLE = 30_000;

let server: TestServer | undefined;
let agent: TestAgent | undefined;
const flood: Socket[] = [];
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("tunnel ok") });

afterAll(async () => {
  for (const s of flood) s.destroy();
  await agent?.stop();
  await server?.stop();
  upstream.stop(true);
});

/** Sockets in TIME_WAIT (state 06) in the host's table. */
const timeWaits = () =>
  ["/proc/net/tcp", "/proc/net/tcp6"].reduce((n, f) => n + readFileSync(f, "latin1").split("\n").filter((l) => l.trim().split(/\s+/)[3] === "06").length, 0);

/**
 * Short connections to a listener that closes first, until the host holds
 * `n` TIME_WAIT sockets (each stays a minute), from several source
 * addresses (each has its own ephemeral ports); at most 4n connections.
 */
async function fillTable(n: number): Promise<void> {
  const closer = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.end(), data() {} } });
  try {
    let made = 0;
    const one = (from: string) =>
      new Promise<void>((resolve) => {
        const s = connect({ host: "127.0.0.1", port: closer.port, localAddress: from });
        s.on("error", () => resolve());
        s.on("end", () => s.destroy());
        s.on("close", () => resolve());
      });
    while (timeWaits() < n && made < 4 * n) {
      let batch = 0;
      const worker = async (from: string) => {
        for (; batch < 5_000; batch++, made++) await one(from);
      };
      await within(Promise.all(Array.from({ length: 128 }, (_, i) => worker(`127.0.0.${9 + (i % 6)}`))), 30_000, "a batch of connections");
    }
  } finally {
    closer.stop(true);
  }
}

async function cpuShare(pid: number, ms: number): Promise<number> {
  const ticks = () => {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    return Number(f[11]) + Number(f[12]);
  };
  const before = ticks();
  await Bun.sleep(ms); // the span measured
  return (ticks() - before) / (ms / 10);
}

test.todo("with 30,000 TIME_WAIT sockets on the host, a kernel check stays cheap and the per-address cap holds under the idle-request flood", async () => {
  await fillTable(TABLE);
  expect(timeWaits()).toBeGreaterThan(TABLE * 0.9);

  // the documented cost: about 1 ms per 10k sockets (the fastest of three calls, so no warm-up counts)
  const costs: number[] = [];
  for (let i = 0; i < 3; i++) {
    const t0 = performance.now();
    establishedPeers(1);
    costs.push(performance.now() - t0);
  }

  // descriptor-exhaustion's first test, on this host
  server = await startServer();
  const api = await signedIn(server);
  const token = await api.createToken(await api.createUser("steady"));
  agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "steady"] });
  for (let i = 0; i < 1_000; i++) {
    const s = connect({ port: server.edgePort, host: "127.0.0.1", localAddress: "127.0.0.2" });
    s.on("error", () => {});
    s.on("connect", () => s.write(`GET / HTTP/1.1\r\nHost: localhost:${server!.edgePort}\r\n\r\n`));
    flood.push(s);
    if (i % 50 === 49) await Bun.sleep(5); // a breath every 50, as there
  }
  const stillOpen = () => flood.filter((s) => !s.destroyed && !s.closed).length;
  const deadline = Date.now() + 10_000;
  while (stillOpen() > 300 && Date.now() < deadline) await Bun.sleep(50);
  expect(stillOpen()).toBeLessThanOrEqual(300);
  expect(await cpuShare(server.proc.pid, 1_000)).toBeLessThan(0.5);
  const started = performance.now();
  expect(await (await within(tunnelFetch(server.edgePort, "steady", "/"), 2_000, "the tunnel")).text()).toBe("tunnel ok");
  expect(performance.now() - started).toBeLessThan(1_000);
  expect(Math.min(...costs)).toBeLessThan((3 * TABLE) / 10_000);
}, 90_000);
