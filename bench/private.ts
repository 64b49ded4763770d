/**
 * A private tunnel through `burrow connect` against a public tcp tunnel
 * (`BENCH_ONLY=private`, or part of a full run): the same two services
 * behind each, on one server. HTTP 1 KiB requests (wrk to nginx, kept-alive
 * connections over the tunnel's bytes) and a raw TCP upload into the
 * counting sink, the two paths interleaved round by round. The connector's
 * path has one more hop on this machine (the connector's local port, then
 * its connection to the server) where a visitor's has the public port; what
 * is measured is what that hop costs.
 */
import { join } from "node:path";
import { mkdirSync } from "node:fs";
import { pushThrough, wrk, type TransferResult } from "./lib/measure.ts";
import { cpuMs, freePortRange, type Child, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row } from "./lib/report.ts";
import { createToken, FILES, startBurrowAgent, startBurrowServer } from "./lib/services.ts";

type PrivatePath = "public" | "connect";

export interface PrivateBench {
  /** HTTP 1 KiB req/s per round, per path. */
  rps: Record<PrivatePath, number[]>;
  /** HTTP 1 KiB p99 latency (ms) per round, per path. */
  p99: Record<PrivatePath, number[]>;
  /** Raw TCP upload MiB/s per round, per path. */
  mibps: Record<PrivatePath, number[]>;
  /** CPU ms per GiB of the raw upload, per round, per path: every burrow process on it, and the server's alone. */
  cpuPerGiB: Record<PrivatePath, number[]>;
  serverCpuPerGiB: Record<PrivatePath, number[]>;
}

export interface PrivateBenchSetup {
  procs: Processes;
  bin: string;
  dir: string;
  nginxPort: number;
  sink: Child;
  sinkPort: number;
  source: string[];
  rounds: number;
  seconds: number;
  tcpBytes: number;
  say(line: string): void;
}

/** `burrow connect owner/name`, listening on a port of its own; resolves with the port it says. */
async function connector(b: PrivateBenchSetup, name: string, serverUrl: string, token: string, target: string): Promise<{ child: Child; port: number }> {
  const home = join(b.dir, `${name}-home`);
  mkdirSync(home, { recursive: true });
  const child = b.procs.spawn(name, [b.bin, "connect", target, "--server", serverUrl, "--token", token, "--port", "0"], { env: { XDG_CONFIG_HOME: home } });
  const m = await b.procs.waitFor(child, /Connected to \S+ \(tcp\): connect to 127\.0\.0\.1:(\d+)/, 20_000);
  return { child, port: Number(m[1]) };
}

