/**
 * The admin API during a reconnect storm: BENCH_STORM_AGENTS (1,000) agents
 * on one server, which gets SIGTERM while a successor starts on the same
 * data dir and ports, so that all of them come at the successor within a
 * fraction of a second (DRAIN: they retry every 100-200 ms, not with
 * backoff) and their handshakes share its event loop with the admin API.
 *
 * Measured, per round: the admin API's answers (GET /api/auth/me, a session
 * check and a database read, one every 10 ms) from the successor's first
 * answer until every agent is back: how many, the median and the slowest;
 * the same request when calm, on the first server with all agents
 * connected; and how soon all agents were back after the successor's first
 * answer (to the 50 ms the swarm's log is read at).
 *
 * test/chaos/reconnect-storm.test.ts holds the same storm to liveness (every
 * agent back, every admin request answered); how fast, which depends on the
 * machine and its load, is measured here.
 *
 *   bun bench/storm.ts             (Linux; run by hand, never in CI)
 *
 * Settings (environment): BENCH_STORM_AGENTS=1000, BENCH_STORM_ROUNDS=3,
 * BENCH_BURROW=path (default dist/burrow, built when missing). The agents
 * are one helper process running burrow's own Agent code, the test's swarm
 * (test/chaos/storm-agents.ts). Everything listens on 127.0.0.1 and is
 * stopped by PID. Writes bench/results/storm.md.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, Processes, type Child } from "./lib/proc.ts";
import { fmt, median } from "./lib/report.ts";
import { ADMIN_PASSWORD, createToken, type BurrowServer } from "./lib/services.ts";
import { ensureBinary } from "./lib/setup.ts";

const ROOT = join(import.meta.dir, "..");
const SWARM = join(ROOT, "test", "chaos", "storm-agents.ts");
const AGENTS = Math.max(1, Number(process.env.BENCH_STORM_AGENTS ?? 1000));
const ROUNDS = Math.max(1, Number(process.env.BENCH_STORM_ROUNDS ?? 3));
/** The admin API is asked this often while the storm lands. */
const POLL_EVERY_MS = 10;
/** Admin requests one after the other on the calm first server. */
const CALM_REQUESTS = 50;
/** No single admin answer is waited for longer than this: past it, it counts as failed. */
const ANSWER_LIMIT_MS = 30_000;

const say = (s: string) => console.error(`[storm ${new Date().toISOString().slice(11, 19)}] ${s}`);

interface RoundResult {
  /** Admin API answers (ms) on the first server, all agents connected. */
  calm: number[];
  /** Admin API answers (ms) on the successor while the agents came back. */
  storm: number[];
  /** Admin requests during the storm that got no 200 within ANSWER_LIMIT_MS. */
  failed: number;
  /** From the successor's first admin answer to the swarm's "every agent is back" (ms). */
  backMs: number;
}

async function main() {
  const bin = await ensureBinary(ROOT, say);
  const dir = mkdtempSync(join(tmpdir(), "burrow-storm-"));
  const procs = new Processes(dir);
  const cleanup = async () => {
    await procs.stopAll();
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("SIGINT", () => void cleanup().finally(() => process.exit(130)));
  const load = loadavg()[0]!;
  try {
    const results: RoundResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      results.push(await oneStorm(procs, bin, dir, `r${round}`));
      const r = results.at(-1)!;
      say(`round ${round + 1}: back in ${r.backMs} ms; admin during the storm: ${r.storm.length} answers, median ${fmt(median(r.storm))} ms, slowest ${fmt(Math.max(...r.storm))} ms, ${r.failed} failed`);
    }
    const md = report(results, bin, load);
    console.log(md);
    mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
    writeFileSync(join(ROOT, "bench", "results", "storm.md"), md);
  } finally {
    await cleanup();
  }
}

function serverArgs(bin: string, dataDir: string, ports: { http: number; agent: number; admin: number }): string[] {
  // the defaults' --max-agents-per-ip (1,024) takes 1,000 agents from one address; more need more
  const fleet = AGENTS > 1_000 ? ["--max-agents-per-ip", String(AGENTS + 100)] : [];
  return [bin, "server", "--host", "127.0.0.1", "--http-port", String(ports.http), "--agent-port", String(ports.agent), "--admin-port", String(ports.admin), "--data-dir", dataDir, ...fleet];
}

