/**
 * Chaos: a reconnect storm. 1,000 agents (one helper process running
 * burrow's own Agent code, storm-agents.ts) are connected to a server; the
 * server gets SIGTERM and a successor starts on the same ports and data dir,
 * so all 1,000 come at it within a fraction of a second (DRAIN makes them
 * retry every 100-200 ms, not with backoff).
 *
 * Promised: all 1,000 come back, each with the name it had, none refused,
 * and the successor lists them; the successor's memory after the storm is
 * flat against the first server's with the same agents after their first
 * connect (RSS within +30 %: a storm leaves nothing behind); the admin API
 * answers every request while the storm lands. Measured on 2 cores: server
 * RSS about 89 MiB after the first connect and 87-92 MiB after the storm
 * (60 MiB with no agents).
 *
 * The time bounds here are liveness, not speed: each holds at ten times
 * and more what a loaded machine shows, so that only a hang fails them.
 * How fast the agents come back and how long the admin API's slowest
 * answer takes during the storm (a few hundred ms on 2 quiet cores; 3 s
 * seen on a loaded one: the ~1,000 handshakes, about 0.8 ms of CPU each,
 * run on the same event loop) is measured by bench/storm.ts, with its
 * figures in bench/results/storm.md.
 *
 * All agents come from 127.0.0.1: the servers run with the defaults, whose
 * --max-agents-per-ip (1,024) takes a fleet of this size behind one address,
 * and with the open-file limit raised where the hard limit allows.
 * On 2 cores the whole file takes about 6 s with 1,000 agents: the full
 * count fits, nothing is scaled down.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { within } from "../harness/wait.ts";

const AGENTS = 1_000;
/** Open files for the servers and the swarm: the agents' sockets and then some, if the hard limit allows. */
const MANY_FILES = ["sh", "-c", 'ulimit -Sn 8192 2>/dev/null || ulimit -Sn "$(ulimit -Hn)"; exec "$@"', "sh"];
const SERVER_ARGS: string[] = [];
/** RSS after the storm may exceed the first connect's by at most this factor. */
const RSS_FACTOR = 1.3;
/** How long the successor's memory has to come back under RSS_FACTOR once the storm is over (each look a second of samples). */
const RSS_SETTLE_MS = 20_000;
/** Liveness: all agents back on the successor within this of its listening (measured: 0.6-1.4 s; bench/storm.ts). */
const STORM_BACK_MS = 30_000;
/** Liveness: every admin request is answered within this, storm or calm (the slowest answer seen in a storm: 3 s; bench/storm.ts). */
const ADMIN_ANSWER_MS = 10_000;

let first: TestServer;
let second: TestServer | undefined;
let swarm: { proc: Subprocess<"pipe", "pipe", "pipe">; output: LineReader } | undefined;
let api: AdminClient;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`storm ok ${new URL(req.url).pathname}`) });

beforeAll(async () => {
  first = await startServer({ keepDataDir: true, prefix: MANY_FILES, args: SERVER_ARGS });
  api = await signedIn(first);
});

afterAll(async () => {
  if (swarm) {
    swarm.proc.stdin.end(); // the swarm stops its agents and exits
    const exited = await Promise.race([swarm.proc.exited, Bun.sleep(15_000).then(() => "timeout")]);
    if (exited === "timeout") swarm.proc.kill("SIGKILL");
  }
  await first?.stop("SIGKILL");
  await second?.stop("SIGKILL");
  if (first) rmSync(first.dataDir, { recursive: true, force: true });
  upstream.stop(true);
});

/** The process's resident set, in KiB. */
function rssKiB(pid: number): number {
  return Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))![1]);
}

/** The median of a second of RSS samples: what a process holds once it has settled. */
async function settledRss(pid: number): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < 10; i++) {
    samples.push(rssKiB(pid));
    await Bun.sleep(100); // the span sampled
  }
  return samples.sort((a, b) => a - b)[5]!;
}

/** One admin request (a session check and a database read), answered 200 within ADMIN_ANSWER_MS. */
async function adminAnswers(client: AdminClient): Promise<void> {
  const res = await within(client.get("/api/auth/me"), ADMIN_ANSWER_MS, "the admin API to answer");
  expect(res.status).toBe(200);
}

