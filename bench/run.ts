/**
 * burrow's benchmark: `npm run bench`.
 *
 * One run, on this machine, of every scenario through three paths — direct
 * to nginx, through burrow (dist/burrow), and through `ssh -R` to a private
 * sshd (aes128-gcm) — interleaved round by round so that drift in the
 * machine's speed hits every path alike. Every figure that is judged is a
 * ratio taken inside this one run.
 *
 * Everything runs under one temp dir, listens on 127.0.0.1 only, and is
 * stopped by PID when the run ends, fails or is interrupted. Results: a
 * markdown table on stdout and in bench/results/latest.md, raw figures in
 * bench/results/latest.json.
 *
 * Settings (environment):
 *   BENCH_SECONDS=10          length of each wrk run
 *   BENCH_ROUNDS=2            rounds of each throughput scenario (each path once per round)
 *   BENCH_WARMUP_SECONDS=2    wrk warm-up per path before measuring
 *   BENCH_TCP_MIB=2048        bytes pushed per raw TCP run (MiB)
 *   BENCH_IPERF=1             also iperf3 single stream (0 to skip)
 *   BENCH_ISOLATION_ROUNDS=4  rounds of (alone, next to a stalled stream), order alternating
 *   BENCH_ISOLATION_SECONDS=5 length of each isolation run
 *   BENCH_AGENTS=10000        idle agents for the memory test (also measured at 1,000)
 *   BENCH_ONLY=http,tcp,...   run only some sections: http, tcp, iperf, isolation, inspector, peers, stream, idle, cluster, tls, udp, pool, private
 *   BENCH_BURROW=path         use this executable instead of dist/burrow
 *   BENCH_REBUILD=1           rebuild dist/burrow first
 *   BENCH_OUT=name            write bench/results/<name>.md/.json (default latest; partial with BENCH_ONLY)
 *   BENCH_BUN_SINK=1          use the Bun TCP source/sink even when a C compiler is around
 *   BENCH_KEEP=1              keep the temp dir (logs, configs) after the run
 *   BENCH_STRICT=1            exit 1 when a target fails
 *   BENCH_PEERS_*             the side-by-side run with bore and rathole: see bench/peers.ts
 */
import { execSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { cpus, loadavg, release, tmpdir, totalmem } from "node:os";
import { join } from "node:path";
import { GiB, iperf3, lostNote, MiB, pushThrough, wrk, type TransferResult, type WrkResult } from "./lib/measure.ts";
import { freePortRange, isListening, Processes, receiveQueue, rssKiB, until, type Child } from "./lib/proc.ts";
import { fmt, fmtRatio, median, PATHS, ratio, table, targetTable, type PathName, type Row, type Target } from "./lib/report.ts";
import {
  createToken,
  FILES,
  startBurrowAgent,
  startBurrowServer,
  startNginx,
  startSshd,
  startSshForward,
  tunnelHost,
  type BurrowServer,
} from "./lib/services.ts";
import { ensureBinary, ensurePackages, newerSources, tcpTools, tool } from "./lib/setup.ts";
import { inspectorOverhead, inspectorRows, inspectorTarget, type InspectorOverhead } from "./inspector.ts";
import { tlsPassthrough, tlsRows, type TlsPassthrough } from "./tls.ts";
import { privateRows, privateTunnels, type PrivateBench } from "./private.ts";
import { udpRows, udpTunnels, type UdpResults } from "./udp.ts";
import { clusterRelay, clusterRows, type ClusterRelay } from "./cluster.ts";
import { poolBench, poolRows, type PoolResults } from "./pool.ts";
import { idleAgents, streamMemory, type IdleAgents, type StreamMemory } from "./memory.ts";
import { sideBySide, sideBySideTable, sideBySideTargets, type SideBySide } from "./peers.ts";

const ROOT = join(import.meta.dir, "..");
const BENCH = import.meta.dir;
const STALL = join(BENCH, "tools", "stall.ts");
/** The raw TCP source command (C or Bun), set once the tools are ready. */
let SOURCE: string[] = [];

const envNum = (name: string, dflt: number) => {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return dflt;
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number (got '${raw}')`);
  return n;
};

const cfg = {
  seconds: envNum("BENCH_SECONDS", 10),
  rounds: Math.max(1, Math.round(envNum("BENCH_ROUNDS", 2))),
  warmupSeconds: envNum("BENCH_WARMUP_SECONDS", 2),
  tcpBytes: Math.round(envNum("BENCH_TCP_MIB", 2048) * MiB),
  iperf: envNum("BENCH_IPERF", 1) !== 0,
  isolationRounds: Math.max(1, Math.round(envNum("BENCH_ISOLATION_ROUNDS", 4))),
  isolationSeconds: envNum("BENCH_ISOLATION_SECONDS", 5),
  agents: Math.round(envNum("BENCH_AGENTS", 10_000)),
  only: process.env.BENCH_ONLY ? new Set(process.env.BENCH_ONLY.split(",").map((s) => s.trim())) : undefined,
  keep: process.env.BENCH_KEEP === "1",
  strict: process.env.BENCH_STRICT === "1",
};
const wants = (section: string) => !cfg.only || cfg.only.has(section);

const say = (s: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${s}`);

// ------------------------------------------------------------------ results

interface Results {
  date: string;
  command: string;
  config: typeof cfg & { only?: string[] };
  machine: Record<string, string | number>;
  burrow: { binary: string; version: string; commit: string; builtAt: string; staleSources: string[] };
  http1k: Partial<Record<PathName, Omit<WrkResult, "raw">[]>>;
  http10m: Partial<Record<PathName, Omit<WrkResult, "raw">[]>>;
  rawTcp: Partial<Record<PathName, TransferResult[]>>;
  iperf3: Partial<Record<PathName, TransferResult[]>>;
  iperf3Failures: string[];
  isolation?: {
    aloneMiBs: number[];
    stalledMiBs: number[];
    /** Bytes the stalled visitor left unread in its socket (it must not move during the run). */
    stalledQueueBytes: number[];
    /** Server RSS before the stalled visitor came and after the run beside it (KiB): the edge must not buffer the stalled stream. */
    serverRssKiB: { before: number; after: number }[];
    errors: number;
  };
  stream?: StreamMemory;
  idle?: IdleAgents;
  /** The request inspector's cost: HTTP 1 KiB with it on and off (bench/inspector.ts). */
  inspector?: InspectorOverhead;
  /** HTTP 1 KiB relayed by another node against the agent's own node (bench/cluster.ts). */
  cluster?: ClusterRelay;
  /** Every path side by side with bore, rathole and the rest (bench/peers.ts). */
  peers?: SideBySide;
  /** TLS passed through by name against the same TLS through a tcp tunnel (bench/tls.ts). */
  tls?: TlsPassthrough;
  /** burrow connect to a private tunnel against a public tcp tunnel (bench/private.ts). */
  private?: PrivateBench;
  udp?: UdpResults;
  /** One name served by a pool of two agents against one agent, and a rolling restart under load (bench/pool.ts). */
  pool?: PoolResults;
  errors: string[];
  loadavg: { start: number[]; end?: number[] };
}

const results: Results = {
  date: new Date().toISOString(),
  command: commandLine(),
  config: { ...cfg, only: cfg.only ? [...cfg.only] : undefined } as Results["config"],
  machine: {},
  burrow: { binary: "", version: "", commit: "", builtAt: "", staleSources: [] },
  http1k: {},
  http10m: {},
  rawTcp: {},
  iperf3: {},
  iperf3Failures: [],
  errors: [],
  loadavg: { start: loadavg() },
};

function commandLine(): string {
  const set = Object.entries(process.env)
    .filter(([k]) => k.startsWith("BENCH_"))
    .map(([k, v]) => `${k}=${v}`)
    .sort();
  return [...set, "npm run bench"].join(" ");
}

function push<T>(into: Partial<Record<PathName, T[]>>, path: PathName, value: T): void {
  (into[path] ??= []).push(value);
}

const strip = ({ raw: _raw, ...rest }: WrkResult) => rest;

// ------------------------------------------------------------------ machine

function machineInfo(bin: string): void {
  const sh = (cmd: string) => {
    try {
      return execSync(cmd, { encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] }).trim();
    } catch (e: any) {
      return String(e.stderr ?? e.stdout ?? "").trim();
    }
  };
  const os = /PRETTY_NAME="?([^"\n]+)"?/.exec(safeRead("/etc/os-release"))?.[1] ?? "";
  results.machine = {
    cpu: cpus()[0]?.model ?? "unknown",
    cores: cpus().length,
    memoryGiB: Math.round((totalmem() / GiB) * 10) / 10,
    kernel: release(),
    os,
    bun: Bun.version,
    nginx: sh(`${tool("nginx")} -v 2>&1`).replace(/^nginx version: /, ""),
    wrk: sh(`${tool("wrk")} -v 2>&1 | head -1`).split(" [")[0] ?? "",
    openssh: sh(`${tool("ssh")} -V 2>&1`).split(",")[0] ?? "",
    iperf3: sh(`${tool("iperf3")} --version 2>&1 | head -1`).split(" (")[0] ?? "",
  };
  const commit = sh(`git -C ${ROOT} rev-parse --short HEAD 2>/dev/null`);
  const dirty = sh(`git -C ${ROOT} status --porcelain -- src 2>/dev/null`) ? "+uncommitted src changes" : "";
  results.burrow = {
    binary: bin.startsWith(`${ROOT}/`) ? bin.slice(ROOT.length + 1) : bin,
    version: sh(`${bin} --version`).split("\n")[0]!,
    commit: `${commit}${dirty ? ` ${dirty}` : ""}`,
    builtAt: new Date(statSync(bin).mtimeMs).toISOString(),
    staleSources: process.env.BENCH_BURROW ? [] : newerSources(ROOT, bin),
  };
  if (results.burrow.staleSources.length) {
    say(`warning: dist/burrow is older than ${results.burrow.staleSources.length} file(s) in src/ (BENCH_REBUILD=1 rebuilds it)`);
  }
}

