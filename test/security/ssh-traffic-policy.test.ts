/**
 * Traffic policy bypass through the SSH gateway (the class: a tunnel opened
 * another way than with burrow's agent meeting fewer of the operator's
 * rules). A tunnel opened with OpenSSH's `ssh -R` meets the operator's
 * policies (/api/policies) as an agent's does: a user's and a hostname's on
 * its requests, over HTTP/1.1 and HTTP/2, and a server-wide on_tcp_connect
 * on its tcp and tls connections; from its first visitor when the policy
 * came first, and within 5 s when the policy is made while it is live,
 * without a reconnect. Each refusal is made before the service behind the
 * -R hears anything. And a tunnel opened with ssh cannot bring a policy of
 * its own (`--policy-file` after the host is refused with why).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { selfSignedCertificate } from "../harness/certs.ts";
import { echoThrough } from "../harness/ports.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
/** The promise is 2 s on one node; 5 s is the rule for live changes, and a liveness bound here. */
const LIVE_MS = 5_000;
const DENY_451 = "on_http_request:\n  - name: closed\n    actions: [{ type: deny, config: { status_code: 451 } }]\n";
const NO_LOOPBACK = "on_tcp_connect:\n  - actions: [{ type: restrict-ips, config: { deny: [127.0.0.0/8, '::1/128'] } }]\n";

let rig: SshRig;
let tlsDir: string;
/** What the services behind the -R heard. */
const heard = { web: 0, echo: 0, tls: 0 };
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => (heard.web++, new Response("from the service")) });
let echo: Server;
let echoPort = 0;
let tlsService: ReturnType<typeof Bun.serve> | undefined;

beforeAll(async () => {
  if (skip) return;
  echo = createServer((s) => {
    heard.echo++;
    s.write("ready\n");
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
  echoPort = (echo.address() as { port: number }).port;
  const cert = await selfSignedCertificate({ names: ["vaulted.localhost"], ca: true });
  tlsDir = mkdtempSync(join(tmpdir(), "burrow-ssh-policy-"));
  writeFileSync(join(tlsDir, "ca.pem"), cert.certPem);
  tlsService = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: () => (heard.tls++, new Response("tls service")) });
  rig = await startSshRig({ args: ["--tls-port", "0"], user: { allowed_protocols: "http,tcp,tls" } });
}, 60_000);
afterAll(async () => {
  await rig?.close();
  web.stop(true);
  echo?.close();
  tlsService?.stop(true);
  if (tlsDir) rmSync(tlsDir, { recursive: true, force: true });
});

/** Runs curl (bounded): its exit code and what -w wrote. */
async function curl(args: string[]): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn(["curl", "-sS", "--max-time", "10", "-o", "/dev/null", ...args], { stdout: "pipe", stderr: "pipe" });
  const [out, code] = await Promise.all([new Response(proc.stdout).text(), proc.exited]);
  return { code, out };
}

/** "<status> <http version>" of a request to `name` on the plain port; HTTP/2 with prior knowledge when `h2`. */
async function visit(name: string, h2 = false): Promise<string> {
  const port = rig.server.edgePort;
  const r = await curl(["--resolve", `${name}.localhost:${port}:127.0.0.1`, ...(h2 ? ["--http2-prior-knowledge"] : []), "-w", "%{http_code} %{http_version}", `http://${name}.localhost:${port}/`]);
  return r.out;
}

/** Whether a TLS visitor to `name` reaches the service behind the -R (the handshake, then an answer). */
async function tlsVisit(name: string): Promise<boolean> {
  const port = rig.server.tlsPort!;
  const r = await curl(["--resolve", `${name}.localhost:${port}:127.0.0.1`, "--cacert", join(tlsDir, "ca.pem"), "-w", "%{http_code}", `https://${name}.localhost:${port}/`]);
  return r.code === 0 && r.out === "200";
}

/** What a tcp visitor to `port` gets: the echo, or "" when the connection was closed. */
const tcpVisit = (port: number) => echoThrough(port, "through").catch(() => "");

async function policy(body: Record<string, unknown>): Promise<number> {
  const made = await rig.api.post("/api/policies", body);
  expect(made.status).toBe(201);
  return made.body.id;
}
const remove = async (id: number) => expect((await rig.api.delete(`/api/policies/${id}`)).status).toBe(200);

async function active() {
  return (await rig.api.get("/api/tunnels/active")).body as { subdomain?: string; port?: number; protocol: string }[];
}

