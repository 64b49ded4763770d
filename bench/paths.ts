/**
 * The three paths the throughput scenarios compare (http, tcp, iperf,
 * isolation, inspector): straight to nginx and the sink, through one burrow
 * server with an http and a tcp tunnel, and through `ssh -R` to a private
 * sshd. One set for all of them, started once; run.ts stops it when the
 * throughput sections are done.
 */
import { MiB } from "./lib/measure.ts";
import { freePortRange, type Processes } from "./lib/proc.ts";
import { PATHS, type PathName } from "./lib/report.ts";
import { createToken, FILES, startBurrowAgent, startBurrowServer, startSshd, startSshForward, tunnelHost, type BurrowServer, type Sshd } from "./lib/services.ts";

export interface PathsSetup {
  procs: Processes;
  bin: string;
  dir: string;
  nginxPort: number;
  sinkPort: number;
  say(line: string): void;
}

export interface ThreePaths {
  server: BurrowServer;
  token: string;
  sshd: Sshd;
  /** The http tunnel's Host. */
  host: string;
  /** Where each path serves nginx's files, and the Host to ask for. */
  http: Record<PathName, { base: string; host?: string }>;
  /** The port each path carries to the sink. */
  tcp: Record<PathName, number>;
}

export async function startThreePaths(b: PathsSetup): Promise<ThreePaths> {
  const { procs, bin, dir, nginxPort, sinkPort } = b;
  const server = await startBurrowServer(procs, bin, dir, "burrow-server", freePortRange(20));
  const token = await createToken(server);
  const httpAgent = await startBurrowAgent(procs, bin, dir, "burrow-http", server, token, "http", nginxPort, ["--subdomain", "bench"]);
  const tcpAgent = await startBurrowAgent(procs, bin, dir, "burrow-tcp", server, token, "tcp", sinkPort);
  b.say(`burrow server edge :${server.edgePort}, http tunnel ${httpAgent.subdomain}, tcp tunnel :${tcpAgent.port}`);

  const sshd = await startSshd(procs, dir);
  const sshHttp = await startSshForward(procs, sshd, "ssh-http", nginxPort);
  const sshTcp = await startSshForward(procs, sshd, "ssh-tcp", sinkPort);
  b.say(`sshd :${sshd.port}, ssh -R http :${sshHttp.port}, tcp :${sshTcp.port}`);

  const host = tunnelHost(server, httpAgent.subdomain!);
  return {
    server,
    token,
    sshd,
    host,
    http: {
      direct: { base: `http://127.0.0.1:${nginxPort}` },
      burrow: { base: server.edgeUrl, host },
      ssh: { base: `http://127.0.0.1:${sshHttp.port}` },
    },
    tcp: { direct: sinkPort, burrow: tcpAgent.port!, ssh: sshTcp.port },
  };
}

/** Sanity before any figure: every path serves the exact files. */
export async function checkFiles(paths: ThreePaths): Promise<void> {
  for (const p of PATHS) {
    const { base, host } = paths.http[p];
    for (const [file, size] of [
      [FILES.small, 1024],
      [FILES.medium, 10 * MiB],
    ] as const) {
      const res = await fetch(`${base}/${file}`, { headers: host ? { host } : {} });
      const got = (await res.arrayBuffer()).byteLength;
      if (res.status !== 200 || got !== size) throw new Error(`${p} path: GET /${file} gave ${res.status} with ${got} bytes`);
    }
  }
}
