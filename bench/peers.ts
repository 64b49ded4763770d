/**
 * Side by side with the Rust tunnels (`BENCH_ONLY=peers`, or part of a full
 * run): the same nginx files and the same counting sink through every path,
 * the paths interleaved round by round (the order reversed every other
 * round) so that drift in the machine's speed hits them alike:
 *
 *   direct        wrk straight to nginx
 *   nginx         a second nginx proxying to the first (keepalive upstream): one ordinary hop
 *   burrowHttp    burrow http tunnel, through the server's edge
 *   burrowTcp     burrow tcp tunnel (same server) carrying the same HTTP; raw TCP through it too
 *   bore, rathole bore 0.5.2 and rathole 0.5.0 with their defaults, carrying the same HTTP and raw TCP
 *   ssh           ssh -R to a private sshd (aes128-gcm)
 *
 * Per path: HTTP 1 KiB with wrk -t1 -c50 (req/s, p99, and the tunnel's CPU
 * per request: utime + stime from /proc of its server and client processes,
 * with their children, across the run, divided by the requests); the median
 * latency at c=1 (wrk -t1 -c1); 10 MiB files with wrk -t1 -c4; raw TCP
 * pushed into the sink (not for the HTTP-only paths).
 *
 * Settings (environment), besides BENCH_SECONDS, BENCH_ROUNDS,
 * BENCH_WARMUP_SECONDS and BENCH_TCP_MIB of bench/run.ts:
 *   BENCH_PEERS_DIR=dir         where the bore and rathole executables are
 *                               (default ../shared/peers/bin beside the repository, if it exists);
 *                               without them their rows are left out, said so, and the rest runs
 *   BENCH_PEERS_BUILD=1         build them first with build-peers.sh (beside that bin folder), given
 *   BENCH_PEERS_BORE_GIT=dir    the git dir of ekzhang/bore and
 *   BENCH_PEERS_RATHOLE_GIT=dir the git dir of rapiz1/rathole
 *   BENCH_PEERS_C1_SECONDS=5    length of each c=1 latency run
 *   BENCH_PEERS_SSH=1           also the ssh -R row (0 to leave it out)
 *
 * bore listens on every interface (port 7835 and its tunnel ports: it has
 * no bind option); every other process here listens on 127.0.0.1 only, and
 * all traffic goes to 127.0.0.1.
 */
import { join } from "node:path";
import { pushThrough, type TransferResult, wrk, type WrkResult } from "./lib/measure.ts";
import { freePortRange, treeCpuMs, type Child, type Processes } from "./lib/proc.ts";
import { BORE_CONTROL_PORT, findPeers, peerVersion, PEERS, startBore, startRathole, type PeerName } from "./lib/peers.ts";
import { fmt, fmtRatio, median, ratio, type Target } from "./lib/report.ts";
import { capturedRequests, createToken, FILES, requestLines, startBurrowAgent, startBurrowServer, startNginxProxy, startSshd, startSshForward, tunnelHost } from "./lib/services.ts";

export type SidePath = "direct" | "nginx" | "burrowHttp" | "burrowTcp" | "bore" | "rathole" | "ssh";

type Wrk = Omit<WrkResult, "raw">;

export interface PathMeasures {
  /** wrk -c50 on the 1 KiB file, with the path's CPU time per request (µs; NaN for direct). */
  http1k: (Wrk & { cpuUsPerRequest: number })[];
  /** wrk -c1 on the 1 KiB file. */
  c1: Wrk[];
  /** wrk -c4 on the 10 MiB file. */
  http10m: Wrk[];
  rawTcp: TransferResult[];
}

export interface SideBySide {
  /** The paths measured, in table order, with their titles. */
  paths: SidePath[];
  titles: Partial<Record<SidePath, string>>;
  /** Peers left out, and why. */
  missing: Partial<Record<PeerName, string>>;
  /** Paths that failed during the run (left out from then on). */
  failures: string[];
  c1Seconds: number;
  measures: Partial<Record<SidePath, PathMeasures>>;
  /**
   * What burrow http's agent did with its defaults, read at the end: the
   * requests its inspector held (the last 1,000) and the request lines in
   * its output file.
   */
  agentDefaults?: { inspector: boolean; captured: number; requestLines: number };
}

export interface PeersBench {
  procs: Processes;
  bin: string;
  dir: string;
  root: string;
  nginxPort: number;
  sink: Child;
  sinkPort: number;
  source: string[];
  cfg: { seconds: number; rounds: number; warmupSeconds: number; tcpBytes: number };
  say(line: string): void;
}

