/**
 * Memory (`BENCH_ONLY=stream`, `BENCH_ONLY=idle`, or part of a full run),
 * each on a fresh server: the RSS of the server and agent while 1 GiB
 * crosses one HTTP tunnel and one TCP tunnel, and the server's RSS per idle
 * tunnel with 1,000 and BENCH_AGENTS agents (bench/many-agents.ts opens them
 * from one process with the agent code).
 */
import { join } from "node:path";
import { GiB, lostNote, MiB, pushThrough } from "./lib/measure.ts";
import { freePortRange, openFilesLimit, rssKiB, type Child, type Processes } from "./lib/proc.ts";
import { fmt, median, type Row, type Target } from "./lib/report.ts";
import { activeTunnels, createToken, FILES, startBurrowAgent, startBurrowServer, tunnelHost } from "./lib/services.ts";
import { tool } from "./lib/setup.ts";

const MANY = join(import.meta.dir, "many-agents.ts");

export interface MemoryBench {
  procs: Processes;
  bin: string;
  dir: string;
  root: string;
  say(line: string): void;
}

export interface StreamMemory {
  agentIdleKiB: number;
  serverIdleKiB: number;
  http: { seconds: number; mibPerSec: number; serverBaseKiB: number; serverMaxKiB: number; agentBaseKiB: number; agentMaxKiB: number };
  tcp?: { bytes: number; received: number; hung?: boolean; seconds: number; mibPerSec: number; serverBaseKiB: number; serverMaxKiB: number; agentBaseKiB: number; agentMaxKiB: number };
}

export interface IdleAgents {
  serverBaseKiB: number;
  fdLimit: { server: number; client: number };
  steps: { count: number; ready: number; active: number; failed: number; reconnects: number; connectMs: number; serverKiB: number; perTunnelKiB: number }[];
  closedMs?: number;
  error?: string;
}

// ------------------------------------------------------------------ memory: one tunnel streaming 1 GiB

async function sampleRss(pids: number[], ms: number, every = 100): Promise<number[][]> {
  const out: number[][] = pids.map(() => []);
  const end = Date.now() + ms;
  do {
    pids.forEach((pid, i) => out[i]!.push(rssKiB(pid)));
    await Bun.sleep(every);
  } while (Date.now() < end);
  return out;
}

/** Runs `work` while sampling the RSS of `pids` every 100 ms; returns the maxima. */
async function whileSampling<T>(pids: number[], work: () => Promise<T>): Promise<{ value: T; max: number[] }> {
  const max = pids.map((pid) => rssKiB(pid));
  let running = true;
  const sampler = (async () => {
    while (running) {
      pids.forEach((pid, i) => (max[i] = Math.max(max[i]!, rssKiB(pid))));
      await Bun.sleep(100);
    }
  })();
  try {
    return { value: await work(), max };
  } finally {
    running = false;
    await sampler;
    pids.forEach((pid, i) => (max[i] = Math.max(max[i]!, rssKiB(pid))));
  }
}

