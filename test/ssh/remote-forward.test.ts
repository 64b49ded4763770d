/**
 * `ssh -R` through the SSH gateway of a real server, with OpenSSH's own
 * client and a key added through the admin API: an http tunnel by name
 * and at random (curl-like requests, a body, keep-alive), a tcp tunnel on
 * the port OpenSSH is told ("Allocated port N"), several -R in one
 * session, the session showing the addresses and one line per request,
 * the tunnels listed as the key's, and the version line without burrow's
 * version.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server } from "node:net";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tunnelFetch } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;
let web: ReturnType<typeof Bun.serve>;
let echo: Server;
let echoPort = 0;
let tlsService: ReturnType<typeof Bun.serve>;
let tlsDir: string;

beforeAll(async () => {
  if (skip) return;
  web = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: async (req) => {
      const url = new URL(req.url);
      if (req.method === "POST") return new Response(`got ${(await req.arrayBuffer()).byteLength} bytes`);
      return new Response(`hello from ${url.pathname} host=${req.headers.get("host")}`);
    },
  });
  echo = createServer((s) => {
    s.write("ready\n");
    s.pipe(s);
  });
  await new Promise<void>((r) => echo.listen(0, "127.0.0.1", r));
  echoPort = (echo.address() as { port: number }).port;
  rig = await startSshRig({ args: ["--tls-port", "0"], user: { allowed_protocols: "http,tcp,tls" } });
  const cert = await selfSignedCertificate({ names: ["vault.localhost"], ca: true });
  tlsDir = mkdtempSync(join(tmpdir(), "burrow-ssh-tls-"));
  writeFileSync(join(tlsDir, "ca.pem"), cert.certPem);
  tlsService = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: () => new Response("decrypted by the service itself") });
}, 60_000);

afterAll(async () => {
  await rig?.close();
  tlsService?.stop(true);
  if (tlsDir) rmSync(tlsDir, { recursive: true, force: true });
  web?.stop(true);
  echo?.close();
});

/** The user's live tunnels as the admin API lists them. */
async function active() {
  return (await rig.api.get("/api/tunnels/active")).body as { subdomain?: string; port?: number; protocol: string; token_id: number | null; ssh_key_id?: number; username: string }[];
}

