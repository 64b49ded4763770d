/**
 * The outbox's cost: `npm run bench:events` (by hand, never in CI).
 *
 * 1. Events per second the outbox sustains, on SQLite (a file in a temp
 *    dir, as the server keeps it) and on PostgreSQL (Debian's, private, as
 *    the tests run it), with one webhook wanting every event, its receiver
 *    a Bun.serve on loopback answering 204:
 *    - written: `emit()` one after another, each in its own transaction,
 *      as admin writes make them; and `later()`, the edge's way (queued,
 *      written in batches);
 *    - delivered: the worker sending what was written, from the first
 *      event to the last delivery: one webhook (its deliveries go one at a
 *      time, in order) and 8 webhooks (8 in parallel).
 * 2. What an admin request that writes an event adds: the real server (from
 *    source), PUT /api/users/:id alternately with a webhook that wants the
 *    event enabled (the event and its delivery row written in the
 *    request's transaction, and delivered meanwhile) and disabled (the
 *    webhooks looked up, nothing written), in paired blocks so that drift
 *    hits both alike; medians and p99 of each.
 *
 * Settings: BENCH_EVENTS=3000 (events per engine and way), BENCH_EVENT_ROUNDS=6
 * (paired blocks), BENCH_EVENT_REQUESTS=200 (requests per block).
 * Writes bench/results/events.md and .json.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { createCore, type Core } from "../src/core/index.ts";
import { openDatabase } from "../src/db/open.ts";
import { openPostgres } from "../src/db/open-postgres.ts";
import type { Store } from "../src/db/store.ts";
import { DeliveryWorker, DEFAULT_WORKER_LIMITS } from "../src/webhooks/worker.ts";
import { signedIn } from "../test/harness/admin.ts";
import { startPostgres } from "../test/harness/postgres.ts";
import { startServer } from "../test/harness/server.ts";

const N = Number(process.env.BENCH_EVENTS ?? 3000);
const ROUNDS = Number(process.env.BENCH_EVENT_ROUNDS ?? 6);
const REQUESTS = Number(process.env.BENCH_EVENT_REQUESTS ?? 200);
const say = (s: string) => console.error(`[events ${new Date().toISOString().slice(11, 19)}] ${s}`);
const work = mkdtempSync(join(tmpdir(), "burrow-bench-events-"));

interface EngineResult {
  emitPerS: number;
  laterPerS: number;
  delivered1PerS: number;
  delivered8PerS: number;
}

/** A receiver that counts and answers 204. */
function receiver() {
  let n = 0;
  const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (n++, new Response(null, { status: 204 })) });
  return { url: `http://127.0.0.1:${server.port}/hook`, count: () => n, stop: () => server.stop(true) };
}

const data = (i: number) => ({ user_id: i, username: `user${i}`, fields: ["max_tunnels"] });

async function waitFor(ok: () => boolean | Promise<boolean>, what: string, ms = 600_000): Promise<void> {
  const end = performance.now() + ms;
  while (!(await ok())) {
    if (performance.now() > end) throw new Error(`timed out: ${what}`);
    await Bun.sleep(5);
  }
}

async function engine(name: string, store: Store): Promise<EngineResult> {
  const core: Core = createCore({ store, systemSubdomains: [], webhookLimits: { maxWebhooks: 100, perUser: 5, retryWindowMs: 86_400_000, allowPrivate: true } });
  const rx = receiver();
  const hooks: number[] = [];
  for (let i = 0; i < 8; i++) hooks.push((await core.webhooks.create({ url: rx.url, events: ["*"], enabled: i === 0 })).webhook.id);
  try {
    // written by emit(), one transaction each, as admin writes do
    let t = performance.now();
    for (let i = 0; i < N; i++) await core.events.emit({ type: "user.updated", data: data(i) });
    const emitPerS = N / ((performance.now() - t) / 1000);
    say(`${name}: emit ${emitPerS.toFixed(0)}/s`);

    // delivered by the worker, one webhook: from the start to the last delivery
    let worker = new DeliveryWorker(store, "bench", { ...DEFAULT_WORKER_LIMITS, allowPrivate: true });
    t = performance.now();
    worker.start(core.events);
    await waitFor(() => rx.count() >= N, "one webhook's deliveries");
    const delivered1PerS = N / ((performance.now() - t) / 1000);
    await worker.stop();
    say(`${name}: delivered (1 webhook) ${delivered1PerS.toFixed(0)}/s`);

    // written by later(), the edge's way: queued, then in batches
    t = performance.now();
    for (let i = 0; i < N; i++) core.events.later({ type: "user.updated", data: data(i) });
    await waitFor(() => core.events.stats.queued === 0, "the queue written");
    await core.events.flush();
    const laterPerS = N / ((performance.now() - t) / 1000);
    say(`${name}: later ${laterPerS.toFixed(0)}/s`);

    // 8 webhooks wanting every event: 8 deliveries each, in parallel across webhooks
    for (const id of hooks) await core.webhooks.update(id, { enabled: true }, undefined);
    await core.store.run(core.store.db.delete(core.store.tables.webhookDeliveries));
    const per = Math.ceil(N / 8);
    for (let i = 0; i < per; i++) await core.events.emit({ type: "user.updated", data: data(i) });
    const before = rx.count();
    worker = new DeliveryWorker(store, "bench", { ...DEFAULT_WORKER_LIMITS, allowPrivate: true });
    t = performance.now();
    worker.start(core.events);
    await waitFor(() => rx.count() - before >= per * 8, "eight webhooks' deliveries");
    const delivered8PerS = (per * 8) / ((performance.now() - t) / 1000);
    await worker.stop();
    say(`${name}: delivered (8 webhooks) ${delivered8PerS.toFixed(0)}/s`);
    return { emitPerS, laterPerS, delivered1PerS, delivered8PerS };
  } finally {
    await core.events.stop();
    rx.stop();
  }
}

