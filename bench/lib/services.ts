/**
 * The things under test and their counterparts, each started under the
 * run's temp dir, bound to 127.0.0.1 only, and stopped by PID through
 * Processes: nginx (the local service), a private sshd + `ssh -R` clients,
 * and burrow (server, admin API, agents).
 */
import { chmodSync, closeSync, ftruncateSync, mkdirSync, openSync, writeFileSync } from "node:fs";
import { execSync } from "node:child_process";
import { join } from "node:path";
import { freePort, isListening, until, type Child, type Processes } from "./proc.ts";
import { tool } from "./setup.ts";

export const FILES = { small: "1k.bin", medium: "10m.bin", huge: "1g.bin" } as const;

// ---------------------------------------------------------------- nginx

export interface Nginx {
  port: number;
  child: Child;
}

export async function startNginx(procs: Processes, dir: string): Promise<Nginx> {
  const prefix = join(dir, "nginx");
  const www = join(prefix, "www");
  mkdirSync(www, { recursive: true });
  // random bytes, so nothing on any path can compress them
  const mib = new Uint8Array(1024 * 1024);
  for (let i = 0; i < mib.length; i += 65536) crypto.getRandomValues(mib.subarray(i, i + 65536));
  writeFileSync(join(www, FILES.small), mib.subarray(0, 1024));
  const ten = new Uint8Array(10 * mib.length);
  for (let i = 0; i < 10; i++) ten.set(mib, i * mib.length);
  writeFileSync(join(www, FILES.medium), ten);
  const fd = openSync(join(www, FILES.huge), "w"); // sparse: sendfile reads zeros at no disk cost
  ftruncateSync(fd, 1024 ** 3);
  closeSync(fd);
  // the worker may run as another user: let it read the files
  for (const d of [dir, prefix, www]) chmodSync(d, 0o755);

  const port = freePort();
  const child = await runNginx(procs, "nginx", prefix, port, `
  sendfile on;
  tcp_nopush on;
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${port};
    root ${www};
    location / { }
  }`);
  const res = await fetch(`http://127.0.0.1:${port}/${FILES.small}`);
  if (res.status !== 200 || (await res.arrayBuffer()).byteLength !== 1024) throw new Error(`nginx does not serve ${FILES.small} (${res.status})`);
  return { port, child };
}

/**
 * A second nginx as a reverse proxy in front of the first: the cost of one
 * ordinary hop. It keeps its upstream connections alive (as a tunnel's agent
 * keeps its own) and never spools a response to disk.
 */
export async function startNginxProxy(procs: Processes, dir: string, upstreamPort: number): Promise<Nginx> {
  const port = freePort();
  const child = await runNginx(procs, "nginx-proxy", join(dir, "nginx-proxy"), port, `
  upstream origin {
    server 127.0.0.1:${upstreamPort};
    keepalive 64;
    keepalive_requests 100000000;
  }
  server {
    listen 127.0.0.1:${port};
    location / {
      proxy_pass http://origin;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_max_temp_file_size 0;
    }
  }`);
  return { port, child };
}

/**
 * One nginx worker under `prefix` with what every bench nginx shares (its
 * own pid, log and temp dirs, no access log, long keep-alive) and `http`
 * lines of its own; resolves once it listens on `port`.
 */
export async function runNginx(procs: Processes, name: string, prefix: string, port: number, http: string): Promise<Child> {
  const t = join(prefix, "tmp");
  mkdirSync(t, { recursive: true });
  const conf = join(prefix, "nginx.conf");
  writeFileSync(
    conf,
    `worker_processes 1;
pid ${join(prefix, "nginx.pid")};
error_log ${join(prefix, "error.log")} warn;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_timeout 120s;
  keepalive_requests 100000000;
  client_body_temp_path ${t}/body;
  proxy_temp_path ${t}/proxy;
  fastcgi_temp_path ${t}/fastcgi;
  uwsgi_temp_path ${t}/uwsgi;
  scgi_temp_path ${t}/scgi;${http}
}
`,
  );
  const child = procs.spawn(name, [tool("nginx"), "-e", join(prefix, "error.log"), "-p", prefix, "-c", conf, "-g", "daemon off;"]);
  await until(`${name} to listen`, () => {
    if (child.done) throw new Error(`${name} exited: ${procs.tail(child)}`);
    return isListening(port);
  }, 10_000);
  return child;
}

