/**
 * Chaos: the public port's per-address cap on a host whose TCP table is
 * large. The table holds every socket of the host (of its network
 * namespace), TIME_WAIT ones included, and anyone can fill it with
 * TIME_WAIT: each connection the server closes first (a 503 over the cap,
 * an ERROR to a bad HELLO) stays there for a minute. The edge once asked
 * the kernel which connections were still open (all of /proc/net/tcp and
 * tcp6) before it refused a client at its cap; the public port now sees
 * every connection open and close (public-port.ts, counted in
 * sockets/socket-budget.ts) and reads no table, and this test keeps it
 * that way.
 *
 * Promised: under descriptor-exhaustion's idle-request flood the cap holds
 * (at most 256 of 1,000 connections left open, the rest answered 503 and
 * closed, within 10 s), the server stays under half a core and a tunnel
 * answers within a second, however large the table. A read of the table
 * costs tens of milliseconds at this size (the kernel walks its socket hash;
 * measured 45-75 ms on 2 cores; the test times one with
 * os/kernel-sockets.ts to show the table is large).
 *
 * This once failed (the read ran on every refusal, 100 % of a core, about 12
 * refusals a second). Opt-in (BURROW_LARGE_TABLE=1) rather than part of
 * `npm test`: the 30,000 TIME_WAIT sockets it makes stay a minute and slow
 * every kernel read of the tests that follow.
 */
import { afterAll, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { establishedPeers } from "../../src/os/kernel-sockets.ts";
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

test.skipIf(!process.env.BURROW_LARGE_TABLE)("with 30,000 TIME_WAIT sockets on the host, the per-address cap holds under the idle-request flood and the server stays under half a core", async () => {
  await fillTable(TABLE);
  expect(timeWaits()).toBeGreaterThan(TABLE * 0.9);

  // what one read costs at this size, for the record (the fastest of three calls)
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
    s.on("data", () => {}); // read, or the socket never sees the server's close
    s.on("connect", () => s.write(`GET / HTTP/1.1\r\nHost: localhost:${server!.edgePort}\r\n\r\n`));
    flood.push(s);
    if (i % 50 === 49) await Bun.sleep(5); // a breath every 50, as there
  }
  const stillOpen = () => flood.filter((s) => !s.destroyed && !s.closed).length;
  const deadline = Date.now() + 10_000;
  while (stillOpen() > 300 && Date.now() < deadline) await Bun.sleep(50);
  expect(stillOpen()).toBeLessThanOrEqual(300);
  expect(await cpuShare(server.proc.pid, 1_000)).toBeLessThan(0.5);
  // liveness, not speed: the tunnel answers (in a few ms; 10 s leaves room for any loaded machine)
  expect(await (await within(tunnelFetch(server.edgePort, "steady", "/"), 10_000, "the tunnel")).text()).toBe("tunnel ok");
  console.log(`one read of the kernel's table: ${Math.min(...costs).toFixed(1)} ms`);
}, 90_000);