interface PathSpec {
  base: string;
  host?: string;
  /** Raw TCP into the sink through this port. */
  tcpPort?: number;
  /** Processes (with their children) whose CPU time is this path's cost. */
  cpuPids: number[];
  /** A failure ends only this path (a peer), not the run (burrow). */
  optional: boolean;
}

/** Runs wrk while counting the CPU time of `pids` (and their children); µs per request. */
async function withCpu(pids: number[], run: () => Promise<WrkResult>): Promise<Wrk & { cpuUsPerRequest: number }> {
  const cpu = () => pids.reduce((a, pid) => a + treeCpuMs(pid), 0);
  const before = pids.length ? cpu() : NaN;
  const { raw: _, ...r } = await run();
  return { ...r, cpuUsPerRequest: ((cpu() - before) * 1000) / r.requests };
}

const envNum = (name: string, dflt: number) => {
  const n = Number(process.env[name] || dflt);
  if (!Number.isFinite(n) || n < 0) throw new Error(`${name} must be a number`);
  return n;
};

export async function sideBySide(b: PeersBench): Promise<SideBySide> {
  const { procs, bin, dir, cfg, say } = b;
  const out: SideBySide = { paths: [], titles: {}, missing: {}, failures: [], c1Seconds: envNum("BENCH_PEERS_C1_SECONDS", 5), measures: {} };
  const specs: Partial<Record<SidePath, PathSpec>> = {};
  const add = (p: SidePath, title: string, spec: PathSpec) => {
    out.paths.push(p);
    out.titles[p] = title;
    specs[p] = spec;
  };
  // this section's processes, stopped at its end: nginx and the sink go on to the next
  const started: Child[] = [];
  try {
    add("direct", "direct (wrk to nginx)", { base: `http://127.0.0.1:${b.nginxPort}`, tcpPort: b.sinkPort, cpuPids: [], optional: false });

    const proxy = await startNginxProxy(procs, dir, b.nginxPort);
    started.push(proxy.child);
    add("nginx", "nginx, one hop (proxy_pass, keepalive)", { base: `http://127.0.0.1:${proxy.port}`, cpuPids: [proxy.child.pid], optional: true });

    const server = await startBurrowServer(procs, bin, dir, "burrow-peers-server", freePortRange(10));
    started.push(server.child);
    const token = await createToken(server);
    const agent = (name: string, kind: "http" | "tcp", port: number, extra: string[] = []) => startBurrowAgent(procs, bin, dir, name, server, token, kind, port, extra);
    const httpAgent = await agent("burrow-peers-http", "http", b.nginxPort, ["--subdomain", "peers"]);
    const tcpHttpAgent = await agent("burrow-peers-tcp-http", "tcp", b.nginxPort);
    const tcpSinkAgent = await agent("burrow-peers-tcp-sink", "tcp", b.sinkPort);
    started.push(httpAgent.child, tcpHttpAgent.child, tcpSinkAgent.child);
    add("burrowHttp", "burrow http", { base: server.edgeUrl, host: tunnelHost(server, httpAgent.subdomain!), cpuPids: [server.child.pid, httpAgent.child.pid], optional: false });
    add("burrowTcp", "burrow tcp (same server; raw TCP through its own tunnel)", {
      base: `http://127.0.0.1:${tcpHttpAgent.port}`,
      tcpPort: tcpSinkAgent.port,
      cpuPids: [server.child.pid, tcpHttpAgent.child.pid],
      optional: false,
    });

    const found = await findPeers(b.root, dir, procs, say);
    out.missing = found.missing;
    for (const name of PEERS) {
      const peerBin = found.bins[name];
      if (!peerBin) continue;
      try {
        const t = name === "bore" ? await startBore(procs, peerBin, b.nginxPort, b.sinkPort) : await startRathole(procs, peerBin, dir, b.nginxPort, b.sinkPort);
        started.push(...t.children);
        add(name, peerVersion(name, peerBin), { base: `http://127.0.0.1:${t.httpPort}`, tcpPort: t.tcpPort, cpuPids: t.httpPids, optional: true });
      } catch (err) {
        out.missing[name] = `it did not start: ${(err as Error).message.split("\n")[0]}`;
      }
    }
    for (const [name, why] of Object.entries(out.missing)) say(`side by side: ${name} not run: ${why}`);

    if (process.env.BENCH_PEERS_SSH !== "0") {
      // its own folder: the ssh -R paths of bench/paths.ts may have made keys under `dir` already
      const sshd = await startSshd(procs, join(dir, "side-by-side"));
      started.push(sshd.child);
      const sshHttp = await startSshForward(procs, sshd, "ssh-peers-http", b.nginxPort);
      const sshTcp = await startSshForward(procs, sshd, "ssh-peers-tcp", b.sinkPort);
      started.push(sshHttp.child, sshTcp.child);
      add("ssh", "OpenSSH -R (aes128-gcm)", { base: `http://127.0.0.1:${sshHttp.port}`, tcpPort: sshTcp.port, cpuPids: [sshd.child.pid, sshHttp.child.pid], optional: true });
    }
    say(`side by side: ${out.paths.join(", ")}`);

    // every path serves the exact files
    for (const p of out.paths) {
      const s = specs[p]!;
      for (const [file, size] of [
        [FILES.small, 1024],
        [FILES.medium, 10 * 1024 * 1024],
      ] as const) {
        const res = await fetch(`${s.base}/${file}`, { headers: s.host ? { host: s.host } : {} });
        const got = (await res.arrayBuffer()).byteLength;
        if (res.status !== 200 || got !== size) throw new Error(`${p}: GET /${file} gave ${res.status} with ${got} bytes`);
      }
    }

    const alive = () => out.paths.filter((p) => !out.failures.some((f) => f.startsWith(`${p}:`)));
    const each = async (what: string, round: number, f: (p: SidePath, s: PathSpec, m: PathMeasures) => Promise<void>) => {
      const order = alive();
      if (round % 2 === 0) order.reverse();
      for (const p of order) {
        const s = specs[p]!;
        try {
          await f(p, s, (out.measures[p] ??= { http1k: [], c1: [], http10m: [], rawTcp: [] }));
        } catch (err) {
          if (!s.optional) throw err;
          out.failures.push(`${p}: ${what}, round ${round}: ${(err as Error).message.split("\n")[0]}`);
          say(`side by side: ${p} failed (${what}); left out from here on`);
        }
      }
    };
    const url = (s: PathSpec, file: string) => `${s.base}/${file}`;

    if (cfg.warmupSeconds > 0) {
      say("side by side: warm-up");
      await each("warm-up", 1, async (_p, s) => {
        await wrk(procs, { url: url(s, FILES.small), host: s.host, connections: 50, seconds: cfg.warmupSeconds });
        await wrk(procs, { url: url(s, FILES.medium), host: s.host, connections: 4, seconds: cfg.warmupSeconds, timeoutS: 30 });
        if (s.tcpPort) await pushThrough(procs, b.sink, b.source, s.tcpPort, 64 * 1024 * 1024, 60);
      });
    }
    const line = (round: number, p: SidePath, text: string) => say(`side by side round ${round} ${p.padEnd(10)} ${text}`);
    for (let round = 1; round <= cfg.rounds; round++) {
      await each("HTTP 1 KiB c=50", round, async (p, s, m) => {
        const r = await withCpu(s.cpuPids, () => wrk(procs, { url: url(s, FILES.small), host: s.host, connections: 50, seconds: cfg.seconds }));
        m.http1k.push(r);
        line(round, p, `1 KiB c=50 ${fmt(r.reqPerSec, "req/s")} req/s  p99 ${fmt(r.p99Ms)} ms  CPU ${fmt(r.cpuUsPerRequest)} µs/request${r.errors ? `  ${r.errors} errors` : ""}`);
      });
    }
    for (let round = 1; round <= cfg.rounds; round++) {
      await each("HTTP 1 KiB c=1", round, async (p, s, m) => {
        const { raw: _, ...r } = await wrk(procs, { url: url(s, FILES.small), host: s.host, connections: 1, seconds: out.c1Seconds });
        m.c1.push(r);
        line(round, p, `1 KiB c=1  p50 ${fmt(r.p50Ms)} ms  (${fmt(r.reqPerSec, "req/s")} req/s)${r.errors ? `  ${r.errors} errors` : ""}`);
      });
    }
    for (let round = 1; round <= cfg.rounds; round++) {
      await each("10 MiB c=4", round, async (p, s, m) => {
        const { raw: _, ...r } = await wrk(procs, { url: url(s, FILES.medium), host: s.host, connections: 4, seconds: cfg.seconds, timeoutS: 30 });
        m.http10m.push(r);
        line(round, p, `10 MiB c=4 ${fmt(r.mibPerSec)} MiB/s${r.errors ? `  ${r.errors} errors` : ""}`);
      });
    }
    for (let round = 1; round <= cfg.rounds; round++) {
      await each("raw TCP", round, async (p, s, m) => {
        if (!s.tcpPort) return;
        const r: TransferResult = await pushThrough(procs, b.sink, b.source, s.tcpPort, cfg.tcpBytes, 300);
        m.rawTcp.push(r);
        line(round, p, `raw TCP    ${fmt(r.mibPerSec)} MiB/s${r.received < r.bytes ? `  LOST ${r.bytes - r.received} bytes` : ""}${r.hung ? "  (never closed)" : ""}`);
      });
    }
    out.agentDefaults = { inspector: httpAgent.inspector !== undefined, captured: await capturedRequests(httpAgent), requestLines: requestLines(procs, httpAgent.child) };
    return out;
  } finally {
    for (const c of started.reverse()) await procs.stop(c);
  }
}