function safeRead(p: string): string {
  try {
    return readFileSync(p, "utf8");
  } catch {
    return "";
  }
}

// ------------------------------------------------------------------ the run

const dir = mkdtempSync(join(tmpdir(), "burrow-bench-"));
const logDir = join(dir, "logs");
mkdirSync(logDir);
const procs = new Processes(logDir);
let failed = false;

let interrupted = false;
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"] as const) {
  process.on(sig, () => {
    if (interrupted) return;
    interrupted = true;
    say(`${sig}: stopping everything`);
    void procs.stopAll().finally(() => {
      if (!cfg.keep) rmSync(dir, { recursive: true, force: true });
      process.exit(130);
    });
  });
}

try {
  if (process.platform !== "linux") throw new Error("the benchmark runs on Linux (it reads /proc)");
  await ensurePackages(say);
  const bin = await ensureBinary(ROOT, say);
  machineInfo(bin);
  say(`temp dir ${dir}; ${results.machine.cores} cores; ${results.burrow.version} (${results.burrow.commit})`);

  const nginx = await startNginx(procs, dir);
  const direct = `http://127.0.0.1:${nginx.port}`;
  say(`nginx on 127.0.0.1:${nginx.port}`);
  const tools = await tcpTools(BENCH, dir);
  SOURCE = tools.source;
  results.machine.tcpTools = tools.kind === "c" ? "C source and sink (bench/tools/*.c)" : "Bun source and sink (bench/tools/*.ts)";
  const sink = procs.spawn("sink", [...tools.sink, "0"]);
  const sinkPort = Number((await procs.waitFor(sink, /sink listening port=(\d+)/, 10_000))[1]);

  const needThroughput = ["http", "tcp", "iperf", "isolation", "inspector"].some(wants);
  if (needThroughput) await throughput(bin, nginx.port, direct, sinkPort, sink);
  if (wants("peers")) {
    results.peers = await sideBySide({ procs, bin, dir, root: ROOT, nginxPort: nginx.port, sink, sinkPort, source: SOURCE, cfg, say });
  }
  const memory = { procs, bin, dir, root: ROOT, say };
  if (wants("stream")) await streamMemory(memory, { nginxPort: nginx.port, sinkPort, sink, source: SOURCE }, (x) => (results.stream = x));
  if (wants("idle")) await idleAgents(memory, { nginxPort: nginx.port, agents: cfg.agents }, (x) => (results.idle = x));
  if (wants("cluster")) results.cluster = await clusterRelay(procs, bin, dir, nginx.port, cfg, say);
  if (wants("tls")) results.tls = await tlsPassthrough({ procs, bin, dir, rounds: cfg.rounds, say });
  if (wants("private")) {
    results.private = await privateTunnels({ procs, bin, dir, nginxPort: nginx.port, sink, sinkPort, source: SOURCE, rounds: cfg.rounds, seconds: cfg.seconds, tcpBytes: cfg.tcpBytes, say });
  }
  if (wants("pool")) results.pool = await poolBench(procs, bin, dir, nginx.port, cfg, say);
  if (wants("udp")) results.udp = await udpTunnels({ procs, bin, dir, root: ROOT, nginxPort: nginx.port, rounds: cfg.rounds, seconds: Math.min(cfg.seconds, 5), say });
} catch (err) {
  failed = true;
  results.errors.push((err as Error).stack ?? String(err));
  say(`FAILED: ${(err as Error).message}`);
} finally {
  await procs.stopAll();
  results.loadavg.end = loadavg();
}

const report = render();
console.log(`\n${report}`);
mkdirSync(join(BENCH, "results"), { recursive: true });
// a partial run (BENCH_ONLY) does not replace the full run's results
const outName = process.env.BENCH_OUT || (cfg.only ? "partial" : "latest");
writeFileSync(join(BENCH, "results", `${outName}.md`), `${report}\n`);
writeFileSync(join(BENCH, "results", `${outName}.json`), `${JSON.stringify(results, null, 2)}\n`);
say(`wrote bench/results/${outName}.md and bench/results/${outName}.json`);
if (cfg.keep || failed) say(`logs kept in ${dir}`);
else rmSync(dir, { recursive: true, force: true });
process.exit(failed || (cfg.strict && targets().some((t) => t.pass === false)) ? 1 : 0);