describe.skipIf(skip !== undefined)("the operator's traffic policies on tunnels opened with ssh -R", () => {
  test("a user's deny refuses visitors of the user's ssh -R http tunnel over HTTP/1.1 and HTTP/2: made before it opens, and made while it is live", async () => {
    const id = await policy({ name: "alice closed", scope: "user", user_id: rig.userId, policy: DENY_451 });
    const ssh = rig.ssh(["-N", "-R", `usershut:80:localhost:${web.port}`]);
    await waitUntil(async () => (await active()).some((t) => t.subdomain === "usershut"), 15_000, "tunnel usershut");
    const before = heard.web;
    expect(await visit("usershut")).toBe("451 1.1");
    expect(await visit("usershut", true)).toBe("451 2");
    expect(heard.web).toBe(before);
    await remove(id);
    await waitUntil(async () => (await visit("usershut")) === "200 1.1", LIVE_MS, "the policy's removal reaching the live tunnel");
    expect(await visit("usershut", true)).toBe("200 2");
    // made while the tunnel is live: it reaches it in place
    const again = await policy({ name: "alice closed again", scope: "user", user_id: rig.userId, policy: DENY_451 });
    await waitUntil(async () => (await visit("usershut")) === "451 1.1", LIVE_MS, "the policy reaching the live tunnel");
    const during = heard.web;
    expect(await visit("usershut", true)).toBe("451 2");
    expect(heard.web).toBe(during);
    expect(ssh.proc.exitCode).toBeNull(); // the session stayed: the policy is a rule on visitors, not on the key
    await remove(again);
    await ssh.stop();
  }, 60_000);

  test("a hostname's deny refuses visitors of the ssh -R tunnel of that name, and of no other", async () => {
    const id = await policy({ name: "one name", scope: "hostname", hostname: "hostshut.localhost", policy: DENY_451 });
    const shut = rig.ssh(["-N", "-R", `hostshut:80:localhost:${web.port}`]);
    const open = rig.ssh(["-N", "-R", `hostopen:80:localhost:${web.port}`]);
    await waitUntil(async () => (await active()).filter((t) => t.subdomain === "hostshut" || t.subdomain === "hostopen").length === 2, 15_000, "both tunnels");
    expect(await visit("hostshut")).toBe("451 1.1");
    expect(await visit("hostshut", true)).toBe("451 2");
    expect(await visit("hostopen")).toBe("200 1.1");
    await remove(id);
    await shut.stop();
    await open.stop();
  }, 60_000);

  test("a server-wide on_tcp_connect restrict-ips closes connections to ssh -R tcp and tls tunnels before the service hears them, within 5 s of being made", async () => {
    const tcp = rig.ssh(["-N", "-R", `0:localhost:${echoPort}`]);
    const port = Number(/Allocated port (\d+)/.exec(await tcp.output.waitFor(/Allocated port \d+/, 15_000))![1]);
    const tls = rig.ssh(["-N", "-R", `vaulted:443:localhost:${tlsService!.port}`]);
    await waitUntil(async () => (await active()).some((t) => t.subdomain === "vaulted" && t.protocol === "tls"), 15_000, "tls tunnel vaulted");
    expect(await tcpVisit(port)).toBe("through");
    expect(await tlsVisit("vaulted")).toBe(true);
    const id = await policy({ name: "no loopback", policy: NO_LOOPBACK });
    try {
      await waitUntil(async () => (await tcpVisit(port)) === "", LIVE_MS, "the tcp tunnel closing loopback's connections");
      await waitUntil(async () => !(await tlsVisit("vaulted")), LIVE_MS, "the tls tunnel closing loopback's connections");
      const before = { ...heard };
      for (let i = 0; i < 3; i++) {
        expect(await tcpVisit(port)).toBe("");
        expect(await tlsVisit("vaulted")).toBe(false);
      }
      expect(heard.echo).toBe(before.echo);
      expect(heard.tls).toBe(before.tls);
    } finally {
      await remove(id);
    }
    await waitUntil(async () => (await tcpVisit(port)) === "through" && (await tlsVisit("vaulted")), LIVE_MS, "both tunnels open again");
    await tcp.stop();
    await tls.stop();
  }, 60_000);

  test("--policy-file after the host is refused with why: a tunnel opened with ssh brings no policy of its own", async () => {
    const ssh = rig.ssh(["-tt", "-R", `ownpolicy:80:localhost:${web.port}`], { command: ["--", "--policy-file", "/etc/passwd"] });
    await ssh.output.waitFor(/burrow: --policy-file: the server cannot read a file on your machine/, 15_000);
    expect(await ssh.proc.exited).not.toBe(0);
    expect(ssh.output.text()).not.toContain("root:");
    expect((await active()).some((t) => t.subdomain === "ownpolicy")).toBe(false);
  }, 30_000);
});
