/**
 * HTTP/2 to visitors (`BENCH_ONLY=h2`, or part of a full run): nginx's 1 KiB
 * file fetched with `h2load -c 10 -m 10` (10 connections, 10 streams each,
 * prior knowledge on plain ports) through three paths, interleaved round by
 * round (the order reversed every other round), after one warm-up run each:
 *
 *   direct    an nginx server block speaking h2c itself, serving the file
 *   nginx     one ordinary h2 hop: an nginx h2c listener with proxy_pass to
 *             the origin nginx over HTTP/1.1 keepalive connections
 *   burrow    burrow's plain public port (prior knowledge), the tunnel's
 *             name as :authority, an http tunnel (the agent with its
 *             defaults) to the origin nginx over HTTP/1.1
 *
 * Per path: req/s, h2load's request time (mean, sd, max: it gives no
 * percentiles), and the CPU per request of the path's own processes (the
 * serving nginx; the proxy nginx; burrow's server and agent), from /proc.
 * Then memory: BENCH_H2_IDLE (1,000) idle h2 connections (preface, SETTINGS
 * and its ACK, then nothing) to a fresh burrow server's plain port, and to
 * the direct nginx for scale: the RSS growth divided by the connections.
 */
import { join } from "node:path";
import { idleMemory, type IdleMemory } from "./lib/h2-idle.ts";
import { h2load, type H2loadResult } from "./lib/h2load.ts";
import { freePort, freePortRange, treeCpuMs, type Child, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row, type Target } from "./lib/report.ts";
import { createToken, FILES, runNginx, startBurrowAgent, startBurrowServer, tunnelHost } from "./lib/services.ts";
import { tool } from "./lib/setup.ts";

export type H2Path = "direct" | "nginx" | "burrow";
const H2_PATHS: H2Path[] = ["direct", "nginx", "burrow"];
const TITLES: Record<H2Path, string> = {
  direct: "direct (nginx speaks h2c itself)",
  nginx: "nginx, one h2 hop (h2c in, proxy_pass over HTTP/1.1 keepalive)",
  burrow: "burrow http (prior knowledge on the plain port)",
};
const CLIENTS = 10;
const STREAMS = 10;
/** The judged figure: burrow against one nginx h2 hop. */
const WANT_VS_HOP = 0.5;
/** A check of judgement, not a target: an idle h2 connection should cost less than an idle tunnel (≤ 30 KiB). */
const IDLE_KIB_CHECK = 16;

export interface H2Run extends H2loadResult {
  /** CPU time of the path's own processes per request, µs. */
  cpuUsPerRequest: number;
  /** The same, process by process (burrow: server, agent). */
  cpuUsPerRequestEach: number[];
}


export interface H2Results {
  h2load: string;
  nginx: string;
  seconds: number;
  runs: Partial<Record<H2Path, H2Run[]>>;
  idle: { burrow?: IdleMemory; nginx?: IdleMemory };
  error?: string;
}

export interface H2Bench {
  procs: Processes;
  bin: string;
  dir: string;
  /** The origin: the bench's nginx, HTTP/1.1, serving the files. */
  nginxPort: number;
  rounds: number;
  seconds: number;
  warmupSeconds: number;
  idleConnections: number;
  say(line: string): void;
}

interface PathSpec {
  url: string;
  connectTo?: string;
  cpuPids: number[];
}

/** nginx 1.25.1 moved h2 from `listen ... http2` to `http2 on;`; 1.22 (Debian 12) speaks h2c with the former. */
function h2Directives(version: string): { listen: string; on: string } {
  const [a = 0, b = 0, c = 0] = (/nginx\/(\d+)\.(\d+)\.(\d+)/.exec(version)?.slice(1) ?? []).map(Number);
  const modern = a > 1 || (a === 1 && (b > 25 || (b === 25 && c >= 1)));
  return modern ? { listen: "", on: "\n    http2 on;" } : { listen: " http2", on: "" };
}

/** Sanity before any figure: each path answers the 1 KiB file over HTTP/2. */
async function checkPath(procs: Processes, p: H2Path, s: PathSpec): Promise<void> {
  const args = [tool("curl"), "-sS", "--http2-prior-knowledge", "-o", "/dev/null", "-w", "%{http_code} %{http_version} %{size_download}", "--max-time", "10"];
  if (s.connectTo) args.push("--connect-to", `::${s.connectTo}`);
  const r = await procs.run([...args, s.url], { timeoutMs: 20_000 });
  if (r.stdout.trim() !== "200 2 1024") throw new Error(`h2 ${p} path: GET ${s.url} gave '${r.stdout.trim()}' ${r.stderr.trim()}`);
}

