/**
 * A real ACME CA for tests: Let's Encrypt's Pebble, from Debian's `pebble`
 * package (installed with apt-get where missing and possible, as for
 * Chromium), which ships /usr/bin/pebble and /usr/bin/pebble-challtestsrv
 * but none of Pebble's test certificates: the directory's HTTPS certificate
 * (127.0.0.1 and localhost) is made here, once per test process.
 *
 * Names resolve through pebble-challtestsrv, started beside it, which
 * answers 127.0.0.1 to every A query and nothing to AAAA (so Pebble never
 * tries ::1 where the test listens on 127.0.0.1 only), unless `dnsServer`
 * names another resolver (burrow's own DNS-01 responder, say). Pebble then
 * validates HTTP-01 at `<name>:httpPort` and TLS-ALPN-01 at
 * `<name>:tlsPort`, both on this machine: start the server under test on
 * port 0 first and pass its port.
 *
 * Environment: no random sleeps before validation (PEBBLE_VA_NOSLEEP), no
 * nonces refused on purpose (PEBBLE_WFE_NONCEREJECT=0), no authorization
 * reused between orders (PEBBLE_AUTHZREUSE=0: every order, renewals
 * included, is validated again). Each start has a new root and
 * intermediate, fetched from the management API. Ready when Pebble has
 * printed its directory line and its APIs and the resolver answer (each
 * prints its addresses before binding them); stopped by PID on dispose.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { Resolver } from "node:dns/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Subprocess } from "bun";
import { aptInstall } from "./debian-packages.ts";
import { selfSignedCertificate, type TestCertificate } from "./certs.ts";
import { LineReader } from "./lines.ts";
import { waitUntil } from "./wait.ts";

const PEBBLE = "/usr/bin/pebble";
const CHALLTESTSRV = "/usr/bin/pebble-challtestsrv";
const HOST = "127.0.0.1";
const READY_TIMEOUT_MS = 15_000;
const STOP_TIMEOUT_MS = 5_000;
/** Ports are picked free, then bound by the child: another process can take one in between, so a start is tried this often. */
const START_TRIES = 3;

let installed: boolean | null = null;

/** Why Pebble tests cannot run here, or undefined when they can (installing Debian's pebble the first time if need be). */
export function pebbleSkipReason(): string | undefined {
  const present = () => existsSync(PEBBLE) && existsSync(CHALLTESTSRV);
  installed ??= present() || (aptInstall(["pebble"], "ACME tests: no Pebble test CA found") && present());
  return installed ? undefined : `Pebble is not installed (${PEBBLE}) and Debian's pebble package could not be installed here (apt-get as root or with sudo)`;
}

export interface PebbleOptions {
  /** Where Pebble validates HTTP-01: `<name>:httpPort` on 127.0.0.1. */
  httpPort: number;
  /** Where Pebble validates TLS-ALPN-01; default a port nothing listens on. */
  tlsPort?: number;
  /** `host:port` of the DNS server Pebble resolves names (and DNS-01 TXT records) with; default a pebble-challtestsrv. */
  dnsServer?: string;
  /** Lifetime of issued certificates (Pebble's default is 5 years). */
  certValiditySeconds?: number;
  /** Names Pebble refuses to issue for (and their subdomains): `rejectedIdentifier`. */
  blockedDomains?: string[];
}

export interface ChallTestSrv {
  managementUrl: string;
  dnsServer: string;
  /** Makes every query for `host` fail with SERVFAIL. */
  setServfail(host: string): Promise<void>;
  /** Serves a TXT value for `host` (a DNS-01 answer without burrow's responder). */
  setTxt(host: string, value: string): Promise<void>;
  clearTxt(host: string): Promise<void>;
}

export interface Pebble extends AsyncDisposable {
  directoryUrl: string;
  managementUrl: string;
  /** PEM of the CA that signed the directory's HTTPS certificate: what an ACME client must trust. */
  serverCa: string;
  /** Pebble's issuing root and intermediate, new at each start. */
  rootPem: string;
  intermediatePem: string;
  challtestsrv?: ChallTestSrv;
  /** Pebble's (and pebble-challtestsrv's) output so far, for failure messages. */
  logs(): string;
}