// ------------------------------------------------------------------ throughput: HTTP, raw TCP, isolation

async function throughput(bin: string, nginxPort: number, direct: string, sinkPort: number, sink: Child): Promise<void> {
  const tcpRange = freePortRange(20);
  const server = await startBurrowServer(procs, bin, dir, "burrow-server", tcpRange);
  const token = await createToken(server);
  const httpAgent = await startBurrowAgent(procs, bin, dir, "burrow-http", server, token, "http", nginxPort, ["--subdomain", "bench"]);
  const tcpAgent = await startBurrowAgent(procs, bin, dir, "burrow-tcp", server, token, "tcp", sinkPort);
  say(`burrow server edge :${server.edgePort}, http tunnel ${httpAgent.subdomain}, tcp tunnel :${tcpAgent.port}`);

  const sshd = await startSshd(procs, dir);
  const sshHttp = await startSshForward(procs, sshd, "ssh-http", nginxPort);
  const sshTcp = await startSshForward(procs, sshd, "ssh-tcp", sinkPort);
  say(`sshd :${sshd.port}, ssh -R http :${sshHttp.port}, tcp :${sshTcp.port}`);

  let iperfPorts: Partial<Record<PathName, number>> | undefined;
  let iperfServer: Child | undefined;
  const startIperfServer = async (port: number) => {
    const child = procs.spawn(`iperf3-server-${port}-${Date.now()}`, [tool("iperf3"), "-s", "-B", "127.0.0.1", "-p", String(port)]);
    await until("iperf3 to listen", () => {
      if (child.done) throw new Error(`iperf3 exited: ${procs.tail(child)}`);
      return isListening(port);
    }, 10_000);
    return child;
  };
  if (cfg.iperf && wants("iperf")) {
    const iperfPort = freePortRange(1).first;
    iperfServer = await startIperfServer(iperfPort);
    const iperfAgent = await startBurrowAgent(procs, bin, dir, "burrow-tcp-iperf", server, token, "tcp", iperfPort);
    const sshIperf = await startSshForward(procs, sshd, "ssh-iperf", iperfPort);
    iperfPorts = { direct: iperfPort, burrow: iperfAgent.port!, ssh: sshIperf.port };
  }

  const host = tunnelHost(server, httpAgent.subdomain!);
  const http: Record<PathName, { base: string; host?: string }> = {
    direct: { base: direct },
    burrow: { base: server.edgeUrl, host },
    ssh: { base: `http://127.0.0.1:${sshHttp.port}` },
  };
  // sanity: every path serves the exact files
  for (const p of PATHS) {
    for (const [file, size] of [
      [FILES.small, 1024],
      [FILES.medium, 10 * MiB],
    ] as const) {
      const res = await fetch(`${http[p].base}/${file}`, { headers: http[p].host ? { host: http[p].host! } : {} });
      const got = (await res.arrayBuffer()).byteLength;
      if (res.status !== 200 || got !== size) throw new Error(`${p} path: GET /${file} gave ${res.status} with ${got} bytes`);
    }
  }

  if (wants("http")) {
    if (cfg.warmupSeconds > 0) {
      say("warm-up");
      for (const p of PATHS) {
        await wrk(procs, { url: `${http[p].base}/${FILES.small}`, host: http[p].host, connections: 50, seconds: cfg.warmupSeconds });
        await wrk(procs, { url: `${http[p].base}/${FILES.medium}`, host: http[p].host, connections: 4, seconds: cfg.warmupSeconds });
      }
    }
    for (let round = 1; round <= cfg.rounds; round++) {
      for (const p of PATHS) {
        const r = await wrk(procs, { url: `${http[p].base}/${FILES.small}`, host: http[p].host, connections: 50, seconds: cfg.seconds });
        push(results.http1k, p, strip(r));
        say(`HTTP 1 KiB  round ${round} ${p.padEnd(6)} ${fmt(r.reqPerSec, "req/s")} req/s  p99 ${fmt(r.p99Ms)} ms${r.errors ? `  ${r.errors} errors` : ""}`);
      }
    }
    for (let round = 1; round <= cfg.rounds; round++) {
      for (const p of PATHS) {
        const r = await wrk(procs, { url: `${http[p].base}/${FILES.medium}`, host: http[p].host, connections: 4, seconds: cfg.seconds, timeoutS: 30 });
        push(results.http10m, p, strip(r));
        say(`10 MiB      round ${round} ${p.padEnd(6)} ${fmt(r.mibPerSec)} MiB/s${r.errors ? `  ${r.errors} errors` : ""}`);
      }
    }
  }

  if (wants("tcp")) {
    const ports: Record<PathName, number> = { direct: sinkPort, burrow: tcpAgent.port!, ssh: sshTcp.port };
    // a short push per path first: connections, JIT and buffers warm
    for (const p of PATHS) await pushThrough(procs, sink, SOURCE, ports[p], 64 * MiB, 60);
    for (let round = 1; round <= cfg.rounds; round++) {
      for (const p of PATHS) {
        const r = await pushThrough(procs, sink, SOURCE, ports[p], cfg.tcpBytes, 300);
        push(results.rawTcp, p, r);
        say(`raw TCP     round ${round} ${p.padEnd(6)} ${fmt(r.mibPerSec)} MiB/s (${fmt(r.seconds)} s)${lostNote(r)}`);
      }
    }
  }

  if (iperfPorts) {
    for (let round = 1; round <= cfg.rounds; round++) {
      for (const p of PATHS) {
        try {
          const r = await iperf3(procs, `iperf3-${p}-${round}`, iperfPorts[p]!, cfg.tcpBytes);
          push(results.iperf3, p, r);
          say(`iperf3      round ${round} ${p.padEnd(6)} ${fmt(r.mibPerSec)} MiB/s`);
        } catch (err) {
          const msg = `iperf3 through ${p}, round ${round}: ${(err as Error).message}`;
          results.iperf3Failures.push(msg);
          say(msg);
          // a test that hung may hold the server: start a fresh one on the same port
          await procs.stop(iperfServer!);
          iperfServer = await startIperfServer(iperfPorts.direct!);
        }
      }
    }
  }

  if (wants("isolation")) await isolation(server, host);
  if (wants("inspector")) {
    results.inspector = await inspectorOverhead({ procs, bin, dir, server, token, nginxPort, rounds: Math.max(cfg.rounds, 6), seconds: Math.min(cfg.seconds, 6), warmupSeconds: cfg.warmupSeconds, say });
  }

  // the memory phase runs on fresh servers: nothing of this phase keeps running
  for (const c of [...procs.children].reverse()) {
    if (c.name !== "nginx" && c.name !== "sink") await procs.stop(c);
  }
}