export async function privateTunnels(b: PrivateBenchSetup): Promise<PrivateBench> {
  const { procs, bin, dir } = b;
  const server = await startBurrowServer(procs, bin, dir, "burrow-private-server", freePortRange(8));
  const owner = await createToken(server, "bench-owner");
  const connectorToken = await createToken(server, "bench-connector");
  // public: a visitor to the tcp tunnel's public port; connect: a connector's local port to a private tunnel of the same services
  const publicHttp = await startBurrowAgent(procs, bin, dir, "burrow-public-http", server, owner, "tcp", b.nginxPort);
  const publicTcp = await startBurrowAgent(procs, bin, dir, "burrow-public-tcp", server, owner, "tcp", b.sinkPort);
  const privateHttp = await startBurrowAgent(procs, bin, dir, "burrow-private-http", server, owner, "tcp", b.nginxPort, ["--private", "--name", "web", "--share", "bench-connector"]);
  const privateTcp = await startBurrowAgent(procs, bin, dir, "burrow-private-tcp", server, owner, "tcp", b.sinkPort, ["--private", "--name", "sink", "--share", "bench-connector"]);
  const connectHttp = await connector(b, "burrow-connect-http", server.edgeUrl, connectorToken, "bench-owner/web");
  const connectTcp = await connector(b, "burrow-connect-tcp", server.edgeUrl, connectorToken, "bench-owner/sink");
  b.say(`private     public tcp :${publicHttp.port} and :${publicTcp.port}; burrow connect :${connectHttp.port} and :${connectTcp.port}`);

  const httpPort: Record<PrivatePath, number> = { public: publicHttp.port!, connect: connectHttp.port };
  const tcpPort: Record<PrivatePath, number> = { public: publicTcp.port!, connect: connectTcp.port };
  // the processes a transfer goes through on each path: the server and the owner's agent, and the connector's
  const tcpPids: Record<PrivatePath, number[]> = { public: [server.child.pid, publicTcp.child.pid], connect: [server.child.pid, privateTcp.child.pid, connectTcp.child.pid] };
  const result: PrivateBench = {
    rps: { public: [], connect: [] },
    p99: { public: [], connect: [] },
    mibps: { public: [], connect: [] },
    cpuPerGiB: { public: [], connect: [] },
    serverCpuPerGiB: { public: [], connect: [] },
  };
  const url = (path: PrivatePath) => `http://127.0.0.1:${httpPort[path]}/${FILES.small}`;
  // warm-up: each path's first connections
  for (const path of ["public", "connect"] as const) await wrk(procs, { url: url(path), connections: 50, seconds: 1 });
  for (let round = 1; round <= b.rounds; round++) {
    const order: PrivatePath[] = round % 2 === 1 ? ["public", "connect"] : ["connect", "public"];
    for (const path of order) {
      const r = await wrk(procs, { url: url(path), connections: 50, seconds: b.seconds });
      if (r.errors > 0) throw new Error(`wrk through ${path} had ${r.errors} errors`);
      result.rps[path].push(r.reqPerSec);
      result.p99[path].push(r.p99Ms);
      b.say(`private     round ${round} HTTP 1 KiB ${path.padEnd(7)} ${fmt(r.reqPerSec)} req/s  p99 ${fmt(r.p99Ms)} ms`);
    }
    for (const path of order) {
      const before = tcpPids[path].map(cpuMs);
      const t: TransferResult = await pushThrough(procs, b.sink, b.source, tcpPort[path], b.tcpBytes, 120, `private-${path}`);
      if (t.received !== t.bytes) throw new Error(`raw TCP through ${path} lost ${t.bytes - t.received} bytes`);
      const spent = tcpPids[path].map((pid, i) => (cpuMs(pid) - before[i]!) / (t.bytes / 1024 ** 3));
      const all = spent.reduce((a, x) => a + x, 0);
      result.mibps[path].push(t.mibPerSec);
      result.cpuPerGiB[path].push(all);
      result.serverCpuPerGiB[path].push(spent[0]!);
      b.say(`private     round ${round} raw TCP    ${path.padEnd(7)} ${fmt(t.mibPerSec)} MiB/s  CPU ${fmt(all)} ms/GiB (server ${spent.map((x) => fmt(x)).join(", owner's agent ")}${path === "connect" ? " connector" : ""})`);
    }
  }
  for (const c of [connectTcp.child, connectHttp.child, privateTcp.child, privateHttp.child, publicTcp.child, publicHttp.child, server.child]) await procs.stop(c);
  return result;
}

export function privateRows(r: PrivateBench): Row[] {
  const cells = (xs: number[], unit = "") => `${xs.map((x) => fmt(x, unit)).join(" · ")} → **${fmt(median(xs), unit)}**`;
  const both = (k: keyof PrivateBench, higher: boolean) =>
    `connect ${cells(r[k].connect)}; public tcp ${cells(r[k].public)}; connect/public **${fmtRatio(ratio(median(r[k].connect), median(r[k].public)))}**${higher ? "" : " (lower is better)"}`;
  return [
    { scenario: "HTTP 1 KiB (wrk -t1 -c50) to nginx through burrow connect to a private tunnel, and through a public tcp tunnel", unit: "req/s", runs: {}, higherIsBetter: true, burrowText: both("rps", true), ratioText: { direct: "", ssh: "" } },
    { scenario: "HTTP 1 KiB p99 latency, the same runs", unit: "ms", runs: {}, higherIsBetter: false, burrowText: both("p99", false), ratioText: { direct: "", ssh: "" } },
    { scenario: "raw TCP upload into the sink through burrow connect, and through a public tcp tunnel", unit: "MiB/s", runs: {}, higherIsBetter: true, burrowText: both("mibps", true), ratioText: { direct: "", ssh: "" } },
    { scenario: "raw TCP upload: CPU per GiB of every burrow process on the path (server, owner's agent, and the connector)", unit: "ms", runs: {}, higherIsBetter: false, burrowText: both("cpuPerGiB", false), ratioText: { direct: "", ssh: "" } },
    { scenario: "raw TCP upload: the server's CPU per GiB alone", unit: "ms", runs: {}, higherIsBetter: false, burrowText: both("serverCpuPerGiB", false), ratioText: { direct: "", ssh: "" } },
  ];
}
