/**
 * The two Rust tunnels burrow is compared with, bore (ekzhang/bore) and
 * rathole (rapiz1/rathole), found as ready-built executables and started
 * with their defaults under the run's temp dir, stopped by PID through
 * Processes. Each carries two tunnels: one to nginx, one to the counting sink.
 *
 * bore 0.5.2 has no bind option: its control port is 7835 on every
 * interface, and so are its tunnel ports. Only 127.0.0.1 is ever sent to.
 */
import { existsSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { freePortRange, isListening, until, type Child, type Processes } from "./proc.ts";

export type PeerName = "bore" | "rathole";
export const PEERS: PeerName[] = ["bore", "rathole"];

/** bore's control port, fixed in its source. */
export const BORE_CONTROL_PORT = 7835;

export interface FoundPeers {
  /** Executables found, by name. */
  bins: Partial<Record<PeerName, string>>;
  /** Why a peer is missing, by name. */
  missing: Partial<Record<PeerName, string>>;
}

/**
 * The executables in $BENCH_PEERS_DIR, else in ../shared/peers/bin beside
 * the repository when it exists. With BENCH_PEERS_BUILD=1 and the two git
 * dirs in BENCH_PEERS_BORE_GIT and BENCH_PEERS_RATHOLE_GIT, they are built
 * first into `dir` with the build script beside that folder
 * (build-peers.sh; minutes, and it installs Debian packages).
 */
export async function findPeers(root: string, dir: string, procs: Processes, say: (s: string) => void): Promise<FoundPeers> {
  const fallback = join(root, "..", "shared", "peers", "bin");
  let binDir = process.env.BENCH_PEERS_DIR || (existsSync(fallback) ? fallback : "");
  if (process.env.BENCH_PEERS_BUILD === "1") {
    const script = join(binDir || fallback, "..", "build-peers.sh");
    const [bore, rathole] = [process.env.BENCH_PEERS_BORE_GIT, process.env.BENCH_PEERS_RATHOLE_GIT];
    if (!bore || !rathole) throw new Error("BENCH_PEERS_BUILD=1 needs BENCH_PEERS_BORE_GIT and BENCH_PEERS_RATHOLE_GIT (git dirs of the two repositories)");
    if (!existsSync(script)) throw new Error(`BENCH_PEERS_BUILD=1: no build script at ${script}`);
    const out = join(dir, "peers-bin");
    say(`building bore and rathole (${script}); this takes minutes`);
    const r = await procs.run(["bash", script, bore, rathole], { env: { OUTBIN: out }, timeoutMs: 30 * 60_000 });
    if (r.code !== 0) throw new Error(`build-peers.sh failed (${r.code}):\n${(r.stdout + r.stderr).trim().split("\n").slice(-15).join("\n")}`);
    binDir = out;
  }
  const found: FoundPeers = { bins: {}, missing: {} };
  for (const name of PEERS) {
    if (!binDir) found.missing[name] = "BENCH_PEERS_DIR is not set and ../shared/peers/bin does not exist";
    else if (!existsSync(join(binDir, name))) found.missing[name] = `no ${name} in BENCH_PEERS_DIR`;
    else found.bins[name] = join(binDir, name);
  }
  if (found.bins.bore && isListening(BORE_CONTROL_PORT, true)) {
    found.missing.bore = `port ${BORE_CONTROL_PORT} (bore's fixed control port) is taken`;
    delete found.bins.bore;
  }
  return found;
}

/** The first line that names the version (`bore-cli 0.5.2`, `rathole 0.5.0`). */
export function peerVersion(name: PeerName, bin: string): string {
  const out = Bun.spawnSync([bin, "--version"]).stdout.toString();
  const v = /Build Version:\s*(\S+)/.exec(out)?.[1] ?? /(\d+\.\d+\.\d+)/.exec(out)?.[1];
  return `${name} ${v ?? "?"}`;
}

export interface PeerTunnels {
  /** Public port of the tunnel to nginx and of the one to the sink. */
  httpPort: number;
  tcpPort: number;
  /** The processes whose CPU time is the tunnel's cost on the HTTP tunnel (server and client). */
  httpPids: number[];
  children: Child[];
}

async function listening(procs: Processes, children: Child[], port: number, what: string, anyAddress = false): Promise<void> {
  await until(what, () => {
    for (const c of children) if (c.done) throw new Error(`${c.name} exited: ${procs.tail(c)}`);
    return isListening(port, anyAddress);
  }, 20_000);
}

/** `bore server`, then one `bore local` per target, each asking for its public port. */
export async function startBore(procs: Processes, bin: string, nginxPort: number, sinkPort: number): Promise<PeerTunnels> {
  const ports = freePortRange(2);
  const server = procs.spawn("bore-server", [bin, "server", "--min-port", String(ports.first), "--max-port", String(ports.last)]);
  const children = [server];
  await listening(procs, children, BORE_CONTROL_PORT, "bore server to listen", true);
  const local = (name: string, target: number, port: number) =>
    procs.spawn(name, [bin, "local", String(target), "--local-host", "127.0.0.1", "--to", "127.0.0.1", "--port", String(port)]);
  const http = local("bore-http", nginxPort, ports.first);
  children.push(http);
  await listening(procs, children, ports.first, "bore's tunnel to nginx", true);
  children.push(local("bore-tcp", sinkPort, ports.last));
  await listening(procs, children, ports.last, "bore's tunnel to the sink", true);
  return { httpPort: ports.first, tcpPort: ports.last, httpPids: [server.pid, http.pid], children };
}

/** `rathole --server` and `rathole --client` from two TOML files, two services. */
export async function startRathole(procs: Processes, bin: string, dir: string, nginxPort: number, sinkPort: number): Promise<PeerTunnels> {
  const ports = freePortRange(3);
  const [control, web, sink] = [ports.first, ports.first + 1, ports.first + 2];
  const token = "bench-rathole-token";
  const serverToml = join(dir, "rathole-server.toml");
  const clientToml = join(dir, "rathole-client.toml");
  writeFileSync(
    serverToml,
    `[server]
bind_addr = "127.0.0.1:${control}"
default_token = "${token}"

[server.services.web]
bind_addr = "127.0.0.1:${web}"

[server.services.sink]
bind_addr = "127.0.0.1:${sink}"
`,
  );
  writeFileSync(
    clientToml,
    `[client]
remote_addr = "127.0.0.1:${control}"
default_token = "${token}"

[client.services.web]
local_addr = "127.0.0.1:${nginxPort}"

[client.services.sink]
local_addr = "127.0.0.1:${sinkPort}"
`,
  );
  const server = procs.spawn("rathole-server", [bin, "--server", serverToml]);
  const children = [server];
  await listening(procs, children, control, "rathole server to listen");
  const client = procs.spawn("rathole-client", [bin, "--client", clientToml]);
  children.push(client);
  // the server opens a service's port once the client's control channel is up
  await listening(procs, children, web, "rathole's tunnel to nginx");
  await listening(procs, children, sink, "rathole's tunnel to the sink");
  return { httpPort: web, tcpPort: sink, httpPids: [server.pid, client.pid], children };
}
