/**
 * The SSH gateway (`BENCH_ONLY=sshgw`, or part of a full run): an http and
 * a tcp tunnel opened with OpenSSH's `ssh -R` to burrow's gateway, against
 * the same opened with `burrow http` / `burrow tcp` on the same server, and
 * against OpenSSH's own `ssh -R` to a private sshd (the ssh row of the
 * other sections), the three paths interleaved round by round. HTTP 1 KiB
 * requests (wrk to nginx) and a raw TCP upload into the counting sink,
 * each with aes128-gcm for both ssh paths.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { pushThrough, wrk, type TransferResult } from "./lib/measure.ts";
import { cpuMs, freePortRange, until, type Child, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row } from "./lib/report.ts";
import { ADMIN_PASSWORD, createToken, FILES, SSH_CIPHER, startBurrowAgent, startBurrowServer, startSshd, startSshForward, tunnelHost } from "./lib/services.ts";
import { tool } from "./lib/setup.ts";

type GatewayPath = "agent" | "gateway" | "sshd";
const PATHS: GatewayPath[] = ["agent", "gateway", "sshd"];

export interface GatewayBench {
  rps: Record<GatewayPath, number[]>;
  p99: Record<GatewayPath, number[]>;
  mibps: Record<GatewayPath, number[]>;
  /** CPU ms per GiB of the raw upload, burrow's server's alone (sshd's work is in a child per connection, not measured). */
  serverCpuPerGiB: Record<"agent" | "gateway", number[]>;
}