describe.skipIf(skip !== undefined)("ssh -R opens tunnels", () => {
  test("the version line says burrow, not its version", async () => {
    const { promise, resolve, reject } = Promise.withResolvers<string>();
    const timer = setTimeout(() => reject(new Error("no version line")), 10_000);
    const sock = await Bun.connect({
      hostname: "127.0.0.1",
      port: rig.server.sshPort!,
      socket: { data: (_s, d) => resolve(d.toString()), error: (_s, e) => reject(e) },
    });
    const line = await promise;
    clearTimeout(timer);
    sock.end();
    expect(line).toBe("SSH-2.0-burrow\r\n");
  });

  test("-N -R demo:80:localhost:PORT is http tunnel 'demo', listed as the key's; requests and bodies go through", async () => {
    const ssh = rig.ssh(["-N", "-R", `demo:80:localhost:${web.port}`]);
    await waitUntil(async () => (await active()).some((t) => t.subdomain === "demo"), 15_000, "tunnel demo");
    const listed = (await active()).find((t) => t.subdomain === "demo")!;
    expect(listed).toMatchObject({ protocol: "http", username: "alice", token_id: null });
    expect(listed.ssh_key_id).toBeGreaterThan(0);
    const res = await tunnelFetch(rig.server.edgePort, "demo", "/path?q=1");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe(`hello from /path host=demo.localhost:${rig.server.edgePort}`);
    const body = new Uint8Array(300_000).fill(7);
    const posted = await tunnelFetch(rig.server.edgePort, "demo", "/upload", { method: "POST", body });
    expect(await posted.text()).toBe("got 300000 bytes");
    // many requests, some at once: kept-alive channels carry them in turn
    const many = await Promise.all(Array.from({ length: 20 }, (_, i) => tunnelFetch(rig.server.edgePort, "demo", `/n${i}`).then((r) => r.text())));
    expect(many).toEqual(Array.from({ length: 20 }, (_, i) => `hello from /n${i} host=demo.localhost:${rig.server.edgePort}`));
    await ssh.stop();
  });

  test("without -N the session shows the address and a line per request; -R 80:... gets a random name", async () => {
    const ssh = rig.ssh(["-tt", "-R", `80:localhost:${web.port}`]);
    const line = await ssh.output.waitFor(/Forwarding\s+http:\/\/[a-z0-9]{8}\.localhost:\d+ -> your ssh -R 80/, 15_000);
    expect(ssh.output.text()).toContain("signed in as alice with key 'alice@laptop'");
    const name = /http:\/\/([a-z0-9]{8})\./.exec(line)![1]!;
    const res = await tunnelFetch(rig.server.edgePort, name, "/seen");
    expect(res.status).toBe(200);
    await ssh.output.waitFor(/GET\s+\/seen\s+200/, 10_000);
    await ssh.stop();
  });

  test("-R 0:localhost:PORT is a tcp tunnel; OpenSSH says 'Allocated port N', and bytes echo through N", async () => {
    const ssh = rig.ssh(["-N", "-R", `0:localhost:${echoPort}`]);
    const line = await ssh.output.waitFor(/Allocated port \d+ for remote forward to localhost:\d+/, 15_000);
    const port = Number(/Allocated port (\d+)/.exec(line)![1]);
    expect((await active()).some((t) => t.protocol === "tcp" && t.port === port)).toBe(true);
    const { echoThrough } = await import("../harness/ports.ts");
    expect(await echoThrough(port, "through ssh -R")).toBe("through ssh -R");
    await ssh.stop();
  });

  test("-R vault:443:localhost:PORT is tls tunnel 'vault': the visitor's TLS reaches the service undecrypted, its certificate the service's", async () => {
    const ssh = rig.ssh(["-N", "-R", `vault:443:localhost:${tlsService.port}`]);
    await waitUntil(async () => (await active()).some((t) => t.subdomain === "vault" && t.protocol === "tls"), 15_000, "tls tunnel vault");
    const curl = Bun.spawn(["curl", "-sS", "--max-time", "10", "--resolve", `vault.localhost:${rig.server.tlsPort}:127.0.0.1`, "--cacert", join(tlsDir, "ca.pem"), `https://vault.localhost:${rig.server.tlsPort}/`], { stdout: "pipe", stderr: "pipe" });
    const [out, err] = await Promise.all([new Response(curl.stdout).text(), new Response(curl.stderr).text()]);
    expect(err).toBe("");
    expect(out).toBe("decrypted by the service itself");
    await ssh.stop();
  });

  test("several -R in one session are several tunnels", async () => {
    const ssh = rig.ssh(["-N", "-R", `one:80:localhost:${web.port}`, "-R", `two:80:localhost:${web.port}`, "-R", `0:localhost:${echoPort}`]);
    await ssh.output.waitFor(/Allocated port \d+/, 15_000);
    await waitUntil(async () => (await active()).filter((t) => t.subdomain === "one" || t.subdomain === "two").length === 2, 15_000, "two http tunnels");
    expect(await (await tunnelFetch(rig.server.edgePort, "one", "/1")).text()).toContain("hello from /1");
    expect(await (await tunnelFetch(rig.server.edgePort, "two", "/2")).text()).toContain("hello from /2");
    await ssh.stop();
    // the connection gone, its tunnels are no longer reached (their names held for the key a while)
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "one", "/")).status !== 200, 15_000, "tunnel one gone");
  });

  test("a name another user has is refused: OpenSSH says the forward failed, and the session says burrow's reason", async () => {
    const bob = await rig.api.createUser("bob-taken");
    const bobKey = rig.keys.make();
    expect((await rig.api.post(`/api/users/${bob}/ssh-keys`, { key: bobKey.pub })).status).toBe(201);
    const alice = rig.ssh(["-N", "-R", `taken:80:localhost:${web.port}`]);
    await waitUntil(async () => (await active()).some((t) => t.subdomain === "taken"), 15_000, "alice's tunnel");
    const bobs = rig.ssh(["-tt", "-R", `taken:80:localhost:${web.port}`], { key: bobKey });
    await bobs.output.waitFor(/remote port forwarding failed for listen port 80/, 15_000);
    await bobs.output.waitFor(/-R taken:80 refused: SUBDOMAIN_TAKEN: 'taken' is in use by another tunnel/, 15_000);
    expect(await bobs.proc.exited).not.toBe(0);
    // with -N there is no session to say it on: the disconnect says it
    const quiet = rig.ssh(["-N", "-R", `taken:80:localhost:${web.port}`], { key: bobKey });
    await quiet.output.waitFor(/Received disconnect from .*burrow: -R taken:80 refused: SUBDOMAIN_TAKEN/, 15_000);
    await alice.stop();
  });

  test("a key that is no user's is refused: Permission denied (publickey), and nothing opens", async () => {
    const stranger = rig.keys.make();
    const ssh = rig.ssh(["-N", "-R", `stranger:80:localhost:${web.port}`], { key: stranger });
    expect(await ssh.proc.exited).toBe(255);
    expect(ssh.output.text()).toContain("Permission denied (publickey)");
    expect((await active()).some((t) => t.subdomain === "stranger")).toBe(false);
  });

  for (const [type, bits] of [
    ["ecdsa", 256],
    ["ecdsa", 384],
    ["ecdsa", 521],
    ["rsa", 2048],
    ["rsa", 3072],
    ["ed25519", undefined],
  ] as const) {
    test(`a ${type}${bits ? ` ${bits}` : ""} key made by ssh-keygen signs in and forwards`, async () => {
      const key = rig.keys.make(type, bits);
      expect((await rig.api.post(`/api/users/${rig.userId}/ssh-keys`, { key: key.pub })).status).toBe(201);
      const name = `k-${type}-${bits ?? 0}`;
      const ssh = rig.ssh(["-N", "-R", `${name}:80:localhost:${web.port}`], { key });
      await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, name, "/")).status === 200, 15_000, `tunnel ${name}`);
      await ssh.stop();
    });
  }

  test("passwords and keyboard-interactive are not offered: only publickey", async () => {
    const ssh = rig.ssh(["-N", "-o", "PreferredAuthentications=password,keyboard-interactive", "-o", "BatchMode=no", "-o", "NumberOfPasswordPrompts=1"]);
    ssh.proc.stdin.end();
    expect(await ssh.proc.exited).toBe(255);
    expect(ssh.output.text()).toContain("Permission denied (publickey)");
  });
});
