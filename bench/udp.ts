/**
 * UDP tunnels (`BENCH_ONLY=udp`, or part of a full run): iperf3 in UDP mode
 * at fixed rates, straight to iperf3's server, through a burrow udp tunnel
 * and through rathole's UDP service, the paths interleaved round by round.
 * iperf3 sets its test up over TCP and sends its datagrams over UDP to the
 * same port number, so each tunnel carries both: burrow a tcp and a udp
 * tunnel on one port (two port spaces), rathole a tcp and a udp service.
 *
 * Rows: loss and jitter at 100 and 500 Mbit/s of 1,400-byte datagrams, the
 * datagrams a second delivered when 64-byte ones are sent as fast as the
 * client can, and another user's http tunnel (wrk, one connection, nginx's
 * 1 KiB file) while a udp tunnel is flooded, against the same without the
 * flood: what a flood costs a neighbour through the one server. burrow runs with --udp-rate 0: the default cap (1,000 a
 * second per source) is for strangers on the internet, not a benchmark.
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { findPeers } from "./lib/peers.ts";
import { cpuMs, freePortRange, isListening, until, type Child, type Processes } from "./lib/proc.ts";
import { wrk } from "./lib/measure.ts";
import { fmt, fmtRatio, median, ratio, type Row } from "./lib/report.ts";
import { createToken, FILES, startBurrowAgent, startBurrowServer, tunnelHost } from "./lib/services.ts";

type UdpPath = "direct" | "burrow" | "rathole";
const PATHS: UdpPath[] = ["direct", "burrow", "rathole"];

/** One load: iperf3's -b and -l. "max" sends as fast as the client can (-b 0). */
interface Load {
  name: string;
  bitrate: string;
  length: number;
}
const LOADS: Load[] = [
  { name: "100M", bitrate: "100M", length: 1400 },
  { name: "500M", bitrate: "500M", length: 1400 },
  { name: "max64", bitrate: "0", length: 64 },
];

interface Measured {
  lossPct: number;
  jitterMs: number;
  /** Datagrams a second that arrived. */
  deliveredPerS: number;
}

export interface UdpBench {
  procs: Processes;
  bin: string;
  dir: string;
  /** The repository, beside which the peers' binaries may be (lib/peers.ts). */
  root: string;
  /** nginx serving the bench's files: the neighbour's http tunnel leads there. */
  nginxPort: number;
  rounds: number;
  seconds: number;
  say(line: string): void;
}

export interface UdpResults {
  /** Per load, per path, one per round. */
  runs: Record<string, Partial<Record<UdpPath, Measured[]>>>;
  /** burrow's server + agents CPU ms per second of the 500M load. */
  cpuPerS: number[];
  /** Another user's http tunnel, c=1: p50 latency (ms) alone and while a udp tunnel takes 64-byte datagrams as fast as iperf3 sends. */
  neighbour: { alone: number[]; flooded: number[]; floodedPerS: number[] };
  rathole: boolean;
}

/**
 * One iperf3 run; one failed handshake is tried again after a pause: iperf3
 * takes the first datagram its new test socket gets for its client's, and a
 * straggler of the run before (a flood's datagrams still on their way through
 * a tunnel) can be that datagram.
 */
async function iperf(procs: Processes, port: number, load: Load, seconds: number): Promise<Measured> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await iperfOnce(procs, port, load, seconds);
    } catch (err) {
      if (attempt >= 3) throw err;
      await Bun.sleep(FLOOD_COOLDOWN_MS);
    }
  }
}

/** After a flood, the time its last datagrams may take through a tunnel's queues. */
const FLOOD_COOLDOWN_MS = 8_000;

async function iperfOnce(procs: Processes, port: number, load: Load, seconds: number): Promise<Measured> {
  const r = await procs.run(["iperf3", "-c", "127.0.0.1", "-p", String(port), "-u", "-b", load.bitrate, "-l", String(load.length), "-t", String(seconds), "-J"], {
    timeoutMs: (seconds + 30) * 1000,
  });
  let sum: { lost_percent: number; jitter_ms: number; packets: number; lost_packets: number; seconds: number } | undefined;
  try {
    sum = JSON.parse(r.stdout).end.sum;
  } catch {}
  if (r.code !== 0 || !sum) throw new Error(`iperf3 -u through :${port} failed (${r.code}): ${(r.stdout + r.stderr).trim().slice(-400)}`);
  return { lossPct: sum.lost_percent, jitterMs: sum.jitter_ms, deliveredPerS: (sum.packets - sum.lost_packets) / (sum.seconds || seconds) };
}

