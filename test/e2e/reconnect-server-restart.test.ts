/**
 * Reconnection across a server restart: the agent notices, says it is
 * reconnecting, retries with growing delays, and once a server is back on
 * the same address and database it gets the same name (or port) again on
 * its own. An agent started before the server waits for it the same way.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { echoThrough, freeRange } from "../harness/ports.ts";

/** Enough for the first few backoff steps (0.5 s, 1 s, 2 s ceilings) plus a restart. */
const RECONNECT_MS = 10_000;

let dataDir: string;
let edgePort: number;
let tcpRange: { first: number; last: number };
let token: string;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`up ${new URL(req.url).pathname}`) });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

/** The server on the fixed edge port and TCP range of this file, on its one database. */
const serve = () =>
  startServer({ dataDir, args: ["--http-port", String(edgePort), "--tcp-ports", `${tcpRange.first}-${tcpRange.last}`] });

beforeAll(async () => {
  dataDir = mkdtempSync(join(tmpdir(), "burrow-reconnect-"));
  // ports outside the ephemeral range: while the server is down between its two runs, another test's
  // outgoing connection could take an ephemeral one as its own local port, and the restart would fail
  const ports = freeRange(7);
  edgePort = ports.first;
  tcpRange = { first: ports.first + 1, last: ports.last };
  await using server = await serve();
  expect(server.edgePort).toBe(edgePort);
  const api = await signedIn(server);
  const id = await api.createUser("roamer");
  token = await api.createToken(id);
});

afterAll(() => {
  upstream.stop(true);
  echo.stop(true);
  rmSync(dataDir, { recursive: true, force: true });
});

const forwardingLines = (agent: TestAgent) => agent.output.lines.filter((l) => l.startsWith("Forwarding"));

/** Waits (bounded) for the agent's n-th "Forwarding" line and returns it. */
async function nthForwarding(agent: TestAgent, n: number, ms = RECONNECT_MS): Promise<string> {
  const deadline = performance.now() + ms;
  while (forwardingLines(agent).length < n) {
    if (performance.now() > deadline) throw new Error(`no Forwarding line #${n} after ${ms} ms:\n${agent.output.text()}`);
    await Bun.sleep(20);
  }
  return forwardingLines(agent)[n - 1]!;
}

/** "...; reconnecting in 0.4 s (attempt 1)" -> [delay s, attempt] for each such line. */
const reconnectLines = (agent: TestAgent) =>
  agent.output.lines.flatMap((l) => {
    const m = /reconnecting in ([0-9.]+) s \(attempt (\d+)\)/.exec(l);
    return m ? [[Number(m[1]), Number(m[2])] as const] : [];
  });

for (const signal of ["SIGTERM", "SIGKILL"] as const) {
  test(`after a ${signal} of the server, agents reconnect by themselves to the restarted server and keep a random name and a tcp port`, async () => {
    let server: TestServer = await serve();
    try {
      await using web = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token });
      await using raw = await startAgent({ kind: "tcp", target: echo.port, server: server.edgeUrl, token });
      expect(web.subdomain).toMatch(/^[a-z0-9]{8}$/);
      expect(await (await tunnelFetch(edgePort, web.subdomain!, "/before")).text()).toBe("up /before");
      expect(await echoThrough(raw.port!, "before")).toBe("before");

      await server.stop(signal);
      // it says why: told by the server that it restarts (DRAIN: retries at once and often,
      // no backoff), or the connection just went (backoff)
      const why = signal === "SIGTERM" ? /the server is restarting: connecting again/ : /lost the connection to the server; reconnecting in/;
      await web.output.waitFor(why, 5_000);
      await raw.output.waitFor(why, 5_000);

      server = await serve();
      expect(await nthForwarding(web, 2)).toBe(forwardingLines(web)[0]!);
      expect(await nthForwarding(raw, 2)).toBe(forwardingLines(raw)[0]!);
      expect(await (await tunnelFetch(edgePort, web.subdomain!, "/after")).text()).toBe("up /after");
      expect(await echoThrough(raw.port!, "after")).toBe("after");
      expect(web.proc.exitCode).toBeNull();
      expect(web.output.text()).not.toContain("refused");
    } finally {
      await server.stop();
    }
  });
}

test("while the server stays down, the agent keeps retrying with growing delays, then comes back with its chosen name", async () => {
  let server: TestServer = await serve();
  try {
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "steady"] });
    await server.stop("SIGKILL");
    await agent.output.waitFor(/reconnecting in .* \(attempt 3\)/, RECONNECT_MS);
    const steps = reconnectLines(agent);
    expect(steps.map(([, attempt]) => attempt)).toEqual([1, 2, 3]);
    // half fixed, half random: attempt n waits between 0.25 * 2^(n-1) s and 0.5 * 2^(n-1) s
    steps.forEach(([delay, attempt]) => {
      const ceiling = 0.5 * 2 ** (attempt - 1);
      expect(delay).toBeGreaterThanOrEqual(ceiling / 2 - 0.05);
      expect(delay).toBeLessThanOrEqual(ceiling + 0.05);
    });
    server = await serve();
    expect(await nthForwarding(agent, 2, 15_000)).toBe(`Forwarding  http://steady.localhost:${edgePort} -> localhost:${upstream.port}   (user roamer)`);
    expect(await (await tunnelFetch(edgePort, "steady", "/x")).text()).toBe("up /x");
  } finally {
    await server.stop();
  }
});

test("an agent started before the server is up keeps retrying and connects once it is", async () => {
  await using agent = await startAgent({
    kind: "http",
    target: upstream.port!,
    server: `http://127.0.0.1:${edgePort}`,
    token,
    args: ["--subdomain", "early"],
    waitFor: /reconnecting in/,
  });
  expect(agent.output.text()).not.toContain("refused");
  // its first line after the inspector's address
  expect(agent.output.lines.find((l) => !l.startsWith("Inspector"))).toMatch(/could not reach the server.*; reconnecting in [0-9.]+ s \(attempt 1\)$/);
  await using server = await serve();
  await nthForwarding(agent, 1);
  expect(agent.output.lines.some((l) => l.startsWith("burrow:"))).toBe(false);
  expect(await (await tunnelFetch(server.edgePort, "early", "/late")).text()).toBe("up /late");
});

test("Ctrl-C while the agent waits to reconnect exits 0 at once", async () => {
  await using agent = await startAgent({
    kind: "http",
    target: upstream.port!,
    server: `http://127.0.0.1:${edgePort}`,
    token,
    waitFor: /\(attempt 5\)/,
  });
  const t0 = performance.now();
  expect(await agent.stop("SIGINT")).toBe(0);
  // the wait it is in lasts 4-8 s; stopping does not sit it out (an exit takes a few ms, and under 3 s on a loaded machine)
  expect(performance.now() - t0).toBeLessThan(3_000);
  // the five attempts before it take 4-5 s with their growing delays: more than bun's default 5 s per test allows
}, 30_000);