export async function h2Bench(b: H2Bench, record: (x: H2Results) => void): Promise<void> {
  const { procs, bin, dir, say } = b;
  const nginxVersion = (await procs.run([tool("nginx"), "-v"], { timeoutMs: 10_000 })).stderr.trim().replace(/^nginx version: /, "");
  const out: H2Results = {
    h2load: (await procs.run([tool("h2load"), "--version"], { timeoutMs: 10_000 })).stdout.trim(),
    nginx: nginxVersion,
    seconds: b.seconds,
    runs: {},
    idle: {},
  };
  record(out);
  const started: Child[] = [];
  try {
    const d = h2Directives(nginxVersion);
    const directPort = freePort();
    const direct = await runNginx(procs, "nginx-h2", join(dir, "nginx-h2"), directPort, `
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${directPort}${d.listen};${d.on}
    root ${join(dir, "nginx", "www")};
    location / { }
  }`);
    started.push(direct);
    const hopPort = freePort();
    const hop = await runNginx(procs, "nginx-h2-proxy", join(dir, "nginx-h2-proxy"), hopPort, `
  upstream origin {
    server 127.0.0.1:${b.nginxPort};
    keepalive 256; # above the 100 streams in flight, so no upstream connection is closed after its response
    keepalive_requests 100000000;
  }
  server {
    listen 127.0.0.1:${hopPort}${d.listen};${d.on}
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_max_temp_file_size 0;
    }
  }`);
    started.push(hop);
    const server = await startBurrowServer(procs, bin, dir, "burrow-h2-server", freePortRange(2));
    started.push(server.child);
    const token = await createToken(server);
    const agent = await startBurrowAgent(procs, bin, dir, "burrow-h2-http", server, token, "http", b.nginxPort, ["--subdomain", "h2bench"]);
    started.push(agent.child);
    const specs: Record<H2Path, PathSpec> = {
      direct: { url: `http://127.0.0.1:${directPort}/${FILES.small}`, cpuPids: [direct.pid] },
      nginx: { url: `http://127.0.0.1:${hopPort}/${FILES.small}`, cpuPids: [hop.pid] },
      burrow: { url: `http://${tunnelHost(server, agent.subdomain!)}/${FILES.small}`, connectTo: `127.0.0.1:${server.edgePort}`, cpuPids: [server.child.pid, agent.child.pid] },
    };
    say(`h2          nginx h2c :${directPort}, nginx h2 hop :${hopPort}, burrow edge :${server.edgePort} (${nginxVersion}, ${out.h2load})`);
    for (const p of H2_PATHS) await checkPath(procs, p, specs[p]);

    const run = async (s: PathSpec, seconds: number): Promise<H2Run> => {
      const cpu = () => s.cpuPids.map((pid) => treeCpuMs(pid));
      const before = cpu();
      const r = await h2load(procs, { url: s.url, connectTo: s.connectTo, clients: CLIENTS, streams: STREAMS, seconds, warmupSeconds: 0 });
      if (r.protocol !== "h2c") throw new Error(`h2load spoke ${r.protocol} to ${s.url}, not h2c`);
      const each = cpu().map((ms, i) => ((ms - before[i]!) * 1000) / r.requests);
      return { ...r, cpuUsPerRequest: each.reduce((a, x) => a + x, 0), cpuUsPerRequestEach: each };
    };
    if (b.warmupSeconds > 0) for (const p of H2_PATHS) await run(specs[p], b.warmupSeconds);
    for (let round = 1; round <= b.rounds; round++) {
      const order = round % 2 === 1 ? H2_PATHS : [...H2_PATHS].reverse();
      for (const p of order) {
        const r = await run(specs[p], b.seconds);
        (out.runs[p] ??= []).push(r);
        say(
          `h2          round ${round} ${p.padEnd(6)} ${fmt(r.reqPerSec, "req/s")} req/s  request ${fmt(r.meanMs)} ± ${fmt(r.sdMs)} ms, max ${fmt(r.maxMs)}  CPU ${fmt(r.cpuUsPerRequest)} µs/request${r.cpuUsPerRequestEach.length > 1 ? ` (${r.cpuUsPerRequestEach.map((x) => fmt(x)).join(" + ")})` : ""}${r.errors ? `  ${r.errors} errors` : ""}`,
        );
      }
    }
    for (const c of [agent.child, server.child, hop]) await procs.stop(c);

    // memory: idle h2 connections, on a fresh server (no tunnel needed: the preface is taken before any name)
    const n = b.idleConnections;
    if (n > 0) {
      const idleServer = await startBurrowServer(procs, bin, dir, "burrow-h2-idle-server", freePortRange(2), ["--max-conns-per-ip", String(n + 1000)]);
      started.push(idleServer.child);
      await Bun.sleep(2000);
      out.idle.burrow = await idleMemory(idleServer.child.pid, idleServer.edgePort, n);
      await procs.stop(idleServer.child);
      out.idle.nginx = await idleMemory(direct.pid, directPort, n);
      for (const [who, m] of Object.entries(out.idle)) {
        say(`h2          ${n} idle h2 connections to ${who}: RSS ${fmt(m.baseKiB / 1024)} → ${fmt(m.heldKiB / 1024)} MiB, ${fmt(m.perConnectionKiB)} KiB each (${m.alive} still open)`);
      }
    }
  } catch (err) {
    out.error = (err as Error).message;
    throw err;
  } finally {
    for (const c of started.reverse()) await procs.stop(c);
  }
}

