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
 *   BENCH_H2_IDLE=1000        idle HTTP/2 connections for the h2 section's memory figure
 *   BENCH_ONLY=http,tcp,...   run only some sections: http, tcp, iperf, isolation, inspector, policy, peers, stream, idle, cluster, tls, udp, pool, private, sshgw, h2
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
import { GiB, MiB } from "./lib/measure.ts";
import { Processes } from "./lib/proc.ts";
import { table, targetTable, type Row, type Target } from "./lib/report.ts";
import { startNginx } from "./lib/services.ts";
import { ensureBinary, ensurePackages, newerSources, tcpTools, tool } from "./lib/setup.ts";
import { checkFiles, startThreePaths } from "./paths.ts";
import { http10mRows, http10mTarget, http1kRows, http1kTargets, httpErrors, httpThroughput, type WrkRuns } from "./http.ts";
import { rawTcp, rawTcpRows, rawTcpTarget, sinkTarget, transfersTarget, type TransferRuns } from "./tcp.ts";
import { iperfRows, iperfSingleStream, startIperfPaths, type IperfPaths, type IperfRuns } from "./iperf.ts";
import { isolation, isolationRows, isolationTarget, type Isolation } from "./isolation.ts";
import { inspectorOverhead, inspectorRows, inspectorTarget, type InspectorOverhead } from "./inspector.ts";
import { policyCost, policyRows, policyTarget, type PolicyCost } from "./policy.ts";
import { tlsPassthrough, tlsRows, type TlsPassthrough } from "./tls.ts";
import { privateRows, privateTunnels, type PrivateBench } from "./private.ts";
import { sshGateway, sshGatewayRows, type GatewayBench } from "./ssh-gateway.ts";
import { udpRows, udpTunnels, type UdpResults } from "./udp.ts";
import { clusterRelay, clusterRows, type ClusterRelay } from "./cluster.ts";
import { poolBench, poolRows, type PoolResults } from "./pool.ts";
import { idleAgents, idleRows, idleTargets, streamMemory, streamRows, streamTargets, type IdleAgents, type StreamMemory } from "./memory.ts";
import { sideBySide, sideBySideTable, sideBySideTargets, type SideBySide } from "./peers.ts";
import { h2Bench, h2Rows, h2Table, h2Targets, type H2Results } from "./h2.ts";

const ROOT = join(import.meta.dir, "..");
const BENCH = import.meta.dir;

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
  h2Idle: Math.round(envNum("BENCH_H2_IDLE", 1000)),
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
  /** HTTP 1 KiB and 10 MiB through the three paths (bench/http.ts). */
  http1k: WrkRuns;
  http10m: WrkRuns;
  /** Raw TCP into the sink through the three paths (bench/tcp.ts). */
  rawTcp: TransferRuns;
  /** iperf3 single stream through the three paths (bench/iperf.ts). */
  iperf3: IperfRuns["iperf3"];
  iperf3Failures: string[];
  /** A download alone and next to a stalled stream (bench/isolation.ts). */
  isolation?: Isolation;
  stream?: StreamMemory;
  idle?: IdleAgents;
  /** The request inspector's cost: HTTP 1 KiB with it on and off (bench/inspector.ts). */
  inspector?: InspectorOverhead;
  /** A 10-rule traffic policy's cost: HTTP 1 KiB with it and without (bench/policy.ts). */
  policy?: PolicyCost;
  /** HTTP 1 KiB relayed by another node against the agent's own node (bench/cluster.ts). */
  cluster?: ClusterRelay;
  /** Every path side by side with bore, rathole and the rest (bench/peers.ts). */
  peers?: SideBySide;
  /** TLS passed through by name against the same TLS through a tcp tunnel (bench/tls.ts). */
  tls?: TlsPassthrough;
  /** burrow connect to a private tunnel against a public tcp tunnel (bench/private.ts). */
  private?: PrivateBench;
  /** Tunnels opened with ssh -R to burrow's SSH gateway, against burrow's agent and sshd (bench/ssh-gateway.ts). */
  sshGateway?: GatewayBench;
  udp?: UdpResults;
  /** One name served by a pool of two agents against one agent, and a rolling restart under load (bench/pool.ts). */
  pool?: PoolResults;
  /** HTTP/2 with h2load: direct, one nginx h2 hop, burrow; memory per idle h2 connection (bench/h2.ts). */
  h2?: H2Results;
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
  say(`nginx on 127.0.0.1:${nginx.port}`);
  const tools = await tcpTools(BENCH, dir);
  const source = tools.source;
  results.machine.tcpTools = tools.kind === "c" ? "C source and sink (bench/tools/*.c)" : "Bun source and sink (bench/tools/*.ts)";
  const sink = procs.spawn("sink", [...tools.sink, "0"]);
  const sinkPort = Number((await procs.waitFor(sink, /sink listening port=(\d+)/, 10_000))[1]);

  // throughput: one set of the three paths for http, tcp, iperf, isolation and the inspector
  if (["http", "tcp", "iperf", "isolation", "inspector", "policy"].some(wants)) {
    const paths = await startThreePaths({ procs, bin, dir, nginxPort: nginx.port, sinkPort, say });
    let iperf: IperfPaths | undefined;
    if (cfg.iperf && wants("iperf")) iperf = await startIperfPaths({ procs, bin, dir, paths, say });
    await checkFiles(paths);
    if (wants("http")) await httpThroughput({ procs, paths, rounds: cfg.rounds, seconds: cfg.seconds, warmupSeconds: cfg.warmupSeconds, say }, results);
    if (wants("tcp")) await rawTcp({ procs, paths, sink, source, rounds: cfg.rounds, bytes: cfg.tcpBytes, say }, results.rawTcp);
    if (iperf) await iperfSingleStream({ procs, rounds: cfg.rounds, bytes: cfg.tcpBytes, say }, iperf, results);
    if (wants("isolation")) await isolation({ procs, paths, rounds: cfg.isolationRounds, seconds: cfg.isolationSeconds, say }, (x) => (results.isolation = x));
    if (wants("inspector")) {
      results.inspector = await inspectorOverhead({ procs, bin, dir, server: paths.server, token: paths.token, nginxPort: nginx.port, rounds: Math.max(cfg.rounds, 6), seconds: Math.min(cfg.seconds, 6), warmupSeconds: cfg.warmupSeconds, say });
    }
    if (wants("policy")) {
      results.policy = await policyCost({ procs, bin, dir, server: paths.server, token: paths.token, nginxPort: nginx.port, rounds: Math.max(cfg.rounds, 6), seconds: Math.min(cfg.seconds, 6), warmupSeconds: cfg.warmupSeconds, say });
    }
    // the memory phase runs on fresh servers: nothing of this phase keeps running
    for (const c of [...procs.children].reverse()) {
      if (c.name !== "nginx" && c.name !== "sink") await procs.stop(c);
    }
  }
  if (wants("peers")) {
    results.peers = await sideBySide({ procs, bin, dir, root: ROOT, nginxPort: nginx.port, sink, sinkPort, source, cfg, say });
  }
  const memory = { procs, bin, dir, root: ROOT, say };
  if (wants("stream")) await streamMemory(memory, { nginxPort: nginx.port, sinkPort, sink, source }, (x) => (results.stream = x));
  if (wants("idle")) await idleAgents(memory, { nginxPort: nginx.port, agents: cfg.agents }, (x) => (results.idle = x));
  if (wants("cluster")) results.cluster = await clusterRelay(procs, bin, dir, nginx.port, cfg, say);
  if (wants("tls")) results.tls = await tlsPassthrough({ procs, bin, dir, rounds: cfg.rounds, say });
  if (wants("private")) {
    results.private = await privateTunnels({ procs, bin, dir, nginxPort: nginx.port, sink, sinkPort, source, rounds: cfg.rounds, seconds: cfg.seconds, tcpBytes: cfg.tcpBytes, say });
  }
  if (wants("sshgw")) {
    results.sshGateway = await sshGateway({ procs, bin, dir, nginxPort: nginx.port, sink, sinkPort, source, rounds: cfg.rounds, seconds: cfg.seconds, tcpBytes: cfg.tcpBytes, say });
  }
  if (wants("pool")) results.pool = await poolBench(procs, bin, dir, nginx.port, cfg, say);
  if (wants("udp")) results.udp = await udpTunnels({ procs, bin, dir, root: ROOT, nginxPort: nginx.port, rounds: cfg.rounds, seconds: Math.min(cfg.seconds, 5), say });
  if (wants("h2")) {
    await h2Bench({ procs, bin, dir, nginxPort: nginx.port, rounds: cfg.rounds, seconds: cfg.seconds, warmupSeconds: cfg.warmupSeconds, idleConnections: cfg.h2Idle, say }, (x) => (results.h2 = x));
  }
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