const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))]!;
};

interface RequestCost {
  off: { median: number; p99: number; n: number };
  on: { median: number; p99: number; n: number };
}

async function requestCost(): Promise<RequestCost> {
  const rx = receiver();
  await using server = await startServer({ args: ["--webhook-allow-private", "on"] });
  const api = await signedIn(server);
  const userId = await api.createUser("bench-events");
  const hook = (await api.post("/api/webhooks", { url: rx.url, events: ["user.updated"], enabled: false })).body.id as number;
  const times = { off: [] as number[], on: [] as number[] };
  let value = 0;
  const block = async (which: "off" | "on") => {
    await api.put(`/api/webhooks/${hook}`, { enabled: which === "on" });
    for (let i = 0; i < REQUESTS; i++) {
      const t = performance.now();
      const res = await api.put(`/api/users/${userId}`, { max_tunnels: ++value });
      times[which].push(performance.now() - t);
      if (res.status !== 200) throw new Error(`PUT /api/users: ${res.status}`);
    }
  };
  await block("off"); // warm-up, not counted
  times.off = [];
  for (let r = 0; r < ROUNDS; r++) {
    // the order alternates, so that a drift in the machine's speed hits both alike
    for (const which of r % 2 === 0 ? (["off", "on"] as const) : (["on", "off"] as const)) await block(which);
  }
  rx.stop();
  const sum = (xs: number[]) => ({ median: quantile(xs, 0.5), p99: quantile(xs, 0.99), n: xs.length });
  return { off: sum(times.off), on: sum(times.on) };
}

const results: { date: string; machine: Record<string, unknown>; sqlite?: EngineResult; postgres?: EngineResult; request?: RequestCost; n: number } = {
  date: new Date().toISOString(),
  machine: { cpus: cpus().length, model: cpus()[0]?.model ?? "", loadavg: loadavg().map((x) => x.toFixed(2)).join(" ") },
  n: N,
};

try {
  say("SQLite");
  const sqlite = openDatabase(join(work, "sqlite"));
  results.sqlite = await engine("sqlite", sqlite.store);
  sqlite.close();
  say("PostgreSQL");
  await using pg = await startPostgres();
  const opened = await openPostgres(await pg.newDatabase(), { poolSize: 10 });
  results.postgres = await engine("postgres", opened.store);
  await opened.close();
  say("an admin request that writes an event");
  results.request = await requestCost();
} finally {
  rmSync(work, { recursive: true, force: true });
}

const f = (x: number) => x.toFixed(0);
const ms = (x: number) => x.toFixed(2);
const md = [
  `# Events: the outbox's cost (${results.date.slice(0, 10)})`,
  "",
  `${results.machine.cpus} CPUs (${results.machine.model}), load ${results.machine.loadavg} at the start; ${N} events per engine and way.`,
  "",
  "| events/s | SQLite | PostgreSQL |",
  "|---|---|---|",
  `| written by emit(), one transaction each | ${f(results.sqlite!.emitPerS)} | ${f(results.postgres!.emitPerS)} |`,
  `| written by later(), in batches | ${f(results.sqlite!.laterPerS)} | ${f(results.postgres!.laterPerS)} |`,
  `| delivered, one webhook (one at a time, in order) | ${f(results.sqlite!.delivered1PerS)} | ${f(results.postgres!.delivered1PerS)} |`,
  `| delivered, 8 webhooks | ${f(results.sqlite!.delivered8PerS)} | ${f(results.postgres!.delivered8PerS)} |`,
  "",
  `PUT /api/users/:id on SQLite, ${ROUNDS} paired blocks of ${REQUESTS} requests:`,
  "",
  "| webhook wanting the event | median ms | p99 ms |",
  "|---|---|---|",
  `| disabled (looked up, nothing written) | ${ms(results.request!.off.median)} | ${ms(results.request!.off.p99)} |`,
  `| enabled (event and delivery written, delivered meanwhile) | ${ms(results.request!.on.median)} | ${ms(results.request!.on.p99)} |`,
  `| added by the event | ${ms(results.request!.on.median - results.request!.off.median)} | ${ms(results.request!.on.p99 - results.request!.off.p99)} |`,
  "",
].join("\n");
const out = join(import.meta.dir, "results");
mkdirSync(out, { recursive: true });
writeFileSync(join(out, "events.md"), md);
writeFileSync(join(out, "events.json"), JSON.stringify(results, null, 2) + "\n");
console.log(md);
