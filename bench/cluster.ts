/**
 * The cost of a visitor landing on the wrong node: HTTP 1 KiB through two
 * burrow nodes on one PostgreSQL database (Debian's, private, as the tests
 * run it), the agent on node A; wrk against node A (the tunnel's own node)
 * and against node B (which relays to A over its node link), alternating
 * round by round so that drift hits both alike. `BENCH_ONLY=cluster`.
 */
import { startPostgres } from "../test/harness/postgres.ts";
import { wrk, type WrkResult } from "./lib/measure.ts";
import { freePortRange, type Processes } from "./lib/proc.ts";
import { fmt, median, ratio, type Row } from "./lib/report.ts";
import { createToken, FILES, startBurrowAgent, startBurrowServer, tunnelHost } from "./lib/services.ts";

export interface ClusterRelay {
  sameNode: Omit<WrkResult, "raw">[];
  otherNode: Omit<WrkResult, "raw">[];
}

const SECRET = "bench-cluster-secret-0123456789abcdef";

export async function clusterRelay(
  procs: Processes,
  bin: string,
  dir: string,
  nginxPort: number,
  cfg: { seconds: number; rounds: number; warmupSeconds: number },
  say: (s: string) => void,
): Promise<ClusterRelay> {
  const pg = await startPostgres();
  const started: { child: Parameters<Processes["stop"]>[0] }[] = [];
  try {
    const url = await pg.newDatabase();
    const ports = freePortRange(2);
    const node = (id: string, port: number) =>
      startBurrowServer(procs, bin, dir, `burrow-node-${id}`, freePortRange(2), [
        "--database",
        url,
        "--node-id",
        id,
        "--http-port",
        String(port),
        "--node-url",
        `http://127.0.0.1:${port}`,
        "--cluster-secret",
        SECRET,
      ]);
    const a = await node("a", ports.first);
    started.push(a);
    const b = await node("b", ports.first + 1);
    started.push(b);
    const token = await createToken(a, "bench-cluster", { skip_warning: true });
    const agent = await startBurrowAgent(procs, bin, dir, "burrow-cluster-agent", a, token, "http", nginxPort, ["--subdomain", "relayed", "--skip-warning"]);
    started.push(agent);
    const host = (server: typeof a) => tunnelHost(server, agent.subdomain!);
    const paths = { sameNode: a, otherNode: b } as const;
    for (const [name, server] of Object.entries(paths)) {
      const res = await fetch(`${server.edgeUrl}/${FILES.small}`, { headers: { host: host(server) } });
      const got = (await res.arrayBuffer()).byteLength;
      if (res.status !== 200 || got !== 1024) throw new Error(`cluster ${name}: GET /${FILES.small} gave ${res.status} with ${got} bytes`);
    }
    say(`cluster: nodes a :${a.edgePort}, b :${b.edgePort}; tunnel ${agent.subdomain} on a`);
    if (cfg.warmupSeconds > 0) {
      for (const server of Object.values(paths)) await wrk(procs, { url: `${server.edgeUrl}/${FILES.small}`, host: host(server), connections: 50, seconds: cfg.warmupSeconds });
    }
    const out: ClusterRelay = { sameNode: [], otherNode: [] };
    for (let round = 1; round <= cfg.rounds; round++) {
      for (const [name, server] of Object.entries(paths) as [keyof ClusterRelay, typeof a][]) {
        const { raw: _, ...r } = await wrk(procs, { url: `${server.edgeUrl}/${FILES.small}`, host: host(server), connections: 50, seconds: cfg.seconds });
        out[name].push(r);
        say(`cluster HTTP 1 KiB round ${round} ${name.padEnd(9)} ${fmt(r.reqPerSec, "req/s")} req/s  p99 ${fmt(r.p99Ms)} ms${r.errors ? `  ${r.errors} errors` : ""}`);
      }
    }
    return out;
  } finally {
    // this section's processes only: nginx and the rest go on to the next
    for (const p of started.reverse()) await procs.stop(p.child);
    await pg.stop();
  }
}

export function clusterRows(c: ClusterRelay): Row[] {
  const same = median(c.sameNode.map((r) => r.reqPerSec));
  const other = median(c.otherNode.map((r) => r.reqPerSec));
  const p99 = median(c.otherNode.map((r) => r.p99Ms));
  return [
    {
      scenario: "HTTP 1 KiB, visitor on another node than the agent's (relay), two nodes on PostgreSQL",
      unit: "req/s",
      runs: {},
      higherIsBetter: true,
      burrowText: `**${fmt(other, "req/s")}** (p99 ${fmt(p99)} ms) vs **${fmt(same, "req/s")}** on the agent's own node: ${fmt(ratio(other, same) * 100)} %`,
      ratioText: { direct: "", ssh: "" },
    },
  ];
}