// ------------------------------------------------------------------ report

const med = (xs: number[] | undefined) => median(xs ?? []);
const cell = (xs: number[], unit = "", f = fmt) => (xs.length ? `${xs.map((x) => f(x, unit)).join(" · ")} → **${f(median(xs), unit)}**` : "–");
/** Latencies at c=1 are tens of µs: three decimals of a ms. */
const fine = (x: number) => (Number.isFinite(x) ? (x < 10 ? x.toFixed(3) : fmt(x)) : "–");

/** The side-by-side table: one row per path, medians in bold after each run's figure. */
export function sideBySideTable(sb: SideBySide): string {
  const direct = med(sb.measures.direct?.http1k.map((r) => r.reqPerSec));
  const lines = [
    `Side by side (paths interleaved, ${sb.measures.direct?.http1k.length ?? 0} rounds; c=1 runs ${sb.c1Seconds} s; CPU: the tunnel's server and client processes, utime + stime):`,
    "",
    "| path | 1 KiB req/s c=50 | × direct | p99 ms | c=1 p50 ms | 10 MiB MiB/s | CPU µs/request | raw TCP MiB/s |",
    "|---|---|---|---|---|---|---|---|",
  ];
  for (const p of sb.paths) {
    const m = sb.measures[p];
    if (!m) continue;
    const rps = m.http1k.map((r) => r.reqPerSec);
    lines.push(
      `| ${sb.titles[p]} | ${cell(rps, "req/s")} | ${fmtRatio(ratio(median(rps), direct))} | ${cell(m.http1k.map((r) => r.p99Ms))} | ${cell(m.c1.map((r) => r.p50Ms), "", fine)} | ${cell(m.http10m.map((r) => r.mibPerSec))} | ${p === "direct" ? "–" : cell(m.http1k.map((r) => r.cpuUsPerRequest))} | ${cell(m.rawTcp.map((r) => r.mibPerSec))} |`,
    );
  }
  const d = sb.agentDefaults;
  if (d) {
    lines.push(
      "",
      `- burrow's agents ran with their defaults, their output in a file: burrow http's inspector ${d.inspector ? `on, holding ${d.captured.toLocaleString("en-US")} requests at the end (the last 1,000, fewer once their bodies pass 256 MiB)` : "OFF"}, ${d.requestLines.toLocaleString("en-US")} request lines written (one per request it served, the warm-ups' too).`,
    );
  }
  if (sb.paths.includes("bore")) lines.push("", `- bore has no bind option: its control port ${BORE_CONTROL_PORT} and its tunnel ports listened on every interface; all traffic went to 127.0.0.1.`);
  const missing = Object.entries(sb.missing);
  if (missing.length) lines.push("", ...missing.map(([name, why]) => `- ${name}'s row was not run: ${why}.`));
  if (sb.failures.length) lines.push("", ...sb.failures.map((f) => `- failed: ${f}`));
  return lines.join("\n");
}

