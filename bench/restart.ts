/**
 * What a restart costs visitors: wrk runs through an http tunnel (nginx's
 * 1 KiB file) while the server gets SIGTERM and a second server starts on
 * the same data dir and ports. Measured, per run: wrk's failed requests
 * (socket errors and non-2xx), the longest span in which a probe visitor
 * (one request every 10 ms on a new connection) got no 200, and how soon the
 * agent was back (its second "Forwarding" line) after the new server listened.
 *
 * Two ways to start the successor, each BENCH_RESTART_ROUNDS times (3):
 * - "handover": as soon as the old one has let go of its ports (its
 *   "shutting down" line), while it still drains;
 * - "after exit": once the old process has exited, as systemd's restart does.
 *
 *   npm run bench:restart        (Linux; run by hand, never in CI)
 *
 * Installs nginx and wrk with apt-get if missing, uses dist/burrow (built if
 * missing; BENCH_BURROW=path for another), writes bench/results/restart.md.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseWrk } from "./lib/measure.ts";
import { freePort, Processes } from "./lib/proc.ts";
import { ADMIN_PASSWORD, FILES, startNginx, tunnelHost } from "./lib/services.ts";
import { ensureBinary, ensurePackages, tool } from "./lib/setup.ts";

const ROOT = join(import.meta.dir, "..");
const ROUNDS = Math.max(1, Number(process.env.BENCH_RESTART_ROUNDS ?? 3));
const WRK_SECONDS = 12;
const RESTART_AT_MS = 4_000;
const PROBE_EVERY_MS = 10;

const say = (s: string) => console.error(`[restart ${new Date().toISOString().slice(11, 19)}] ${s}`);

interface RoundResult {
  mode: "handover" | "after exit";
  wrkRequests: number;
  wrkErrors: number;
  probeRequests: number;
  probeFailures: number;
  /** What the failed probes got: a status, or the error code (ConnectionRefused...). */
  probeWhy: Record<string, number>;
  /** Longest span without a successful probe (ms). */
  longestGapMs: number;
  /** From SIGTERM to the old process's exit (ms). */
  oldExitMs: number;
  /** From the successor's listening line to the agent's READY there (ms). */
  agentBackMs: number;
}

async function main() {
  await ensurePackages(say);
  const bin = await ensureBinary(ROOT, say);
  const dir = mkdtempSync(join(tmpdir(), "burrow-restart-"));
  const procs = new Processes(dir);
  const cleanup = async () => {
    await procs.stopAll();
    rmSync(dir, { recursive: true, force: true });
  };
  process.on("SIGINT", () => void cleanup().finally(() => process.exit(130)));
  try {
    const nginx = await startNginx(procs, dir);
    const results: RoundResult[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      for (const mode of ["handover", "after exit"] as const) {
        results.push(await oneRestart(procs, bin, dir, nginx.port, mode, `${round}-${mode.replace(" ", "-")}`));
        say(JSON.stringify(results.at(-1)));
      }
    }
    const md = report(results, bin);
    console.log(md);
    mkdirSync(join(ROOT, "bench", "results"), { recursive: true });
    writeFileSync(join(ROOT, "bench", "results", "restart.md"), md);
  } finally {
    await cleanup();
  }
}

function serverArgs(bin: string, dataDir: string, ports: { http: number; agent: number; admin: number }): string[] {
  return [bin, "server", "--host", "127.0.0.1", "--http-port", String(ports.http), "--agent-port", String(ports.agent), "--admin-port", String(ports.admin), "--data-dir", dataDir];
}