/** rathole's server and client with a tcp and a udp service on one port number, to iperf3 at `target`. */
async function startRatholeUdp(procs: Processes, bin: string, dir: string, target: number): Promise<{ port: number; children: Child[] }> {
  const ports = freePortRange(2);
  const [control, port] = [ports.first, ports.first + 1];
  const token = "bench-rathole-udp-token";
  const serverToml = join(dir, "rathole-udp-server.toml");
  const clientToml = join(dir, "rathole-udp-client.toml");
  writeFileSync(
    serverToml,
    `[server]\nbind_addr = "127.0.0.1:${control}"\ndefault_token = "${token}"\n\n[server.services.ctl]\nbind_addr = "127.0.0.1:${port}"\n\n[server.services.data]\ntype = "udp"\nbind_addr = "127.0.0.1:${port}"\n`,
  );
  writeFileSync(
    clientToml,
    `[client]\nremote_addr = "127.0.0.1:${control}"\ndefault_token = "${token}"\n\n[client.services.ctl]\nlocal_addr = "127.0.0.1:${target}"\n\n[client.services.data]\ntype = "udp"\nlocal_addr = "127.0.0.1:${target}"\n`,
  );
  const server = procs.spawn("rathole-udp-server", [bin, "--server", serverToml]);
  await until("rathole's server to listen", () => isListening(control), 10_000);
  const client = procs.spawn("rathole-udp-client", [bin, "--client", clientToml]);
  await until("rathole's tcp service", () => isListening(port), 10_000);
  await Bun.sleep(500); // its udp service opens with the same control channel; give it a moment
  return { port, children: [server, client] };
}

export async function udpTunnels(b: UdpBench): Promise<UdpResults> {
  const { procs, dir } = b;
  const target = freePortRange(1).first;
  procs.spawn("iperf3-server", ["iperf3", "-s", "-B", "127.0.0.1", "-p", String(target)]);
  await until("iperf3's server", () => isListening(target), 10_000);

  const range = freePortRange(4);
  const server = await startBurrowServer(procs, b.bin, dir, "burrow-udp-server", range, ["--udp-ports", `${range.first}-${range.last}`, "--udp-rate", "0"]);
  const token = await createToken(server, "bench-udp", { allowed_protocols: "tcp,udp" });
  const tcp = await startBurrowAgent(procs, b.bin, dir, "burrow-udp-tcp", server, token, "tcp", target);
  const udp = await startBurrowAgent(procs, b.bin, dir, "burrow-udp-udp", server, token, "udp", target, ["--remote-port", String(tcp.port)]);
  if (udp.port !== tcp.port) throw new Error(`the udp tunnel got port ${udp.port}, not the tcp tunnel's ${tcp.port}`);

  const peers = await findPeers(b.root, dir, procs, b.say);
  const rathole = peers.bins.rathole ? await startRatholeUdp(procs, peers.bins.rathole, dir, target) : undefined;
  b.say(`udp         iperf3 :${target}, burrow :${tcp.port}${rathole ? `, rathole :${rathole.port}` : " (no rathole binary: its rows are left out)"}`);

  const ports: Partial<Record<UdpPath, number>> = { direct: target, burrow: tcp.port!, ...(rathole ? { rathole: rathole.port } : {}) };
  const result: UdpResults = { runs: Object.fromEntries(LOADS.map((l) => [l.name, {}])), cpuPerS: [], rathole: Boolean(rathole), neighbour: { alone: [], flooded: [], floodedPerS: [] } };
  // the neighbour: another user, an http tunnel on the same server
  const other = await createToken(server, "bench-udp-neighbour");
  const web = await startBurrowAgent(procs, b.bin, dir, "burrow-udp-neighbour", server, other, "http", b.nginxPort);
  const page = { url: `${server.edgeUrl}/${FILES.small}`, host: tunnelHost(server, web.subdomain!), connections: 1, seconds: b.seconds };
  const burrowCpu = () => cpuMs(server.child.pid) + cpuMs(tcp.child.pid) + cpuMs(udp.child.pid);
  await iperf(procs, ports.burrow!, LOADS[0]!, 1); // warm-up
  // load by load, the floods last: what a flood leaves on its way through a tunnel must not meet a fixed-rate run
  for (const load of LOADS) {
    for (let round = 1; round <= b.rounds; round++) {
      const order = (round % 2 === 1 ? PATHS : [...PATHS].reverse()).filter((p) => ports[p] !== undefined);
      for (const path of order) {
        const before = burrowCpu();
        const m = await iperf(procs, ports[path]!, load, b.seconds);
        (result.runs[load.name]![path] ??= []).push(m);
        if (path === "burrow" && load.name === "500M") result.cpuPerS.push((burrowCpu() - before) / b.seconds);
        b.say(`udp         round ${round} ${load.name.padEnd(6)} ${path.padEnd(8)} loss ${fmt(m.lossPct)} %  jitter ${fmt(m.jitterMs)} ms  ${fmt(m.deliveredPerS)} datagrams/s`);
        if (load.bitrate === "0") await Bun.sleep(FLOOD_COOLDOWN_MS);
      }
    }
  }
  for (let round = 1; round <= b.rounds; round++) {
    const alone = await wrk(procs, page);
    const flood = iperf(procs, ports.burrow!, LOADS[2]!, b.seconds + 2);
    await Bun.sleep(1000); // the flood under way before the neighbour's requests start
    const flooded = await wrk(procs, page);
    const m = await flood;
    await Bun.sleep(FLOOD_COOLDOWN_MS);
    result.neighbour.alone.push(alone.p50Ms);
    result.neighbour.flooded.push(flooded.p50Ms);
    result.neighbour.floodedPerS.push(m.deliveredPerS);
    b.say(`udp         round ${round} neighbour http p50 ${fmt(alone.p50Ms)} ms alone, ${fmt(flooded.p50Ms)} ms beside ${fmt(m.deliveredPerS)} datagrams/s`);
  }
  await procs.stop(web.child);
  for (const c of rathole?.children ?? []) await procs.stop(c);
  await procs.stop(udp.child);
  await procs.stop(tcp.child);
  await procs.stop(server.child);
  return result;
}