// ---------------------------------------------------------------- sshd and ssh -R

export const SSH_CIPHER = "aes128-gcm@openssh.com";

export interface Sshd {
  port: number;
  child: Child;
  key: string;
  user: string;
}

export async function startSshd(procs: Processes, dir: string): Promise<Sshd> {
  const d = join(dir, "ssh");
  mkdirSync(d, { recursive: true, mode: 0o700 });
  chmodSync(d, 0o700);
  const keygen = tool("ssh-keygen");
  for (const [file, type] of [
    ["host_ed25519", "ed25519"],
    ["user_ed25519", "ed25519"],
  ] as const) {
    const r = await procs.run([keygen, "-q", "-t", type, "-N", "", "-C", "burrow-bench", "-f", join(d, file)], { timeoutMs: 20_000 });
    if (r.code !== 0) throw new Error(`ssh-keygen: ${r.stderr}`);
  }
  writeFileSync(join(d, "authorized_keys"), await Bun.file(join(d, "user_ed25519.pub")).text(), { mode: 0o600 });
  // sshd insists on its privilege separation directory
  if (process.getuid?.() === 0) mkdirSync("/run/sshd", { recursive: true, mode: 0o755 });
  const port = freePort();
  const config = join(d, "sshd_config");
  writeFileSync(
    config,
    `Port ${port}
ListenAddress 127.0.0.1
HostKey ${join(d, "host_ed25519")}
AuthorizedKeysFile ${join(d, "authorized_keys")}
PidFile ${join(d, "sshd.pid")}
UsePAM no
StrictModes no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
Ciphers ${SSH_CIPHER}
Compression no
AllowTcpForwarding yes
GatewayPorts no
X11Forwarding no
PrintMotd no
UseDNS no
MaxStartups 100
LogLevel ERROR
`,
  );
  const child = procs.spawn("sshd", [tool("sshd"), "-D", "-e", "-f", config]);
  await until("sshd to listen", () => {
    if (child.done) throw new Error(`sshd exited: ${procs.tail(child)}`);
    return isListening(port);
  }, 10_000);
  return { port, child, key: join(d, "user_ed25519"), user: execSync("id -un", { encoding: "utf8" }).trim() };
}

/** `ssh -N -R 127.0.0.1:<free>:127.0.0.1:<target>`; resolves once sshd listens on the remote port. */
export async function startSshForward(procs: Processes, sshd: Sshd, name: string, targetPort: number): Promise<{ port: number; child: Child }> {
  const port = freePort();
  const child = procs.spawn(name, [
    tool("ssh"),
    "-N",
    "-T",
    "-o", "StrictHostKeyChecking=no",
    "-o", "UserKnownHostsFile=/dev/null",
    "-o", "BatchMode=yes",
    "-o", "ExitOnForwardFailure=yes",
    "-o", "LogLevel=ERROR",
    "-o", "Compression=no",
    "-F", "/dev/null",
    "-i", sshd.key,
    "-c", SSH_CIPHER,
    "-p", String(sshd.port),
    "-R", `127.0.0.1:${port}:127.0.0.1:${targetPort}`,
    `${sshd.user}@127.0.0.1`,
  ]);
  await until(`${name} (ssh -R) to listen on ${port}`, () => {
    if (child.done) throw new Error(`${name} exited: ${procs.tail(child)}`);
    return isListening(port);
  }, 20_000);
  return { port, child };
}

// ---------------------------------------------------------------- burrow