async function oneRestart(procs: Processes, bin: string, dir: string, upstreamPort: number, mode: RoundResult["mode"], tag: string): Promise<RoundResult> {
  const dataDir = join(dir, `data-${tag}`);
  mkdirSync(dataDir, { recursive: true });
  const ports = { http: freePort(), agent: freePort(), admin: freePort() };
  const env = { BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD };
  const first = procs.spawn(`server-a-${tag}`, serverArgs(bin, dataDir, ports), { env, manyFiles: true });
  await procs.waitFor(first, /admin api listening/, 20_000);
  const token = await makeToken(`http://127.0.0.1:${ports.admin}`);
  const home = join(dir, `home-${tag}`);
  mkdirSync(home, { recursive: true });
  const agent = procs.spawn(`agent-${tag}`, [bin, "http", `127.0.0.1:${upstreamPort}`, "--server", `http://127.0.0.1:${ports.http}`, "--token", token, "--subdomain", "steady"], {
    env: { XDG_CONFIG_HOME: home, HTTPS_PROXY: "", ALL_PROXY: "", HTTP_PROXY: "", https_proxy: "", all_proxy: "", http_proxy: "" },
  });
  await procs.waitFor(agent, /Forwarding/, 20_000);
  const host = tunnelHost({ edgePort: ports.http } as never, "steady");
  const url = `http://127.0.0.1:${ports.http}/${FILES.small}`;

  const wrk = procs.run([tool("wrk"), "-t1", "-c10", `-d${WRK_SECONDS}s`, "--timeout", "5s", "--latency", "-H", `Host: ${host}`, url], { timeoutMs: (WRK_SECONDS + 30) * 1000 });
  const probe = runProbe(url, host, WRK_SECONDS * 1000);

  await Bun.sleep(RESTART_AT_MS); // steady load before the restart: the span measured
  const termAt = Date.now();
  process.kill(first.pid, "SIGTERM");
  if (mode === "handover") await procs.waitFor(first, /shutting down/, 10_000);
  else await first.exited;
  const second = procs.spawn(`server-b-${tag}`, serverArgs(bin, dataDir, ports), { env, manyFiles: true });
  // both from the successor's own log timestamps: when it listened, when the agent was admitted there
  const listening = await procs.waitFor(second, /^(\S+) info admin api listening/m, 20_000);
  const connected = await procs.waitFor(second, /^(\S+) info agent connected/m, 30_000);
  const agentBackMs = Date.parse(connected[1]!) - Date.parse(listening[1]!);
  await first.exited;
  const oldExitMs = (first.doneAt ?? Date.now()) - termAt;

  const w = parseWrk((await wrk).stdout);
  const p = await probe;
  await procs.stop(agent);
  await procs.stop(second);
  return {
    mode,
    wrkRequests: w.requests,
    wrkErrors: w.errors,
    probeRequests: p.requests,
    probeFailures: p.failures,
    probeWhy: p.why,
    longestGapMs: p.longestGapMs,
    oldExitMs,
    agentBackMs,
  };
}

async function runProbe(url: string, host: string, forMs: number) {
  const end = Date.now() + forMs;
  let requests = 0;
  let failures = 0;
  const why: Record<string, number> = {};
  let lastOk = Date.now();
  let longestGapMs = 0;
  while (Date.now() < end) {
    requests++;
    try {
      const res = await fetch(url, { headers: { host, connection: "close" }, keepalive: false, signal: AbortSignal.timeout(2_000) });
      await res.arrayBuffer();
      if (res.status === 200) {
        longestGapMs = Math.max(longestGapMs, Date.now() - lastOk);
        lastOk = Date.now();
      } else {
        failures++;
        why[res.status] = (why[res.status] ?? 0) + 1;
      }
    } catch (err) {
      failures++;
      const code = (err as { code?: string }).code ?? (err as Error).name;
      why[code] = (why[code] ?? 0) + 1;
    }
    await Bun.sleep(PROBE_EVERY_MS);
  }
  return { requests, failures, longestGapMs, why };
}

async function makeToken(adminUrl: string): Promise<string> {
  const login = await fetch(`${adminUrl}/api/auth/login`, { method: "POST", body: JSON.stringify({ username: "admin", password: ADMIN_PASSWORD }) });
  const cookie = login.headers.get("set-cookie")!.split(";")[0]!;
  const call = async (path: string, body: unknown) => {
    const res = await fetch(adminUrl + path, { method: "POST", headers: { cookie, "content-type": "application/json" }, body: JSON.stringify(body) });
    if (res.status >= 300) throw new Error(`${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as Record<string, unknown>;
  };
  const user = await call("/api/users", { username: "restart", password: "restart-password", max_tunnels: 0, max_devices: 0, traffic_limit: 0 });
  const t = await call(`/api/users/${user.id}/tokens`, { device_name: "bench" });
  return t.token as string;
}

function report(results: RoundResult[], bin: string): string {
  const rows = results.map(
    (r) =>
      `| ${r.mode} | ${r.wrkRequests} | ${r.wrkErrors} | ${r.probeFailures} of ${r.probeRequests} (${Object.entries(r.probeWhy).map(([k, n]) => `${n} ${k}`).join(", ") || "none"}) | ${r.longestGapMs} ms | ${r.oldExitMs} ms | ${r.agentBackMs} ms |`,
  );
  return [
    `### Restart under load (${new Date().toISOString().slice(0, 10)}, ${bin.split("/").pop()})`,
    "",
    `wrk -c10 for ${WRK_SECONDS} s through an http tunnel; SIGTERM at ${RESTART_AT_MS / 1000} s; a probe visitor every ${PROBE_EVERY_MS} ms on a new connection.`,
    "",
    "| successor started | wrk requests | wrk errors | probe failures | longest gap | old server exits after | agent back after the successor listens |",
    "|---|---|---|---|---|---|---|",
    ...rows,
    "",
  ].join("\n");
}

await main();