/** The targets of the HTTP-path rebuild, judged within this run. */
export function sideBySideTargets(sb: SideBySide | undefined): Target[] {
  const m = (p: SidePath, f: (x: PathMeasures) => number[]) => (sb?.measures[p] ? med(f(sb.measures[p]!)) : NaN);
  const rps = (p: SidePath) => m(p, (x) => x.http1k.map((r) => r.reqPerSec));
  const big = (p: SidePath) => m(p, (x) => x.http10m.map((r) => r.mibPerSec));
  const tcp = (p: SidePath) => m(p, (x) => x.rawTcp.map((r) => r.mibPerSec));
  const best = (f: (p: SidePath) => number) => Math.max(...(["bore", "rathole"] as const).map(f).filter(Number.isFinite));
  const noPeers = !sb ? "–" : `– (no bore or rathole: ${Object.values(sb.missing).join("; ") || "they failed"})`;
  const ratioTarget = (name: string, want: number, a: number, b: number, bIsPeers = false): Target => {
    const x = ratio(a, b);
    return { name, want: `≥ ${want.toFixed(2)}×`, measured: Number.isFinite(x) ? fmtRatio(x) : bIsPeers ? noPeers : "–", pass: Number.isFinite(x) ? x >= want : null };
  };
  const p99 = m("burrowHttp", (x) => x.http1k.map((r) => r.p99Ms));
  const added = m("burrowHttp", (x) => x.c1.map((r) => r.p50Ms)) - m("direct", (x) => x.c1.map((r) => r.p50Ms));
  const cpu = ratio(
    m("burrowHttp", (x) => x.http1k.map((r) => r.cpuUsPerRequest)),
    m("burrowTcp", (x) => x.http1k.map((r) => r.cpuUsPerRequest)),
  );
  const all = sb ? Object.values(sb.measures).flatMap((x) => [...x!.http1k, ...x!.c1, ...x!.http10m]) : [];
  const errors = all.reduce((a, r) => a + r.errors, 0);
  const lost = sb ? Object.values(sb.measures).flatMap((x) => x!.rawTcp).filter((r) => r.received < r.bytes || r.hung).length : 0;
  // every request measured through burrow http has its line (the warm-ups add more)
  const served = sb?.measures.burrowHttp ? [...sb.measures.burrowHttp.http1k, ...sb.measures.burrowHttp.c1, ...sb.measures.burrowHttp.http10m].reduce((a, r) => a + r.requests, 0) : 0;
  const d = sb?.agentDefaults;
  return [
    {
      name: "check: burrow http's agent ran with its defaults (inspector capturing, a line per request in its output file)",
      want: "all",
      measured: d ? `inspector ${d.inspector ? "on" : "off"}, ${d.captured.toLocaleString("en-US")} held; ${d.requestLines.toLocaleString("en-US")} lines for ${served.toLocaleString("en-US")} measured requests` : "–",
      pass: d ? d.inspector && d.captured > 0 && d.requestLines >= served : null,
    },
    ratioTarget("side by side: HTTP 1 KiB req/s, burrow http vs direct", 0.4, rps("burrowHttp"), rps("direct")),
    ratioTarget("side by side: HTTP 1 KiB req/s, burrow http vs the better of bore and rathole", 1, rps("burrowHttp"), best(rps), true),
    {
      name: "side by side: CPU per HTTP 1 KiB request, burrow http vs burrow tcp (server + agent)",
      want: "≤ 1.50×",
      measured: Number.isFinite(cpu) ? fmtRatio(cpu) : "–",
      pass: Number.isFinite(cpu) ? cpu <= 1.5 : null,
    },
    { name: "side by side: HTTP 1 KiB p99 at c=50, burrow http", want: "≤ 10 ms", measured: Number.isFinite(p99) ? `${fmt(p99)} ms` : "–", pass: Number.isFinite(p99) ? p99 <= 10 : null },
    {
      name: "side by side: latency added at c=1 (p50, burrow http − direct)",
      want: "≤ 0.20 ms",
      measured: Number.isFinite(added) ? `${fine(added)} ms` : "–",
      pass: Number.isFinite(added) ? added <= 0.2 : null,
    },
    ratioTarget("side by side: 10 MiB downloads, burrow http vs the better of bore and rathole", 1, big("burrowHttp"), best(big), true),
    ratioTarget("side by side: raw TCP, burrow tcp vs the better of bore and rathole", 1, tcp("burrowTcp"), best(tcp), true),
    {
      name: "check: side by side ran clean (no HTTP errors, every TCP push complete, no path failed)",
      want: "all",
      measured: sb ? `${errors} HTTP errors, ${lost} bad pushes, ${sb.failures.length} failed paths` : "–",
      pass: sb ? errors === 0 && lost === 0 && sb.failures.length === 0 : null,
    },
  ];
}