export async function streamMemory(b: MemoryBench, t: { nginxPort: number; sinkPort: number; sink: Child; source: string[] }, record: (x: StreamMemory) => void): Promise<void> {
  const { procs, bin, dir, say } = b;
  const { nginxPort, sinkPort, sink, source: SOURCE } = t;
  say("memory: one tunnel, 1 GiB through it (fresh server and agents)");
  const server = await startBurrowServer(procs, bin, dir, "burrow-mem-server", freePortRange(10));
  const token = await createToken(server);
  const agent = await startBurrowAgent(procs, bin, dir, "burrow-mem-http", server, token, "http", nginxPort, ["--subdomain", "stream"]);
  const host = tunnelHost(server, agent.subdomain!);
  await Bun.sleep(2000);
  const [agentIdle, serverIdle] = (await sampleRss([agent.child.pid, server.child.pid], 1000)).map(median);

  // one small request first, so that the first-request set-up is not counted as growth
  const warm = await fetch(`${server.edgeUrl}/${FILES.small}`, { headers: { host } });
  await warm.arrayBuffer();
  await Bun.sleep(1000);
  const [sBase, aBase] = (await sampleRss([server.child.pid, agent.child.pid], 1000)).map(median);
  const t0 = performance.now();
  const { value: curl, max } = await whileSampling([server.child.pid, agent.child.pid], () =>
    procs.run([tool("curl"), "-sS", "-o", "/dev/null", "-w", "%{http_code} %{size_download}", "-H", `Host: ${host}`, `${server.edgeUrl}/${FILES.huge}`], {
      timeoutMs: 600_000,
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  if (curl.stdout.trim() !== `200 ${GiB}`) throw new Error(`1 GiB download through the tunnel: curl said '${curl.stdout}' ${curl.stderr}`);
  const httpStream = { seconds, mibPerSec: 1024 / seconds, serverBaseKiB: sBase!, serverMaxKiB: max[0]!, agentBaseKiB: aBase!, agentMaxKiB: max[1]! };
  const result: StreamMemory = { agentIdleKiB: agentIdle!, serverIdleKiB: serverIdle!, http: httpStream };
  record(result);
  say(
    `memory      agent idle ${fmt(agentIdle! / 1024)} MiB; 1 GiB download in ${fmt(seconds)} s: server +${fmt((max[0]! - sBase!) / 1024)} MiB, agent +${fmt((max[1]! - aBase!) / 1024)} MiB`,
  );

  // the same through a tcp tunnel: 1 GiB pushed into the sink
  const tcp = await startBurrowAgent(procs, bin, dir, "burrow-mem-tcp", server, token, "tcp", sinkPort);
  await pushThrough(procs, sink, SOURCE, tcp.port!, MiB, 60);
  await Bun.sleep(1000);
  const [tsBase, taBase] = (await sampleRss([server.child.pid, tcp.child.pid], 1000)).map(median);
  const pushed = await whileSampling([server.child.pid, tcp.child.pid], () => pushThrough(procs, sink, SOURCE, tcp.port!, GiB, 300));
  result.tcp = {
    bytes: pushed.value.bytes,
    received: pushed.value.received,
    hung: pushed.value.hung,
    seconds: pushed.value.seconds,
    mibPerSec: pushed.value.mibPerSec,
    serverBaseKiB: tsBase!,
    serverMaxKiB: pushed.max[0]!,
    agentBaseKiB: taBase!,
    agentMaxKiB: pushed.max[1]!,
  };
  say(`memory      1 GiB tcp upload in ${fmt(pushed.value.seconds)} s: server +${fmt((pushed.max[0]! - tsBase!) / 1024)} MiB, agent +${fmt((pushed.max[1]! - taBase!) / 1024)} MiB${lostNote(pushed.value)}`);
  await procs.stop(tcp.child, "SIGINT");
  await procs.stop(agent.child, "SIGINT");
  await procs.stop(server.child);
}

// ------------------------------------------------------------------ memory: many idle agents

export async function idleAgents(b: MemoryBench, t: { nginxPort: number; agents: number }, record: (x: IdleAgents) => void): Promise<void> {
  const { procs, bin, dir, root, say } = b;
  const { nginxPort, agents } = t;
  const counts = [...new Set([Math.min(1000, agents), agents])].filter((n) => n > 0);
  say(`memory: ${counts.join(" then ")} idle agents on one fresh server`);
  const server = await startBurrowServer(procs, bin, dir, "burrow-idle-server", freePortRange(10));
  const token = await createToken(server);
  await Bun.sleep(2000);
  const base = median((await sampleRss([server.child.pid], 1000))[0]!);
  const client = procs.spawn(
    "many-agents",
    [process.execPath, MANY, "--server", server.edgeUrl, "--token", token, "--target", `127.0.0.1:${nginxPort}`, "--counts", counts.join(",")],
    { manyFiles: true, stdin: "pipe", cwd: root },
  );
  const idle: IdleAgents = {
    serverBaseKiB: base,
    fdLimit: { server: openFilesLimit(server.child.pid), client: openFilesLimit(client.pid) },
    steps: [],
  };
  record(idle);
  if (idle.fdLimit.server < agents + 100 || idle.fdLimit.client < agents + 100) {
    say(`warning: open-files limits (server ${idle.fdLimit.server}, client ${idle.fdLimit.client}) are below ${agents} agents`);
  }
  let offset = 0;
  try {
    for (const [i, count] of counts.entries()) {
      const m = await procs.waitFor(client, /(ready count=(\d+) ms=(\d+) \S+ failed=(\d+) reconnects=(\d+)|error .*)/, 900_000, offset);
      offset = procs.log(client).length;
      if (m[0].startsWith("error")) throw new Error(`many-agents: ${m[0]}`);
      await Bun.sleep(3000); // settle: handshakes done, buffers released
      const rss = median((await sampleRss([server.child.pid], 1000, 200))[0]!);
      const step = {
        count,
        ready: Number(m[2]),
        active: await activeTunnels(server),
        failed: Number(m[4]),
        reconnects: Number(m[5]),
        connectMs: idle.steps.reduce((a, s) => a + s.connectMs, 0) + Number(m[3]),
        serverKiB: rss,
        perTunnelKiB: (rss - base) / Number(m[2]),
      };
      idle.steps.push(step);
      say(
        `memory      ${count} idle agents ready in ${fmt(step.connectMs / 1000)} s (server lists ${step.active} live tunnels): server RSS ${fmt(rss / 1024)} MiB (${fmt(base / 1024)} before), ${fmt(step.perTunnelKiB)} KiB per tunnel`,
      );
      if (i < counts.length - 1) {
        client.proc.stdin!.write("next\n");
        await client.proc.stdin!.flush();
      }
    }
    // is the server still serving with all of them connected? one tunnel request through the edge
    const res = await fetch(`${server.edgeUrl}/`, { headers: { host: `nosuchtunnel.localhost:${server.edgePort}` } });
    await res.arrayBuffer();
  } catch (err) {
    idle.error = (err as Error).message;
    throw err;
  } finally {
    if (!client.done) {
      client.proc.stdin!.write("close\n");
      await client.proc.stdin!.flush();
      await Promise.race([client.exited, Bun.sleep(60_000)]);
      const closed = /closed ms=(\d+)/.exec(procs.log(client));
      if (closed) idle.closedMs = Number(closed[1]);
    }
    await procs.stop(client);
    await procs.stop(server.child);
  }
}

// ------------------------------------------------------------------ the report

export function idleRows(idle: IdleAgents | undefined): Row[] {
  return (idle?.steps ?? []).map((s) => ({
    scenario: `server RSS per idle tunnel, ${s.count.toLocaleString("en-US")} agents`,
    unit: "KiB",
    runs: {},
    higherIsBetter: false,
    burrowText: `**${fmt(s.perTunnelKiB)}** (${fmt(idle!.serverBaseKiB / 1024)} → ${fmt(s.serverKiB / 1024)} MiB; ${s.ready.toLocaleString("en-US")} ready in ${fmt(s.connectMs / 1000)} s, ${s.failed} refused)`,
    ratioText: { direct: "", ssh: "" },
  }));
}

/** Per idle tunnel at 1,000 and at `agents`, and all of 10,000 connected. */
export function idleTargets(idle: IdleAgents | undefined, agents: number): Target[] {
  const t: Target[] = [];
  for (const count of [1000, agents].filter((c, i, a) => a.indexOf(c) === i)) {
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
  return t;
}

export function streamRows(st: StreamMemory | undefined): Row[] {
  if (!st) return [];
  const out: Row[] = [{ scenario: "agent process RSS, one idle http tunnel", unit: "MiB", runs: {}, higherIsBetter: false, burrowText: `**${fmt(st.agentIdleKiB / 1024)}** (server ${fmt(st.serverIdleKiB / 1024)})`, ratioText: { direct: "", ssh: "" } }];
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
  return out;
}

export function streamTargets(st: StreamMemory | undefined): Target[] {
  return ([
    ["HTTP", st?.http],
    ["TCP", st?.tcp],
  ] as const).map(([label, s]) => {
    const server = s ? (s.serverMaxKiB - s.serverBaseKiB) / 1024 : NaN;
    const agent = s ? (s.agentMaxKiB - s.agentBaseKiB) / 1024 : NaN;
    return {
      name: `RSS growth, 1 GiB through one ${label} tunnel (server, agent)`,
      want: "< 16 MiB each",
      measured: s ? `+${fmt(server)} MiB, +${fmt(agent)} MiB` : "–",
      pass: s ? server < 16 && agent < 16 : null,
    };
  });
}