// ------------------------------------------------------------------ the report

const runsOf = (r: H2Results | undefined, p: H2Path, f: (x: H2Run) => number) => (r?.runs[p] ?? []).map(f);
const med = (r: H2Results | undefined, p: H2Path, f: (x: H2Run) => number) => median(runsOf(r, p, f));
const rps = (x: H2Run) => x.reqPerSec;

/** Its own table: three paths, not the main table's direct, burrow and ssh. */
export function h2Table(r: H2Results): string {
  const lines = [
    `HTTP/2: nginx's 1 KiB file, \`h2load -t1 -c ${CLIENTS} -m ${STREAMS}\` (prior knowledge), ${r.seconds} s per run, paths interleaved; ${r.h2load}, ${r.nginx}`,
    "",
    "| path | req/s (runs → median) | request time, mean ± sd (max), ms | CPU µs/request | × direct | × nginx hop |",
    "|---|---|---|---|---|---|",
  ];
  for (const p of H2_PATHS) {
    const xs = runsOf(r, p, rps);
    if (!xs.length) continue;
    const m = median(xs);
    lines.push(
      `| ${TITLES[p]} | ${xs.map((x) => fmt(x, "req/s")).join(" · ")} → **${fmt(m, "req/s")}** | ${fmt(med(r, p, (x) => x.meanMs))} ± ${fmt(med(r, p, (x) => x.sdMs))} (${fmt(med(r, p, (x) => x.maxMs))}) | ${fmt(med(r, p, (x) => x.cpuUsPerRequest))}${p === "burrow" ? ` (server ${fmt(med(r, p, (x) => x.cpuUsPerRequestEach[0]!))}, agent ${fmt(med(r, p, (x) => x.cpuUsPerRequestEach[1]!))})` : ""} | ${fmtRatio(ratio(m, med(r, "direct", rps)))} | ${p === "direct" ? "" : fmtRatio(ratio(m, med(r, "nginx", rps)))} |`,
    );
  }
  return lines.join("\n");
}

/** The main table's row: memory per idle h2 connection (nginx in the direct column). */
export function h2Rows(r: H2Results | undefined): Row[] {
  const m = r?.idle.burrow;
  if (!m) return [];
  const ng = r.idle.nginx;
  return [
    {
      scenario: `server RSS per idle h2 connection, ${m.connections.toLocaleString("en-US")} connections (direct: the h2c nginx)`,
      unit: "KiB",
      runs: ng ? { direct: [ng.perConnectionKiB] } : {},
      higherIsBetter: false,
      burrowText: `**${fmt(m.perConnectionKiB)}** (${fmt(m.baseKiB / 1024)} → ${fmt(m.heldKiB / 1024)} MiB; ${m.alive.toLocaleString("en-US")} still open)`,
      ratioText: { direct: ng ? fmtRatio(ratio(m.perConnectionKiB, ng.perConnectionKiB)) : "", ssh: "" },
    },
  ];
}

export function h2Targets(r: H2Results | undefined): Target[] {
  const vsHop = ratio(med(r, "burrow", rps), med(r, "nginx", rps));
  const all = r ? Object.values(r.runs).flat() : [];
  const errors = all.reduce((a, x) => a + x.errors, 0);
  const idle = Object.values(r?.idle ?? {});
  const dropped = idle.reduce((a, m) => a + (m.connections - m.alive), 0);
  const mem = r?.idle.burrow;
  return [
    {
      name: `HTTP/2 1 KiB req/s (h2load -c ${CLIENTS} -m ${STREAMS}), burrow vs one nginx h2 hop`,
      want: `≥ ${WANT_VS_HOP.toFixed(2)}×`,
      measured: Number.isFinite(vsHop) ? fmtRatio(vsHop) : "–",
      pass: Number.isFinite(vsHop) ? vsHop >= WANT_VS_HOP : r?.error ? false : null,
    },
    {
      name: `check: server memory per idle h2 connection, burrow${mem ? `, ${mem.connections.toLocaleString("en-US")} connections` : ""}`,
      want: `≤ ${IDLE_KIB_CHECK} KiB`,
      measured: mem ? `${fmt(mem.perConnectionKiB)} KiB` : "–",
      pass: mem ? mem.perConnectionKiB <= IDLE_KIB_CHECK : null,
    },
    {
      name: "check: HTTP/2 ran clean (no failed request in any h2load run, every idle connection held)",
      want: "all",
      measured: r ? `${errors} failed requests, ${dropped} idle connections dropped${r.error ? `; failed: ${r.error.split("\n")[0]}` : ""}` : "–",
      pass: r ? errors === 0 && dropped === 0 && !r.error : null,
    },
  ];
}