/**
 * A bulk download alone, and next to a stream on the same agent whose
 * visitor stopped reading; the two kinds of run alternate in order from
 * round to round (alone first, then stalled first) so drift cancels out.
 */
async function isolation(server: BurrowServer, host: string): Promise<void> {
  const iso: NonNullable<Results["isolation"]> = { aloneMiBs: [], stalledMiBs: [], stalledQueueBytes: [], serverRssKiB: [], errors: 0 };
  results.isolation = iso;
  const download = () =>
    wrk(procs, { url: `${server.edgeUrl}/${FILES.medium}`, host, connections: 1, seconds: cfg.isolationSeconds, timeoutS: 30 });
  const alone = async () => {
    const r = await download();
    iso.aloneMiBs.push(r.mibPerSec);
    iso.errors += r.errors;
    return r.mibPerSec;
  };
  const stalled = async (round: number) => {
    const rssBefore = rssKiB(server.child.pid);
    const stall = procs.spawn(`stall-${round}`, [process.execPath, STALL, "127.0.0.1", String(server.edgePort), host, `/${FILES.huge}`]);
    try {
      const m = await procs.waitFor(stall, /stalled local_port=(\d+)/, 15_000);
      const localPort = Number(m[1]);
      await Bun.sleep(1500); // the kernel buffers and the stream's credit window fill up
      const before = receiveQueue(localPort) ?? 0;
      const r = await download();
      const after = receiveQueue(localPort) ?? 0;
      const rssAfter = rssKiB(server.child.pid);
      if (stall.done) throw new Error(`the stalled visitor's connection ended: ${procs.tail(stall)}`);
      iso.stalledMiBs.push(r.mibPerSec);
      iso.stalledQueueBytes.push(after);
      iso.serverRssKiB.push({ before: rssBefore, after: rssAfter });
      iso.errors += r.errors;
      return { mibPerSec: r.mibPerSec, note: `stalled visitor holds ${fmt(before / MiB)}→${fmt(after / MiB)} MiB unread; server RSS ${fmt(rssBefore / 1024)}→${fmt(rssAfter / 1024)} MiB` };
    } finally {
      await procs.stop(stall);
    }
  };
  for (let round = 1; round <= cfg.isolationRounds; round++) {
    let a: number, b: Awaited<ReturnType<typeof stalled>>;
    if (round % 2 === 1) {
      a = await alone();
      b = await stalled(round);
    } else {
      b = await stalled(round);
      a = await alone();
    }
    say(`isolation   round ${round} alone ${fmt(a)} MiB/s, next to a stalled stream ${fmt(b.mibPerSec)} MiB/s (${b.note})`);
  }
}

// ------------------------------------------------------------------ the report

