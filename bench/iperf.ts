/**
 * iperf3 single stream (`BENCH_ONLY=iperf`, or part of a full run; off with
 * BENCH_IPERF=0): BENCH_TCP_MIB through an iperf3 server straight, through
 * a burrow tcp tunnel and through `ssh -R`, every path once per round. A
 * run that hangs is noted and the server started afresh on the same port.
 */
import { iperf3, type TransferResult } from "./lib/measure.ts";
import { freePortRange, isListening, until, type Child, type Processes } from "./lib/proc.ts";
import { PATHS, fmt, pushRun, runsOf, type PathName, type Row } from "./lib/report.ts";
import { startBurrowAgent, startSshForward } from "./lib/services.ts";
import { tool } from "./lib/setup.ts";
import type { ThreePaths } from "./paths.ts";

export interface IperfRuns {
  iperf3: Partial<Record<PathName, TransferResult[]>>;
  /** One line per run that failed or hung: "iperf3 through <path>, round <n>: ...". */
  iperf3Failures: string[];
}

export interface IperfSetup {
  procs: Processes;
  bin: string;
  dir: string;
  paths: ThreePaths;
  say(line: string): void;
}

/** An iperf3 server and its port through each path. */
export interface IperfPaths {
  ports: Record<PathName, number>;
  server: Child;
}

async function startIperfServer(procs: Processes, port: number): Promise<Child> {
  const child = procs.spawn(`iperf3-server-${port}-${Date.now()}`, [tool("iperf3"), "-s", "-B", "127.0.0.1", "-p", String(port)]);
  await until("iperf3 to listen", () => {
    if (child.done) throw new Error(`iperf3 exited: ${procs.tail(child)}`);
    return isListening(port);
  }, 10_000);
  return child;
}

export async function startIperfPaths(b: IperfSetup): Promise<IperfPaths> {
  const iperfPort = freePortRange(1).first;
  const server = await startIperfServer(b.procs, iperfPort);
  const agent = await startBurrowAgent(b.procs, b.bin, b.dir, "burrow-tcp-iperf", b.paths.server, b.paths.token, "tcp", iperfPort);
  const ssh = await startSshForward(b.procs, b.paths.sshd, "ssh-iperf", iperfPort);
  return { ports: { direct: iperfPort, burrow: agent.port!, ssh: ssh.port }, server };
}

/** Runs into `into` run by run, so a failure keeps what was measured. */
export async function iperfSingleStream(b: { procs: Processes; rounds: number; bytes: number; say(line: string): void }, iperf: IperfPaths, into: IperfRuns): Promise<void> {
  for (let round = 1; round <= b.rounds; round++) {
    for (const p of PATHS) {
      try {
        const r = await iperf3(b.procs, `iperf3-${p}-${round}`, iperf.ports[p], b.bytes);
        pushRun(into.iperf3, p, r);
        b.say(`iperf3      round ${round} ${p.padEnd(6)} ${fmt(r.mibPerSec)} MiB/s`);
      } catch (err) {
        const msg = `iperf3 through ${p}, round ${round}: ${(err as Error).message}`;
        into.iperf3Failures.push(msg);
        b.say(msg);
        // a test that hung may hold the server: start a fresh one on the same port
        await b.procs.stop(iperf.server);
        iperf.server = await startIperfServer(b.procs, iperf.ports.direct);
      }
    }
  }
}

export function iperfRows(r: IperfRuns): Row[] {
  if (!Object.keys(r.iperf3).length && !r.iperf3Failures.length) return [];
  const failedRuns = PATHS.map((p) => [p, r.iperf3Failures.filter((f) => f.startsWith(`iperf3 through ${p},`)).length] as const).filter(([, n]) => n > 0);
  return [
    {
      scenario: "iperf3 single stream",
      note: failedRuns.length ? `(runs that hung: ${failedRuns.map(([p, n]) => `${p} ${n}`).join(", ")})` : undefined,
      unit: "MiB/s",
      runs: runsOf(r.iperf3, (x) => x.mibPerSec),
      higherIsBetter: true,
    },
  ];
}
