/**
 * TLS passed through by name (`BENCH_ONLY=tls`, or part of a full run): the
 * same TLS download from nginx (a certificate of its own, the bench's 1 GiB
 * file) straight, through a tcp tunnel to nginx's TLS port, and through a
 * tls tunnel on the server's --tls-port, the paths interleaved round by
 * round. curl downloads with --resolve, so the name asked for is the
 * tunnel's; beside each tunnel's MiB/s, the server's and agent's CPU per GiB
 * (from /proc). Both tunnels carry the same encrypted bytes: the tls one adds
 * only reading the ClientHello's name.
 */
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { cpuMs, freePort, freePortRange, type Processes } from "./lib/proc.ts";
import { fmt, fmtRatio, median, ratio, type Row } from "./lib/report.ts";
import { createToken, FILES, runNginx, startBurrowAgent, startBurrowServer } from "./lib/services.ts";

const NAME = "tlsbench";
const GiB = 1024 ** 3;

type TlsPath = "direct" | "tcp" | "tls";

export interface TlsPassthrough {
  /** MiB/s per round, per path. */
  mibps: Record<TlsPath, number[]>;
  /** Server + agent CPU ms per GiB per round, for the two tunnels. */
  cpuPerGiB: Record<"tcp" | "tls", number[]>;
}

export interface TlsBench {
  procs: Processes;
  bin: string;
  dir: string;
  rounds: number;
  say(line: string): void;
}

/** A curl download of the 1 GiB file from https://tlsbench.localhost:`port`, trusting `ca`: MiB/s. */
async function download(procs: Processes, port: number, ca: string): Promise<number> {
  const p = Bun.spawn(
    ["curl", "-sS", "-o", "/dev/null", "--http1.1", "-w", "%{speed_download} %{size_download}", "--resolve", `${NAME}.localhost:${port}:127.0.0.1`, "--cacert", ca, `https://${NAME}.localhost:${port}/${FILES.huge}`],
    { stdout: "pipe", stderr: "pipe" },
  );
  const [out, err] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  const [speed, size] = out.trim().split(" ").map(Number);
  if (size !== GiB) throw new Error(`TLS download through :${port} got ${size} bytes: ${err.trim()}`);
  return speed! / 1024 ** 2;
}

export async function tlsPassthrough(b: TlsBench): Promise<TlsPassthrough> {
  const { procs, dir } = b;
  // nginx with a certificate for the tunnel's name, serving the bench's files (startNginx wrote them)
  const prefix = join(dir, "nginx-tls");
  mkdirSync(prefix, { recursive: true });
  const cert = join(prefix, "cert.pem");
  const key = join(prefix, "key.pem");
  const made = Bun.spawnSync(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", `/CN=${NAME}.localhost`, "-addext", `subjectAltName=DNS:${NAME}.localhost`], { stdout: "ignore", stderr: "pipe" });
  if (made.exitCode !== 0) throw new Error(`openssl: ${made.stderr.toString()}`);
  const nginxPort = freePort();
  await runNginx(procs, "nginx-tls", prefix, nginxPort, `
  default_type application/octet-stream;
  server {
    listen 127.0.0.1:${nginxPort} ssl;
    ssl_certificate ${cert};
    ssl_certificate_key ${key};
    root ${join(dir, "nginx", "www")};
    location / { }
  }`);

  const server = await startBurrowServer(procs, b.bin, dir, "burrow-tls-server", freePortRange(4), ["--tls-port", "0"]);
  const tlsPort = Number(/tls_port=(\d+)/.exec(procs.log(server.child))?.[1]);
  if (!Number.isFinite(tlsPort)) throw new Error("the server did not say its --tls-port");
  const token = await createToken(server, "bench-tls", { allowed_protocols: "http,tcp,tls" });
  const tcpAgent = await startBurrowAgent(procs, b.bin, dir, "burrow-tls-tcp", server, token, "tcp", nginxPort);
  const tlsAgent = await startBurrowAgent(procs, b.bin, dir, "burrow-tls-tls", server, token, "tls", nginxPort, ["--subdomain", NAME]);
  b.say(`tls         nginx TLS :${nginxPort}, tcp tunnel :${tcpAgent.port}, tls tunnel ${NAME}.localhost:${tlsPort}`);

  const ports: Record<TlsPath, number> = { direct: nginxPort, tcp: tcpAgent.port!, tls: tlsPort };
  const agentPid: Record<"tcp" | "tls", number> = { tcp: tcpAgent.child.pid, tls: tlsAgent.child.pid };
  const result: TlsPassthrough = { mibps: { direct: [], tcp: [], tls: [] }, cpuPerGiB: { tcp: [], tls: [] } };
  await download(procs, ports.tls, cert); // warm-up: the first connection's handshakes and the page cache
  for (let round = 1; round <= b.rounds; round++) {
    const order: TlsPath[] = round % 2 === 1 ? ["direct", "tcp", "tls"] : ["tls", "tcp", "direct"];
    for (const path of order) {
      const before = path === "direct" ? 0 : cpuMs(server.child.pid) + cpuMs(agentPid[path]);
      const mibps = await download(procs, ports[path], cert);
      result.mibps[path].push(mibps);
      let cpu = "";
      if (path !== "direct") {
        const ms = cpuMs(server.child.pid) + cpuMs(agentPid[path]) - before;
        result.cpuPerGiB[path].push(ms);
        cpu = `  server + agent CPU ${fmt(ms)} ms/GiB`;
      }
      b.say(`tls         round ${round} ${path.padEnd(6)} ${fmt(mibps)} MiB/s${cpu}`);
    }
  }
  await procs.stop(tlsAgent.child);
  await procs.stop(tcpAgent.child);
  await procs.stop(server.child);
  return result;
}

export function tlsRows(r: TlsPassthrough): Row[] {
  const cells = (xs: number[], unit = "") => `${xs.map((x) => fmt(x, unit)).join(" · ")} → **${fmt(median(xs), unit)}**`;
  return [
    {
      scenario: "TLS 1 GiB download (curl, nginx's own certificate): burrow tls (passed through by name) and burrow tcp to the same TLS port",
      unit: "MiB/s",
      runs: { direct: r.mibps.direct },
      higherIsBetter: true,
      burrowText: `tls ${cells(r.mibps.tls)}; tcp ${cells(r.mibps.tcp)}; tls/tcp **${fmtRatio(ratio(median(r.mibps.tls), median(r.mibps.tcp)))}**`,
      ratioText: { direct: `tls ${fmtRatio(ratio(median(r.mibps.tls), median(r.mibps.direct)))}, tcp ${fmtRatio(ratio(median(r.mibps.tcp), median(r.mibps.direct)))}`, ssh: "" },
    },
    {
      scenario: "TLS 1 GiB download: the tunnel's server + agent CPU per GiB",
      unit: "ms",
      runs: {},
      higherIsBetter: false,
      burrowText: `tls ${cells(r.cpuPerGiB.tls)}; tcp ${cells(r.cpuPerGiB.tcp)}`,
      ratioText: { direct: "", ssh: "" },
    },
  ];
}
