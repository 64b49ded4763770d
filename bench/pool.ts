/**
 * Pools: HTTP 1 KiB at c=50 through one name served by one agent, against
 * the same name served by a pool of two (round robin), both to the same
 * nginx, alternating round by round so drift hits both alike. Then a
 * rolling restart under load: wrk runs against the pool while one member is
 * stopped with SIGTERM (it leaves the rotation, finishes what it has, goes)
 * and started again, then the other; wrk's errors and non-2xx answers are
 * what a visitor would have seen. `BENCH_ONLY=pool`.
 */
import { wrk, type WrkResult } from "./lib/measure.ts";
import { freePortRange, type Processes } from "./lib/proc.ts";
import { fmt, median, ratio, type Row } from "./lib/report.ts";
import { createToken, FILES, startBurrowAgent, startBurrowServer, tunnelHost, type BurrowAgent } from "./lib/services.ts";

export interface PoolResults {
  oneAgent: Omit<WrkResult, "raw">[];
  twoMembers: Omit<WrkResult, "raw">[];
  /** wrk against the pool while each member in turn was stopped and started again. */
  rolling: Omit<WrkResult, "raw"> & { restarts: number };
}

export async function poolBench(
  procs: Processes,
  bin: string,
  dir: string,
  nginxPort: number,
  cfg: { seconds: number; rounds: number; warmupSeconds: number },
  say: (s: string) => void,
): Promise<PoolResults> {
  const started: BurrowAgent[] = [];
  const server = await startBurrowServer(procs, bin, dir, "burrow-pool-server", freePortRange(2));
  try {
    const token = await createToken(server, "bench-pool", { skip_warning: true });
    const member = (n: number) => startBurrowAgent(procs, bin, dir, `burrow-pool-member-${n}`, server, token, "http", nginxPort, ["--subdomain", "pooled", "--pool", "--skip-warning", "--drain-timeout", "10"]);
    const single = await startBurrowAgent(procs, bin, dir, "burrow-pool-single", server, token, "http", nginxPort, ["--subdomain", "single", "--skip-warning"]);
    started.push(single);
    const members = [await member(1), await member(2)];
    started.push(...members);
    const hosts = { oneAgent: tunnelHost(server, "single"), twoMembers: tunnelHost(server, "pooled") } as const;
    for (const [name, host] of Object.entries(hosts)) {
      const res = await fetch(`${server.edgeUrl}/${FILES.small}`, { headers: { host } });
      const got = (await res.arrayBuffer()).byteLength;
      if (res.status !== 200 || got !== 1024) throw new Error(`pool ${name}: GET /${FILES.small} gave ${res.status} with ${got} bytes`);
    }
    if (cfg.warmupSeconds > 0) {
      for (const host of Object.values(hosts)) await wrk(procs, { url: `${server.edgeUrl}/${FILES.small}`, host, connections: 50, seconds: cfg.warmupSeconds });
    }
    const out: PoolResults = { oneAgent: [], twoMembers: [], rolling: { requests: 0, seconds: 0, reqPerSec: 0, mibPerSec: 0, p50Ms: 0, p99Ms: 0, errors: 0, restarts: 0 } };
    for (let round = 1; round <= cfg.rounds; round++) {
      const order = (round % 2 ? ["oneAgent", "twoMembers"] : ["twoMembers", "oneAgent"]) as (keyof typeof hosts)[];
      for (const name of order) {
        const { raw: _, ...r } = await wrk(procs, { url: `${server.edgeUrl}/${FILES.small}`, host: hosts[name], connections: 50, seconds: cfg.seconds });
        out[name].push(r);
        say(`pool HTTP 1 KiB round ${round} ${name.padEnd(10)} ${fmt(r.reqPerSec, "req/s")} req/s  p99 ${fmt(r.p99Ms)} ms${r.errors ? `  ${r.errors} errors` : ""}`);
      }
    }
    // the rolling restart: each member stopped (SIGTERM: out of rotation, drained, gone) and started again, under load
    const seconds = Math.max(12, cfg.seconds * 2);
    const load = wrk(procs, { url: `${server.edgeUrl}/${FILES.small}`, host: hosts.twoMembers, connections: 50, seconds });
    for (let i = 0; i < members.length; i++) {
      await Bun.sleep((seconds * 1000) / 6);
      const old = members[i]!;
      await procs.stop(old.child, "SIGTERM", 15_000);
      started.splice(started.indexOf(old), 1);
      members[i] = await member(i + 1);
      started.push(members[i]!);
      out.rolling.restarts++;
    }
    const { raw: _, ...r } = await load;
    out.rolling = { ...r, restarts: out.rolling.restarts };
    say(`pool rolling restart: ${out.rolling.restarts} members restarted during ${seconds} s, ${fmt(r.reqPerSec, "req/s")} req/s, ${r.requests} requests, ${r.errors} errors`);
    return out;
  } finally {
    for (const p of started.reverse()) await procs.stop(p.child);
    await procs.stop(server.child);
  }
}

export function poolRows(p: PoolResults): Row[] {
  const one = median(p.oneAgent.map((r) => r.reqPerSec));
  const two = median(p.twoMembers.map((r) => r.reqPerSec));
  const p99 = median(p.twoMembers.map((r) => r.p99Ms));
  return [
    {
      scenario: "HTTP 1 KiB, c=50: one name served by a pool of two agents (round robin) vs by one agent",
      unit: "req/s",
      runs: {},
      higherIsBetter: true,
      burrowText: `**${fmt(two, "req/s")}** (p99 ${fmt(p99)} ms) vs **${fmt(one, "req/s")}** with one agent: ${fmt(ratio(two, one) * 100)} %`,
      ratioText: { direct: "", ssh: "" },
    },
    {
      scenario: "Rolling restart of a pool of two under wrk c=50 (each member stopped with SIGTERM and started again)",
      unit: "errors",
      runs: {},
      higherIsBetter: false,
      burrowText: `**${p.rolling.errors}** errors or non-2xx of ${p.rolling.requests} requests (${fmt(p.rolling.reqPerSec, "req/s")} req/s over ${p.rolling.seconds} s)`,
      ratioText: { direct: "", ssh: "" },
    },
  ];
}