function rows(): Row[] {
  const of = <T>(src: Partial<Record<PathName, T[]>>, f: (x: T) => number) =>
    Object.fromEntries(Object.entries(src).map(([p, xs]) => [p, (xs as T[]).map(f)])) as Partial<Record<PathName, number[]>>;
  const out: Row[] = [];
  if (Object.keys(results.http1k).length) {
    out.push({ scenario: "HTTP 1 KiB (wrk -t1 -c50)", unit: "req/s", runs: of(results.http1k, (r) => r.reqPerSec), higherIsBetter: true });
    out.push({ scenario: "HTTP 1 KiB p99 latency (c=50)", unit: "ms", runs: of(results.http1k, (r) => r.p99Ms), higherIsBetter: false });
  }
  if (results.inspector) out.push(...inspectorRows(results.inspector));
  if (results.cluster) out.push(...clusterRows(results.cluster));
  if (results.tls) out.push(...tlsRows(results.tls));
  if (results.private) out.push(...privateRows(results.private));
  if (results.udp) out.push(...udpRows(results.udp));
  if (results.pool) out.push(...poolRows(results.pool));
  if (Object.keys(results.http10m).length) {
    out.push({ scenario: "10 MiB downloads (wrk -t1 -c4)", unit: "MiB/s", runs: of(results.http10m, (r) => r.mibPerSec), higherIsBetter: true });
  }
  if (Object.keys(results.rawTcp).length) {
    out.push({
      scenario: `raw TCP, ${fmt(cfg.tcpBytes / GiB)} GiB into a counting sink`,
      unit: "MiB/s",
      runs: of(results.rawTcp, (r) => r.mibPerSec),
      higherIsBetter: true,
      marks: lossMarks(results.rawTcp),
    });
  }
  if (Object.keys(results.iperf3).length || results.iperf3Failures.length) {
    const failedRuns = PATHS.map((p) => [p, results.iperf3Failures.filter((f) => f.startsWith(`iperf3 through ${p},`)).length] as const).filter(([, n]) => n > 0);
    out.push({
      scenario: "iperf3 single stream",
      note: failedRuns.length ? `(runs that hung: ${failedRuns.map(([p, n]) => `${p} ${n}`).join(", ")})` : undefined,
      unit: "MiB/s",
      runs: of(results.iperf3, (r) => r.mibPerSec),
      higherIsBetter: true,
    });
  }
  const iso = results.isolation;
  if (iso && iso.aloneMiBs.length) {
    out.push({ scenario: "isolation: 10 MiB downloads alone (wrk -c1)", unit: "MiB/s", runs: { burrow: iso.aloneMiBs }, higherIsBetter: true, ratioText: { direct: "", ssh: "" } });
    out.push({
      scenario: "isolation: same, next to a stalled stream on the same agent",
      note: iso.serverRssKiB.length
        ? `(the stalled visitor left ${fmt(median(iso.stalledQueueBytes) / MiB)} MiB unread; server RSS +${fmt(median(iso.serverRssKiB.map((r) => r.after - r.before)) / 1024)} MiB while it stalled)`
        : undefined,
      unit: "MiB/s",
      runs: { burrow: iso.stalledMiBs },
      higherIsBetter: true,
      ratioText: { direct: `stalled/alone ${fmtRatio(ratio(median(iso.stalledMiBs), median(iso.aloneMiBs)))}`, ssh: "" },
    });
  }
  const idle = results.idle;
  if (idle) {
    for (const s of idle.steps) {
      out.push({
        scenario: `server RSS per idle tunnel, ${s.count.toLocaleString("en-US")} agents`,
        unit: "KiB",
        runs: {},
        higherIsBetter: false,
        burrowText: `**${fmt(s.perTunnelKiB)}** (${fmt(idle.serverBaseKiB / 1024)} → ${fmt(s.serverKiB / 1024)} MiB; ${s.ready.toLocaleString("en-US")} ready in ${fmt(s.connectMs / 1000)} s, ${s.failed} refused)`,
        ratioText: { direct: "", ssh: "" },
      });
    }
  }
  const st = results.stream;
  if (st) {
    out.push({ scenario: "agent process RSS, one idle http tunnel", unit: "MiB", runs: {}, higherIsBetter: false, burrowText: `**${fmt(st.agentIdleKiB / 1024)}** (server ${fmt(st.serverIdleKiB / 1024)})`, ratioText: { direct: "", ssh: "" } });
    for (const [name, s] of [
      ["RSS growth, 1 GiB HTTP download through one tunnel", st.http],
      ["RSS growth, 1 GiB TCP upload through one tunnel", st.tcp],
    ] as const) {
      if (!s) continue;
      out.push({
        scenario: name,
        unit: "MiB",
        runs: {},
        higherIsBetter: false,
        burrowText: `server **+${fmt((s.serverMaxKiB - s.serverBaseKiB) / 1024)}**, agent **+${fmt((s.agentMaxKiB - s.agentBaseKiB) / 1024)}** (${fmt(s.mibPerSec)} MiB/s)`,
        ratioText: { direct: "", ssh: "" },
      });
    }
  }
  return out;
}