let serverCert: Promise<TestCertificate> | undefined;

/** The directory's HTTPS certificate: self-signed for 127.0.0.1 and localhost, so it is its own trust anchor. */
function pebbleServerCertificate(): Promise<TestCertificate> {
  serverCert ??= selfSignedCertificate({ names: ["localhost"], ips: [HOST], commonName: "burrow test ACME CA", ca: true });
  return serverCert;
}

/** A port free on 127.0.0.1 for TCP and UDP right now. */
async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const tcp = Bun.listen({ hostname: HOST, port: 0, socket: { data() {} } });
    const port = tcp.port;
    try {
      const udp = await Bun.udpSocket({ hostname: HOST, port });
      udp.close();
      return port;
    } catch {
      // UDP side taken: another
    } finally {
      tcp.stop(true);
    }
  }
  throw new Error("no port free for both TCP and UDP");
}

interface Child {
  proc: Subprocess<"ignore", "pipe", "pipe">;
  lines: LineReader;
}

function spawn(cmd: string[], env: Record<string, string> = {}): Child {
  const proc = Bun.spawn(cmd, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  return { proc, lines: new LineReader(proc) };
}

async function stop(child: Child | undefined): Promise<void> {
  if (!child || child.proc.exitCode !== null || child.proc.signalCode !== null) return;
  child.proc.kill("SIGTERM");
  const exited = await Promise.race([child.proc.exited.then(() => true), Bun.sleep(STOP_TIMEOUT_MS).then(() => false)]);
  if (!exited) {
    child.proc.kill("SIGKILL");
    await child.proc.exited;
  }
}

async function startChallTestSrv(): Promise<{ child: Child; api: ChallTestSrv }> {
  const dnsPort = await freePort();
  const mgmtPort = await freePort();
  const child = spawn([CHALLTESTSRV, "-dns01", `${HOST}:${dnsPort}`, "-management", `${HOST}:${mgmtPort}`, "-http01", "", "-https01", "", "-tlsalpn01", "", "-defaultIPv6", ""]);
  const managementUrl = `http://${HOST}:${mgmtPort}`;
  const post = async (path: string, body: object) => {
    const res = await fetch(`${managementUrl}${path}`, { method: "POST", body: JSON.stringify(body) });
    if (!res.ok) throw new Error(`pebble-challtestsrv ${path}: HTTP ${res.status}`);
  };
  const api: ChallTestSrv = {
    managementUrl,
    dnsServer: `${HOST}:${dnsPort}`,
    setServfail: (host) => post("/set-servfail", { host }),
    setTxt: (host, value) => post("/set-txt", { host: host.endsWith(".") ? host : `${host}.`, value }),
    clearTxt: (host) => post("/clear-txt", { host: host.endsWith(".") ? host : `${host}.` }),
  };
  try {
    await child.lines.waitFor(/Starting management server/, READY_TIMEOUT_MS);
    // the line comes before the sockets are bound: ready is when both answer
    const resolver = new Resolver({ timeout: 500, tries: 1 });
    resolver.setServers([`${HOST}:${dnsPort}`]);
    await waitUntil(
      async () => {
        const dns = await resolver.resolve4("ready.burrow.test").then((a) => a.includes(HOST), () => false);
        const mgmt = await fetch(managementUrl).then(() => true, () => false);
        return dns && mgmt;
      },
      READY_TIMEOUT_MS,
      "pebble-challtestsrv to answer DNS and its management API",
    );
  } catch (err) {
    await stop(child);
    throw new Error(`pebble-challtestsrv did not start: ${(err as Error).message}\n${child.lines.text()}`);
  }
  return { child, api };
}

async function startOnce(opts: PebbleOptions, dir: string, dnsServer: string): Promise<{ child: Child; listen: number; mgmt: number }> {
  const cert = await pebbleServerCertificate();
  const listen = await freePort();
  const mgmt = await freePort();
  const tlsPort = opts.tlsPort ?? (await freePort());
  writeFileSync(join(dir, "cert.pem"), cert.certPem);
  writeFileSync(join(dir, "key.pem"), cert.keyPem);
  const config = {
    pebble: {
      listenAddress: `${HOST}:${listen}`,
      managementListenAddress: `${HOST}:${mgmt}`,
      certificate: join(dir, "cert.pem"),
      privateKey: join(dir, "key.pem"),
      httpPort: opts.httpPort,
      tlsPort,
      ocspResponderURL: "",
      externalAccountBindingRequired: false,
      ...(opts.blockedDomains ? { domainBlocklist: opts.blockedDomains } : {}),
      ...(opts.certValiditySeconds ? { certificateValidityPeriod: opts.certValiditySeconds } : {}),
    },
  };
  writeFileSync(join(dir, "pebble-config.json"), JSON.stringify(config, null, 2));
  const child = spawn([PEBBLE, "-config", join(dir, "pebble-config.json"), "-dnsserver", dnsServer], {
    PEBBLE_VA_NOSLEEP: "1",
    PEBBLE_WFE_NONCEREJECT: "0",
    PEBBLE_AUTHZREUSE: "0",
  });
  const answers = (url: string) => fetch(url, { tls: { ca: cert.certPem } }).then((r) => r.ok, () => false);
  try {
    await child.lines.waitFor(/ACME directory available at/, READY_TIMEOUT_MS);
    // Pebble prints its addresses before it binds them: ready is when both APIs answer
    await waitUntil(
      async () => {
        if (child.proc.exitCode !== null) throw new Error(`pebble exited (${child.proc.exitCode})`);
        return (await answers(`https://${HOST}:${listen}/dir`)) && (await answers(`https://${HOST}:${mgmt}/roots/0`));
      },
      READY_TIMEOUT_MS,
      "Pebble's directory and management API to answer",
    );
  } catch (err) {
    await stop(child);
    throw new Error(`pebble did not start: ${(err as Error).message}\n${child.lines.text()}`);
  }
  return { child, listen, mgmt };
}

/** Starts Pebble (and a pebble-challtestsrv unless `dnsServer` is given). Call pebbleSkipReason() first. */
export async function startPebble(opts: PebbleOptions): Promise<Pebble> {
  const dir = mkdtempSync(join(tmpdir(), "burrow-pebble-"));
  let resolver: { child: Child; api: ChallTestSrv } | undefined;
  let pebble: { child: Child; listen: number; mgmt: number } | undefined;
  const dispose = async () => {
    await stop(pebble?.child);
    await stop(resolver?.child);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    if (!opts.dnsServer) resolver = await startChallTestSrv();
    const dnsServer = opts.dnsServer ?? resolver!.api.dnsServer;
    let lastError: unknown;
    for (let attempt = 0; attempt < START_TRIES && !pebble; attempt++) {
      try {
        pebble = await startOnce(opts, dir, dnsServer);
      } catch (err) {
        lastError = err;
      }
    }
    if (!pebble) throw lastError;
    const serverCa = (await pebbleServerCertificate()).certPem;
    const managementUrl = `https://${HOST}:${pebble.mgmt}`;
    const get = async (path: string) => {
      const res = await fetch(`${managementUrl}${path}`, { tls: { ca: serverCa } });
      if (!res.ok) throw new Error(`pebble management ${path}: HTTP ${res.status}`);
      return res.text();
    };
    const started = pebble;
    return {
      directoryUrl: `https://${HOST}:${pebble.listen}/dir`,
      managementUrl,
      serverCa,
      rootPem: await get("/roots/0"),
      intermediatePem: await get("/intermediates/0"),
      ...(resolver ? { challtestsrv: resolver.api } : {}),
      logs: () => [started.child.lines.text(), resolver?.child.lines.text() ?? ""].join("\n"),
      [Symbol.asyncDispose]: dispose,
    };
  } catch (err) {
    await dispose();
    throw err;
  }
}