export interface GatewayBenchSetup {
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

/** `ssh -R` to burrow's gateway; resolves once the forward is live (the allocated port for a tcp one). */
async function gatewayForward(b: GatewayBenchSetup, name: string, sshPort: number, key: string, forward: string): Promise<{ child: Child; port?: number }> {
  const child = b.procs.spawn(name, [
    tool("ssh"),
    "-N",
    "-T",
    "-o", "StrictHostKeyChecking=no",
    "-o", "UserKnownHostsFile=/dev/null",
    "-o", "BatchMode=yes",
    "-o", "ExitOnForwardFailure=yes",
    "-o", "LogLevel=INFO",
    "-o", "Compression=no",
    "-F", "/dev/null",
    "-i", key,
    "-c", SSH_CIPHER,
    "-p", String(sshPort),
    "-R", forward,
    "127.0.0.1",
  ]);
  if (forward.startsWith("0:")) {
    const m = await b.procs.waitFor(child, /Allocated port (\d+)/, 20_000);
    return { child, port: Number(m[1]) };
  }
  return { child };
}

export async function sshGateway(b: GatewayBenchSetup): Promise<GatewayBench> {
  const { procs, bin, dir } = b;
  // one range for the tcp tunnels and the gateway (a freePort() before freePortRange() makes Bun's exclusive binds fail)
  const range = freePortRange(9);
  const sshPort = range.last;
  const server = await startBurrowServer(procs, bin, dir, "burrow-sshgw-server", { first: range.first, last: range.last - 1 }, ["--ssh-port", String(sshPort)]);
  const token = await createToken(server, "bench-ssh");
  // the same user's key, for the gateway
  const keyFile = join(dir, "sshgw-key");
  const made = await procs.run([tool("ssh-keygen"), "-q", "-t", "ed25519", "-N", "", "-C", "bench", "-f", keyFile], { timeoutMs: 20_000 });
  if (made.code !== 0) throw new Error(`ssh-keygen: ${made.stderr}`);
  const login = await fetch(`${server.adminUrl}/api/auth/login`, { method: "POST", body: JSON.stringify({ username: "admin", password: ADMIN_PASSWORD }) });
  const cookie = login.headers.get("set-cookie")!.split(";")[0]!;
  const users = (await (await fetch(`${server.adminUrl}/api/users`, { headers: { cookie } })).json()) as { id: number; username: string }[];
  const user = users.find((u) => u.username === "bench-ssh")!;
  const added = await fetch(`${server.adminUrl}/api/users/${user.id}/ssh-keys`, { method: "POST", headers: { cookie }, body: JSON.stringify({ key: readFileSync(`${keyFile}.pub`, "utf8") }) });
  if (added.status !== 201) throw new Error(`key not added: ${await added.text()}`);

  const agentHttp = await startBurrowAgent(procs, bin, dir, "burrow-sshgw-http", server, token, "http", b.nginxPort, ["--subdomain", "agentpath"]);
  const agentTcp = await startBurrowAgent(procs, bin, dir, "burrow-sshgw-tcp", server, token, "tcp", b.sinkPort);
  const gwHttp = await gatewayForward(b, "ssh-gateway-http", sshPort, keyFile, `gwpath:80:127.0.0.1:${b.nginxPort}`);
  const gwTcp = await gatewayForward(b, "ssh-gateway-tcp", sshPort, keyFile, `0:127.0.0.1:${b.sinkPort}`);
  const sshd = await startSshd(procs, join(dir, "sshgw-sshd"));
  const sshdHttp = await startSshForward(procs, sshd, "ssh-sshgw-http", b.nginxPort);
  const sshdTcp = await startSshForward(procs, sshd, "ssh-sshgw-tcp", b.sinkPort);
  const gwHost = tunnelHost(server, "gwpath");
  // the forward is live once its name answers
  await until("the gateway's http forward", async () => (await fetch(`${server.edgeUrl}/${FILES.small}`, { headers: { host: gwHost } }).catch(() => undefined))?.status === 200, 20_000);
  b.say(`sshgw       burrow http ${agentHttp.subdomain}, tcp :${agentTcp.port}; gateway ssh -R gwpath, tcp :${gwTcp.port}; sshd -R :${sshdHttp.port}, :${sshdTcp.port}`);

  const http: Record<GatewayPath, { url: string; host?: string }> = {
    agent: { url: `${server.edgeUrl}/${FILES.small}`, host: tunnelHost(server, agentHttp.subdomain!) },
    gateway: { url: `${server.edgeUrl}/${FILES.small}`, host: gwHost },
    sshd: { url: `http://127.0.0.1:${sshdHttp.port}/${FILES.small}` },
  };
  const tcpPort: Record<GatewayPath, number> = { agent: agentTcp.port!, gateway: gwTcp.port!, sshd: sshdTcp.port };

  const result: GatewayBench = {
    rps: { agent: [], gateway: [], sshd: [] },
    p99: { agent: [], gateway: [], sshd: [] },
    mibps: { agent: [], gateway: [], sshd: [] },
    serverCpuPerGiB: { agent: [], gateway: [] },
  };
  for (const p of PATHS) await wrk(procs, { ...http[p], connections: 50, seconds: 1 });
  for (let round = 1; round <= b.rounds; round++) {
    const order = round % 2 === 1 ? PATHS : [...PATHS].reverse();
    for (const p of order) {
      const r = await wrk(procs, { ...http[p], connections: 50, seconds: b.seconds });
      if (r.errors > 0) throw new Error(`wrk through ${p} had ${r.errors} errors`);
      result.rps[p].push(r.reqPerSec);
      result.p99[p].push(r.p99Ms);
      b.say(`sshgw       round ${round} HTTP 1 KiB ${p.padEnd(7)} ${fmt(r.reqPerSec)} req/s  p99 ${fmt(r.p99Ms)} ms`);
    }
    for (const p of order) {
      const before = cpuMs(server.child.pid);
      const t: TransferResult = await pushThrough(procs, b.sink, b.source, tcpPort[p], b.tcpBytes, 180, `sshgw-${p}`);
      if (t.received !== t.bytes) throw new Error(`raw TCP through ${p} lost ${t.bytes - t.received} bytes`);
      const cpu = (cpuMs(server.child.pid) - before) / (t.bytes / 1024 ** 3);
      result.mibps[p].push(t.mibPerSec);
      if (p !== "sshd") result.serverCpuPerGiB[p].push(cpu);
      b.say(`sshgw       round ${round} raw TCP    ${p.padEnd(7)} ${fmt(t.mibPerSec)} MiB/s${p !== "sshd" ? `  burrow server CPU ${fmt(cpu)} ms/GiB` : ""}`);
    }
  }
  for (const c of [sshdTcp.child, sshdHttp.child, sshd.child, gwTcp.child, gwHttp.child, agentTcp.child, agentHttp.child, server.child]) await procs.stop(c);
  return result;
}

export function sshGatewayRows(r: GatewayBench): Row[] {
  const cells = (xs: number[], unit = "") => `${xs.map((x) => fmt(x, unit)).join(" · ")} → **${fmt(median(xs), unit)}**`;
  const three = (k: "rps" | "p99" | "mibps", higher: boolean) =>
    `ssh -R to burrow ${cells(r[k].gateway)}; burrow agent ${cells(r[k].agent)}; ssh -R to sshd ${cells(r[k].sshd)}; gateway/agent **${fmtRatio(ratio(median(r[k].gateway), median(r[k].agent)))}**, gateway/sshd **${fmtRatio(ratio(median(r[k].gateway), median(r[k].sshd)))}**${higher ? "" : " (lower is better)"}`;
  return [
    { scenario: "HTTP 1 KiB (wrk -t1 -c50) to nginx through an http tunnel opened with ssh -R to burrow's SSH gateway, with burrow http, and ssh -R to sshd", unit: "req/s", runs: {}, higherIsBetter: true, burrowText: three("rps", true), ratioText: { direct: "", ssh: "" } },
    { scenario: "HTTP 1 KiB p99 latency, the same runs", unit: "ms", runs: {}, higherIsBetter: false, burrowText: three("p99", false), ratioText: { direct: "", ssh: "" } },
    { scenario: "raw TCP upload into the sink through a tcp tunnel opened with ssh -R to burrow's gateway, with burrow tcp, and ssh -R to sshd", unit: "MiB/s", runs: {}, higherIsBetter: true, burrowText: three("mibps", true), ratioText: { direct: "", ssh: "" } },
    {
      scenario: "raw TCP upload: burrow's server's CPU per GiB, through the gateway and through the agent (sshd's is in a child per connection)",
      unit: "ms",
      runs: {},
      higherIsBetter: false,
      burrowText: `gateway ${cells(r.serverCpuPerGiB.gateway)}; agent ${cells(r.serverCpuPerGiB.agent)}; gateway/agent **${fmtRatio(ratio(median(r.serverCpuPerGiB.gateway), median(r.serverCpuPerGiB.agent)))}** (lower is better)`,
      ratioText: { direct: "", ssh: "" },
    },
  ];
}