function targets(): Target[] {
  const m = (src: Partial<Record<PathName, number[]>>, p: PathName) => median(src[p] ?? []);
  const rps = { direct: m(mapRuns(results.http1k, (r) => r.reqPerSec), "direct"), burrow: m(mapRuns(results.http1k, (r) => r.reqPerSec), "burrow"), ssh: m(mapRuns(results.http1k, (r) => r.reqPerSec), "ssh") };
  const p99 = m(mapRuns(results.http1k, (r) => r.p99Ms), "burrow");
  const big = mapRuns(results.http10m, (r) => r.mibPerSec);
  const tcp = mapRuns(results.rawTcp, (r) => r.mibPerSec);
  const has = (x: number) => Number.isFinite(x);
  const check = (x: number, ok: (x: number) => boolean) => (has(x) ? ok(x) : null);
  const t: Target[] = [];
  const r1 = ratio(rps.burrow, rps.ssh);
  t.push({ name: "HTTP 1 KiB req/s vs OpenSSH", want: "≥ 3×", measured: fmtRatio(r1), pass: check(r1, (x) => x >= 3) });
  const r2 = ratio(rps.burrow, rps.direct);
  t.push({ name: "HTTP 1 KiB req/s vs direct", want: "≥ 0.35×", measured: fmtRatio(r2), pass: check(r2, (x) => x >= 0.35) });
  t.push({ name: "HTTP 1 KiB p99 at c=50 (median of runs)", want: "≤ 10 ms", measured: has(p99) ? `${fmt(p99)} ms` : "–", pass: check(p99, (x) => x <= 10) });
  t.push(inspectorTarget(results.inspector));
  const r3 = ratio(m(big, "burrow"), m(big, "ssh"));
  t.push({ name: "10 MiB downloads vs OpenSSH", want: "≥ 1.5×", measured: fmtRatio(r3), pass: check(r3, (x) => x >= 1.5) });
  const r4 = ratio(m(tcp, "burrow"), m(tcp, "ssh"));
  t.push({ name: "raw TCP vs OpenSSH", want: "≥ 1.2×", measured: fmtRatio(r4), pass: check(r4, (x) => x >= 1.2) });
  const idle = results.idle;
  for (const count of [1000, cfg.agents].filter((c, i, a) => a.indexOf(c) === i)) {
    const s = idle?.steps.find((x) => x.count === count);
    t.push({
      name: `server memory per idle tunnel, ${count.toLocaleString("en-US")} agents`,
      want: "≤ 30 KiB",
      measured: s ? `${fmt(s.perTunnelKiB)} KiB` : "–",
      pass: s ? s.perTunnelKiB <= 30 : idle?.error ? false : null,
    });
  }
  const last = idle?.steps.find((x) => x.count === 10_000);
  t.push({
    name: "10,000 idle agents on one server process",
    want: "all connected",
    measured: last ? `${last.ready.toLocaleString("en-US")} ready (server lists ${last.active.toLocaleString("en-US")}), ${last.failed} refused, connected in ${fmt(last.connectMs / 1000)} s` : idle?.error ? `failed: ${idle.error.split("\n")[0]}` : "–",
    pass: last ? last.ready >= 10_000 && last.active >= 10_000 && last.failed === 0 : idle?.error ? false : null,
  });
  const st = results.stream;
  for (const [label, s] of [
    ["HTTP", st?.http],
    ["TCP", st?.tcp],
  ] as const) {
    const server = s ? (s.serverMaxKiB - s.serverBaseKiB) / 1024 : NaN;
    const agent = s ? (s.agentMaxKiB - s.agentBaseKiB) / 1024 : NaN;
    t.push({
      name: `RSS growth, 1 GiB through one ${label} tunnel (server, agent)`,
      want: "< 16 MiB each",
      measured: s ? `+${fmt(server)} MiB, +${fmt(agent)} MiB` : "–",
      pass: s ? server < 16 && agent < 16 : null,
    });
  }
  const iso = results.isolation;
  const keep = iso ? ratio(median(iso.stalledMiBs), median(iso.aloneMiBs)) : NaN;
  t.push({
    name: "a stalled stream's cost to its neighbour",
    want: "< 10%",
    measured: has(keep) ? `${fmt((1 - keep) * 100)}% (${fmtRatio(keep)} of alone)` : "–",
    pass: check(keep, (x) => x > 0.9),
  });
  const sinkDirect = m(tcp, "direct");
  t.push({
    name: "check: the sink is not the bottleneck (direct raw TCP)",
    want: "> 1.5 GiB/s",
    measured: has(sinkDirect) ? `${fmt(sinkDirect / 1024)} GiB/s` : "–",
    pass: check(sinkDirect, (x) => x > 1.5 * 1024),
  });
  const transfers = [...Object.values(results.rawTcp).flat(), ...(st?.tcp ? [st.tcp] : [])];
  if (transfers.length || results.iperf3Failures.length) {
    const lost = lostBytes(transfers);
    const hung = results.iperf3Failures.length;
    const unclosed = transfers.filter((x) => x.hung).length;
    const problems = [
      lost.runs ? `${lost.runs} of ${transfers.length} pushes short by ${lost.bytes.toLocaleString("en-US")} bytes in all` : "",
      unclosed ? `${unclosed} push${unclosed > 1 ? "es" : ""} never saw its connection closed` : "",
      hung ? `${hung} iperf3 run${hung > 1 ? "s" : ""} hung` : "",
    ].filter(Boolean);
    t.push({
      name: "check: every TCP transfer complete (no bytes lost, no hang)",
      want: "all",
      measured: problems.length ? problems.join("; ") : "all",
      pass: problems.length === 0,
    });
  }
  if (wants("peers")) t.push(...sideBySideTargets(results.peers));
  const errs = [...Object.values(results.http1k), ...Object.values(results.http10m)].flat().reduce((a, r) => a + (r?.errors ?? 0), 0) + (iso?.errors ?? 0);
  const ran = Object.keys(results.http1k).length + Object.keys(results.http10m).length > 0;
  t.push({ name: "check: no HTTP errors in any wrk run", want: "0", measured: ran ? String(errs) : "–", pass: ran ? errs === 0 : null });
  return t;
}