async function activeCount(client: AdminClient): Promise<number> {
  const res = await client.get("/api/tunnels/active");
  expect(res.status).toBe(200);
  return (res.body as { subdomain?: string }[]).filter((t) => t.subdomain?.startsWith("storm")).length;
}

test(`${AGENTS} agents through a SIGTERM and a successor on the same ports: all back with their names, memory flat, the admin API responsive`, async () => {
  const token = await api.createToken(await api.createUser("fleet"));

  const proc = Bun.spawn(
    [
      ...MANY_FILES,
      process.execPath,
      join(import.meta.dir, "storm-agents.ts"),
      "--server", first.edgeUrl,
      "--token", token,
      "--target", `127.0.0.1:${upstream.port}`,
      "--count", String(AGENTS),
      "--prefix", "storm",
    ],
    { stdin: "pipe", stdout: "pipe", stderr: "pipe", env: { ...process.env, HTTPS_PROXY: "", ALL_PROXY: "", https_proxy: "", all_proxy: "" } },
  );
  swarm = { proc, output: new LineReader(proc) };

  // -- the first connect
  const round1 = await swarm.output.waitFor(/^(ready round=1 |error )/, 30_000);
  expect(round1).toMatch(new RegExp(`^ready round=1 agents=${AGENTS} .* refused=0 `));
  expect(await activeCount(api)).toBe(AGENTS);
  const connectedRss = await settledRss(first.proc.pid);
  for (let i = 0; i < 20; i++) await adminAnswers(api);

  // -- the storm: SIGTERM, and the successor on the same ports and data while the first drains
  const adminPort = new URL(first.adminUrl).port;
  first.proc.kill("SIGTERM");
  await first.output.waitFor(new RegExp(`told agents to connect again agents=${AGENTS}`), 10_000);
  second = await startServer({
    dataDir: first.dataDir,
    prefix: MANY_FILES,
    args: [...SERVER_ARGS, "--http-port", String(first.edgePort), "--agent-port", String(first.agentPort), "--admin-port", adminPort],
  });
  const listeningAt = performance.now();

  // the admin API while the storm lands (the session is in the database: the same cookie works)
  let answered = 0;
  let landed = false;
  const poller = (async () => {
    for (let i = 0; i < 2_000 && !landed; i++) {
      await adminAnswers(api);
      answered++;
      await Bun.sleep(10); // the polling period
    }
  })();
  const round2 = await swarm.output.waitFor(/^(ready round=2 |error )/, STORM_BACK_MS + 5_000).finally(() => (landed = true));
  const backAt = performance.now();
  await poller;

  // -- all back, each with its own name, none refused, listed by the successor
  expect(backAt - listeningAt).toBeLessThan(STORM_BACK_MS);
  expect(round2).toMatch(new RegExp(`^ready round=2 agents=${AGENTS} .*same_name=${AGENTS} refused=0 `));
  expect(await activeCount(api)).toBe(AGENTS);
  const res = await tunnelFetch(second.edgePort, `storm${AGENTS - 1}`, "/after");
  expect(await res.text()).toBe("storm ok /after");
  expect(await within(first.proc.exited, 20_000, "the first server to finish draining")).toBe(0);

  // -- memory: flat against the first connect. A thousand handshakes at once leave garbage the collector
  // takes at its own pace (1.38 times the first connect's was seen at once on a loaded machine): what the
  // successor holds must come back under the bound while it serves the agents, as a leak would not
  const settleBy = performance.now() + RSS_SETTLE_MS;
  let stormRss = await settledRss(second.proc.pid);
  while (stormRss >= connectedRss * RSS_FACTOR && performance.now() < settleBy) stormRss = await settledRss(second.proc.pid);
  expect(stormRss).toBeLessThan(connectedRss * RSS_FACTOR);

  // -- the admin API during the storm: it shares the event loop with ~1,000 handshakes landing at
  // once, and answered every request (each within ADMIN_ANSWER_MS, or the poller failed the test)
  expect(answered).toBeGreaterThan(0);
}, 90_000);