// ------------------------------------------------------------------ the report

/** The table's rows, in the order they have always had. */
function rows(): Row[] {
  return [
    ...http1kRows(results),
    ...(results.inspector ? inspectorRows(results.inspector) : []),
    ...(results.policy ? policyRows(results.policy) : []),
    ...(results.cluster ? clusterRows(results.cluster) : []),
    ...(results.tls ? tlsRows(results.tls) : []),
    ...(results.private ? privateRows(results.private) : []),
    ...(results.sshGateway ? sshGatewayRows(results.sshGateway) : []),
    ...(results.udp ? udpRows(results.udp) : []),
    ...(results.pool ? poolRows(results.pool) : []),
    ...h2Rows(results.h2),
    ...http10mRows(results),
    ...rawTcpRows(results.rawTcp, cfg.tcpBytes),
    ...iperfRows(results),
    ...isolationRows(results.isolation),
    ...idleRows(results.idle),
    ...streamRows(results.stream),
  ];
}

function targets(): Target[] {
  const transfers = [...Object.values(results.rawTcp).flat(), ...(results.stream?.tcp ? [results.stream.tcp] : [])];
  // wrk's errors in the HTTP scenarios and in the isolation runs
  const http = httpErrors(results);
  const errs = http.errors + (results.isolation?.errors ?? 0);
  return [
    ...http1kTargets(results),
    inspectorTarget(results.inspector),
    ...(results.policy ? [policyTarget(results.policy)] : []),
    http10mTarget(results),
    rawTcpTarget(results.rawTcp),
    ...idleTargets(results.idle, cfg.agents),
    ...streamTargets(results.stream),
    isolationTarget(results.isolation),
    sinkTarget(results.rawTcp),
    ...transfersTarget(transfers, results.iperf3Failures.length),
    ...(wants("peers") ? sideBySideTargets(results.peers) : []),
    ...(wants("h2") ? h2Targets(results.h2) : []),
    { name: "check: no HTTP errors in any wrk run", want: "0", measured: http.ran ? String(errs) : "–", pass: http.ran ? errs === 0 : null },
  ];
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
    ...(results.h2 && Object.keys(results.h2.runs).length ? [h2Table(results.h2), ""] : []),
    `Targets: ${passed} of ${judged} pass.`,
    "",
    targetTable(t),
  ];
  if (results.errors.length) lines.push("", "Errors:", "", "```", ...results.errors, "```");
  return lines.join("\n");
}