/** "✗" after a transfer that lost bytes on the way. */
function lossMarks(src: Partial<Record<PathName, TransferResult[]>>): Partial<Record<PathName, string[]>> {
  return Object.fromEntries(Object.entries(src).map(([p, xs]) => [p, xs!.map((x) => (x.received < x.bytes ? " ✗" : ""))]));
}

function lostBytes(xs: (TransferResult | undefined)[]): { runs: number; bytes: number } {
  const bad = xs.filter((x): x is TransferResult => !!x && x.received < x.bytes);
  return { runs: bad.length, bytes: bad.reduce((a, x) => a + x.bytes - x.received, 0) };
}

function mapRuns<T>(src: Partial<Record<PathName, T[]>>, f: (x: T) => number): Partial<Record<PathName, number[]>> {
  return Object.fromEntries(Object.entries(src).map(([p, xs]) => [p, (xs as T[]).map(f)])) as Partial<Record<PathName, number[]>>;
}

function render(): string {
  const mc = results.machine;
  const t = targets();
  const passed = t.filter((x) => x.pass === true).length;
  const judged = t.filter((x) => x.pass !== null).length;
  const lines = [
    `### burrow benchmark, ${results.date.slice(0, 16).replace("T", " ")} UTC`,
    "",
    `- command: \`${results.command}\``,
    `- machine: ${mc.cpu}, ${mc.cores} cores, ${mc.memoryGiB} GiB RAM, ${mc.os}, Linux ${mc.kernel}; load average ${results.loadavg.start.map((x) => x.toFixed(2)).join(" ")} at start${results.loadavg.end ? `, ${results.loadavg.end.map((x) => x.toFixed(2)).join(" ")} at end` : ""}`,
    `- burrow: \`${results.burrow.binary.replace(ROOT + "/", "")}\` ${results.burrow.version} (commit ${results.burrow.commit}, built ${results.burrow.builtAt.slice(0, 16).replace("T", " ")}${results.burrow.staleSources.length ? `, **older than ${results.burrow.staleSources.length} src/ files**` : ""}); ${mc.nginx} (1 worker, sendfile, access_log off); ${mc.wrk}; ${mc.openssh} (\`ssh -R\`, aes128-gcm@openssh.com, private sshd); ${mc.iperf3}; raw TCP with the ${mc.tcpTools ?? "–"}; all on 127.0.0.1`,
    `- each throughput scenario: ${cfg.rounds} rounds, paths interleaved (${results.peers ? "side by side: every path of the table" : "direct, burrow, ssh"}) in every round; wrk runs ${cfg.seconds} s after a ${cfg.warmupSeconds} s warm-up per path; ratios are of the medians`,
    "",
    ...(rows().length ? [table(rows()), ""] : []),
    ...(results.peers ? [sideBySideTable(results.peers), ""] : []),
    `Targets: ${passed} of ${judged} pass.`,
    "",
    targetTable(t),
  ];
  if (results.errors.length) lines.push("", "Errors:", "", "```", ...results.errors, "```");
  return lines.join("\n");
}