export function udpRows(r: UdpResults): Row[] {
  const rows: Row[] = [];
  const med = (xs: Measured[] | undefined, key: keyof Measured) => median((xs ?? []).map((m) => m[key]));
  const cells = (xs: Measured[] | undefined, key: keyof Measured, unit = "") => `${(xs ?? []).map((m) => fmt(m[key], unit)).join(" · ")} → **${fmt(med(xs, key), unit)}**`;
  for (const load of LOADS) {
    const runs = r.runs[load.name]!;
    const peer = r.rathole ? `; rathole ${cells(runs.rathole, "deliveredPerS")}` : "";
    if (load.name === "max64") {
      rows.push({
        scenario: "UDP datagrams a second delivered: 64-byte datagrams sent as fast as iperf3 can (-b 0)",
        unit: "datagrams/s",
        runs: { direct: (runs.direct ?? []).map((m) => m.deliveredPerS) },
        higherIsBetter: true,
        burrowText: `${cells(runs.burrow, "deliveredPerS")}${peer}`,
        ratioText: {
          direct: `burrow ${fmtRatio(ratio(med(runs.burrow, "deliveredPerS"), med(runs.direct, "deliveredPerS")))}${r.rathole ? `, rathole ${fmtRatio(ratio(med(runs.rathole, "deliveredPerS"), med(runs.direct, "deliveredPerS")))}` : ""}`,
          ssh: "",
        },
      });
      continue;
    }
    rows.push({
      scenario: `UDP at ${load.bitrate}bit/s of ${load.length}-byte datagrams (iperf3 -u): loss`,
      unit: "%",
      runs: { direct: (runs.direct ?? []).map((m) => m.lossPct) },
      higherIsBetter: false,
      burrowText: `${cells(runs.burrow, "lossPct")}${r.rathole ? `; rathole ${cells(runs.rathole, "lossPct")}` : ""}`,
      ratioText: { direct: "", ssh: "" },
    });
    rows.push({
      scenario: `UDP at ${load.bitrate}bit/s: jitter`,
      unit: "ms",
      runs: { direct: (runs.direct ?? []).map((m) => m.jitterMs) },
      higherIsBetter: false,
      burrowText: `${cells(runs.burrow, "jitterMs")}${r.rathole ? `; rathole ${cells(runs.rathole, "jitterMs")}` : ""}`,
      ratioText: { direct: "", ssh: "" },
    });
  }
  const n = r.neighbour;
  rows.push({
    scenario: "Another user's http tunnel (wrk c=1, 1 KiB) while a udp tunnel is flooded with 64-byte datagrams: p50 latency",
    unit: "ms",
    runs: {},
    higherIsBetter: false,
    burrowText: `alone ${n.alone.map((x) => fmt(x)).join(" · ")} → **${fmt(median(n.alone))}**; flooded ${n.flooded.map((x) => fmt(x)).join(" · ")} → **${fmt(median(n.flooded))}** (the flood delivering ${fmt(median(n.floodedPerS))} datagrams/s)`,
    ratioText: { direct: "", ssh: "" },
  });
  rows.push({
    scenario: "UDP at 500 Mbit/s: burrow's server + agents CPU per second",
    unit: "ms",
    runs: {},
    higherIsBetter: false,
    burrowText: `${r.cpuPerS.map((x) => fmt(x)).join(" · ")} → **${fmt(median(r.cpuPerS))}**`,
    ratioText: { direct: "", ssh: "" },
  });
  return rows;
}