async function oneStorm(procs: Processes, bin: string, dir: string, tag: string): Promise<RoundResult> {
  const dataDir = join(dir, `data-${tag}`);
  mkdirSync(dataDir, { recursive: true });
  const ports = { http: freePort(), agent: freePort(), admin: freePort() };
  const adminUrl = `http://127.0.0.1:${ports.admin}`;
  const env = { BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD };
  const first = procs.spawn(`server-a-${tag}`, serverArgs(bin, dataDir, ports), { env, manyFiles: true });
  await procs.waitFor(first, /admin api listening/, 20_000);
  const admin = { adminUrl } as BurrowServer; // createToken signs in and keeps the session's cookie there
  const token = await createToken(admin, "fleet");
  const cookie = admin.cookie!;

  const swarm = procs.spawn(
    `swarm-${tag}`,
    [process.execPath, SWARM, "--server", `http://127.0.0.1:${ports.http}`, "--token", token, "--count", String(AGENTS), "--prefix", "storm", "--lifetime-s", "600"],
    { stdin: "pipe", manyFiles: true, env: { HTTPS_PROXY: "", ALL_PROXY: "", HTTP_PROXY: "", https_proxy: "", all_proxy: "", http_proxy: "" } },
  );
  let second: Child | undefined;
  try {
    const round1 = await procs.waitFor(swarm, /^(ready round=1 |error ).*$/m, 120_000);
    if (!round1[0].includes(`agents=${AGENTS} `) || !round1[0].includes(" refused=0 ")) throw new Error(`the first connect: ${round1[0]}`);
    const calm: number[] = [];
    for (let i = 0; i < CALM_REQUESTS; i++) {
      const ms = await adminAnswer(adminUrl, cookie);
      if (ms === undefined) throw new Error("the calm admin API did not answer");
      calm.push(ms);
    }

    // the storm: SIGTERM, and the successor on the same ports and data while the first drains
    process.kill(first.pid, "SIGTERM");
    await procs.waitFor(first, new RegExp(`told agents to connect again agents=${AGENTS}`), 20_000);
    const swarmLogAt = procs.log(swarm).length;
    second = procs.spawn(`server-b-${tag}`, serverArgs(bin, dataDir, ports), { env, manyFiles: true });

    // the session is in the database: the same cookie works on the successor
    const storm: number[] = [];
    let failed = 0;
    let firstAnswerAt: number | undefined;
    let landed = false;
    const poller = (async () => {
      while (!landed) {
        const ms = await adminAnswer(adminUrl, cookie);
        if (ms !== undefined) {
          firstAnswerAt ??= performance.now() - ms;
          storm.push(ms);
        } else if (firstAnswerAt !== undefined) failed++; // before its first answer the successor is not listening yet
        await Bun.sleep(POLL_EVERY_MS); // the polling period
      }
    })();
    const round2 = await procs.waitFor(swarm, /^(ready round=2 |error ).*$/m, 120_000, swarmLogAt).finally(() => (landed = true));
    const backAt = performance.now();
    await poller;
    if (!round2[0].includes(`agents=${AGENTS} `) || !round2[0].includes(` same_name=${AGENTS} `)) throw new Error(`the storm: ${round2[0]}`);
    if (firstAnswerAt === undefined) throw new Error("the successor's admin API never answered");
    await first.exited;
    return { calm, storm, failed, backMs: Math.round(backAt - firstAnswerAt) };
  } finally {
    swarm.proc.stdin?.end(); // the swarm stops its agents and exits
    await Promise.race([swarm.exited, Bun.sleep(20_000)]);
    await procs.stop(swarm);
    if (second) await procs.stop(second);
    await procs.stop(first);
  }
}

/** Milliseconds for one GET /api/auth/me, or undefined when it got no 200 (refused, failed, or past ANSWER_LIMIT_MS). */
async function adminAnswer(adminUrl: string, cookie: string): Promise<number | undefined> {
  const t0 = performance.now();
  try {
    const res = await fetch(`${adminUrl}/api/auth/me`, { headers: { cookie }, signal: AbortSignal.timeout(ANSWER_LIMIT_MS) });
    await res.arrayBuffer();
    return res.status === 200 ? performance.now() - t0 : undefined;
  } catch {
    return undefined;
  }
}

function report(results: RoundResult[], bin: string, load: number): string {
  const ms = (x: number) => `${fmt(x)} ms`;
  const rows = results.map(
    (r, i) =>
      `| ${i + 1} | ${ms(r.backMs)} | ${r.storm.length} (${r.failed} failed) | ${ms(median(r.storm))} | ${ms(Math.max(...r.storm))} | ${ms(median(r.calm))} | ${ms(Math.max(...r.calm))} |`,
  );
  return [
    `### The admin API during a reconnect storm (${new Date().toISOString().slice(0, 10)}, ${bin.split("/").pop()})`,
    "",
    `${AGENTS.toLocaleString("en-US")} agents (one process, burrow's Agent code) move to a successor started on the same ports while the first server drains; GET /api/auth/me every ${POLL_EVERY_MS} ms from the successor's first answer until every agent is back. ${cpus().length} cores, load ${load.toFixed(2)} at the start.`,
    "",
    "| round | all agents back after | admin answers during the storm | median | slowest | calm median | calm slowest |",
    "|---|---|---|---|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}

await main();