export const ADMIN_PASSWORD = "bench-admin-password";

export interface BurrowServer {
  child: Child;
  adminUrl: string;
  edgePort: number;
  edgeUrl: string;
  tcpPorts: { first: number; last: number };
  cookie?: string;
}

/**
 * Every agent of the benchmark comes from 127.0.0.1: a server with a
 * per-address cap on agents' connections (--max-agents-per-ip, 1,024 by
 * default) gets it raised for the 10,000-agent run; older builds have none.
 */
function fleetFlags(bin: string): string[] {
  const help = Bun.spawnSync([bin, "server", "--help"]).stdout.toString();
  return help.includes("--max-agents-per-ip") ? ["--max-agents-per-ip", "1000000"] : [];
}

export async function startBurrowServer(
  procs: Processes,
  bin: string,
  dir: string,
  name: string,
  tcpPorts: { first: number; last: number },
  /** More flags, e.g. --database for the cluster run. */
  extra: string[] = [],
): Promise<BurrowServer> {
  const dataDir = join(dir, `${name}-data`);
  mkdirSync(dataDir, { recursive: true });
  const child = procs.spawn(
    name,
    [bin, "server", "--host", "127.0.0.1", "--http-port", "0", "--admin-port", "0", "--agent-port", "0", "--data-dir", dataDir, "--tcp-ports", `${tcpPorts.first}-${tcpPorts.last}`, ...fleetFlags(bin), ...extra],
    { env: { BURROW_ADMIN_USERNAME: "admin", BURROW_ADMIN_PASSWORD: ADMIN_PASSWORD, BURROW_DOMAIN: "localhost" }, manyFiles: true },
  );
  const m = await procs.waitFor(child, /admin api listening url=(\S+).*?edge_port=(\d+)/, 20_000);
  const edgePort = Number(m[2]);
  return { child, adminUrl: m[1]!, edgePort, edgeUrl: `http://127.0.0.1:${edgePort}`, tcpPorts };
}

async function admin(server: BurrowServer, method: string, path: string, body?: unknown): Promise<any> {
  const res = await fetch(server.adminUrl + path, {
    method,
    headers: { "content-type": "application/json", ...(server.cookie ? { cookie: server.cookie } : {}) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  if (res.status >= 300) throw new Error(`admin ${method} ${path}: ${res.status} ${text}`);
  if (path === "/api/auth/login") server.cookie = res.headers.get("set-cookie")?.split(";")[0];
  return text ? JSON.parse(text) : undefined;
}

/** How many tunnels the server reports live (GET /api/tunnels/active). */
export async function activeTunnels(server: BurrowServer): Promise<number> {
  const list = await admin(server, "GET", "/api/tunnels/active");
  return Array.isArray(list) ? list.length : NaN;
}

/** Logs in as admin, creates a user without limits and returns a fresh device token. */
export async function createToken(server: BurrowServer, username = "bench", extra: Record<string, unknown> = {}): Promise<string> {
  await admin(server, "POST", "/api/auth/login", { username: "admin", password: ADMIN_PASSWORD });
  const user = await admin(server, "POST", "/api/users", {
    username,
    password: "bench-user-password",
    max_tunnels: 0,
    max_devices: 0,
    traffic_limit: 0,
    allowed_protocols: "http,tcp",
    ...extra,
  });
  const token = await admin(server, "POST", `/api/users/${user.id}/tokens`, { device_name: "bench" });
  if (typeof token?.token !== "string") throw new Error(`no token in ${JSON.stringify(token)}`);
  return token.token as string;
}

export interface BurrowAgent {
  child: Child;
  /** http: the subdomain; tcp: undefined */
  subdomain?: string;
  /** tcp: the public port */
  port?: number;
  /** Where its request inspector listens (undefined with --no-inspect, or when no line said). */
  inspector?: string;
}

/**
 * An agent as a user runs it: its defaults (the request inspector on,
 * keeping the last 1,000 requests; a line per request) with its output in a
 * file, as `burrow http 3000 > agent.log` writes it (Processes gives every
 * child a log file, never a terminal or a pipe nobody reads). The inspector
 * listens on a free port rather than the first free of 4040-4049, which other
 * agents on the machine may all hold: an agent that finds none runs without
 * one, which is not what a user runs. `extra` adds flags (--no-inspect among
 * them); with `--log-level warn` no line says the tunnel is up, and an http
 * agent is taken as ready once its name answers.
 */
export async function startBurrowAgent(
  procs: Processes,
  bin: string,
  dir: string,
  name: string,
  server: BurrowServer,
  token: string,
  kind: "http" | "tcp" | "tls" | "udp",
  targetPort: number,
  extra: string[] = [],
): Promise<BurrowAgent> {
  const home = join(dir, `${name}-home`);
  mkdirSync(home, { recursive: true });
  const inspect = extra.includes("--no-inspect") || extra.includes("--inspect-addr") ? [] : ["--inspect-addr", "127.0.0.1:0"];
  const child = procs.spawn(name, [bin, kind, `127.0.0.1:${targetPort}`, "--server", server.edgeUrl, "--token", token, ...inspect, ...extra], {
    env: { XDG_CONFIG_HOME: home, HTTPS_PROXY: "", ALL_PROXY: "", HTTP_PROXY: "", https_proxy: "", all_proxy: "", http_proxy: "" },
  });
  const level = extra.includes("--log-level") ? extra[extra.indexOf("--log-level") + 1] : undefined;
  if (level === "warn" || level === "error") {
    const subdomain = extra.includes("--subdomain") ? extra[extra.indexOf("--subdomain") + 1] : undefined;
    if (kind !== "http" || !subdomain) throw new Error(`${name}: an agent without info lines is found by its name: http with --subdomain`);
    await untilServed(procs, child, server, subdomain);
    return { child, subdomain };
  }
  const m = await procs.waitFor(child, /Forwarding\s+(\S+)/, 20_000);
  const url = m[1]!;
  const inspector = /Inspector\s+(http:\/\/\S+)/.exec(procs.log(child))?.[1];
  if (kind === "http") return { child, subdomain: /^https?:\/\/([^.]+)\./.exec(url)?.[1], inspector };
  return { child, port: Number(/:(\d+)$/.exec(url)?.[1]), inspector };
}

/** Waits until the edge serves an http tunnel's name (its service answers), or the agent exits. */
async function untilServed(procs: Processes, child: Child, server: BurrowServer, subdomain: string): Promise<void> {
  await until(
    `${child.name}'s tunnel to answer`,
    async () => {
      if (child.done) throw new Error(`${child.name} exited: ${procs.tail(child)}`);
      try {
        const res = await fetch(`${server.edgeUrl}/`, { headers: { host: tunnelHost(server, subdomain) } });
        await res.arrayBuffer();
        return res.status !== 404 && res.status !== 502;
      } catch {
        return false;
      }
    },
    20_000,
  );
}

/** Request lines an agent wrote to its output file ("HH:MM:SS  GET     /path  200  0 ms"). */
export function requestLines(procs: Processes, child: Child): number {
  return procs.log(child).match(/^\d\d:\d\d:\d\d  [A-Z]+ +\S+  \d{3} /gm)?.length ?? 0;
}

/** Requests an agent's inspector holds now (it keeps the last --inspect-keep of them). */
export async function capturedRequests(agent: BurrowAgent): Promise<number> {
  if (!agent.inspector) return 0;
  const res = await fetch(`${agent.inspector}/api/requests`);
  const list = (await res.json()) as { requests?: unknown[] };
  return list.requests?.length ?? 0;
}

/** The Host header a visitor sends to reach an http tunnel through the edge on 127.0.0.1. */
export const tunnelHost = (server: BurrowServer, subdomain: string) => `${subdomain}.localhost:${server.edgePort}`;
