/**
 * Security class: hostile SSH clients at the gateway. Every request and
 * channel type it does not serve is refused and nothing runs (a command,
 * SFTP, X11 and agent forwarding, Unix sockets, a direct-tcpip to a host
 * and port, such as the admin API's, instead of a private tunnel); 1,000
 * half-open handshakes from several addresses hold no more than their caps
 * while a real client signs in and forwards; a client whose window never
 * opens stops only its own visitor, and the server's memory stays bounded.
 * The hostile client is ssh2's own (a full SSH client that asks what
 * OpenSSH would not); the real one is OpenSSH's.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { Client, type ClientChannel } from "ssh2";
import { tunnelFetch } from "../harness/agent.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("fine") });

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig();
}, 60_000);
afterAll(async () => {
  await rig?.close();
  web.stop(true);
});

/** ssh2's client, signed in with the rig's key. */
async function hostile(extra: Record<string, unknown> = {}): Promise<Client> {
  const client = new Client();
  await new Promise<void>((resolve, reject) => {
    client.once("ready", () => resolve());
    client.once("error", reject);
    client.connect({ host: "127.0.0.1", port: rig.server.sshPort!, username: "whoever", privateKey: readFileSync(rig.key.file), hostVerifier: () => true, ...extra });
  });
  client.on("error", () => {});
  return client;
}

/** The error a callback-style ssh2 call ends with, or undefined when it succeeded. */
function refusal(call: (cb: (err: Error | undefined, ch?: ClientChannel) => void) => void): Promise<{ err?: Error; channel?: ClientChannel }> {
  return new Promise((resolve) => call((err, channel) => resolve({ err, channel })));
}

/** The server process's resident memory, in bytes. */
function rss(): number {
  const status = readFileSync(`/proc/${rig.server.proc.pid}/status`, "utf8");
  return Number(/VmRSS:\s+(\d+) kB/.exec(status)![1]) * 1024;
}

describe.skipIf(skip !== undefined)("hostile SSH clients", () => {
  test("a command runs nothing; SFTP, X11 and agent forwarding, Unix sockets and a direct-tcpip to a host:port are refused", async () => {
    const client = await hostile();
    // a command: the session's output, never a program
    const exec = await refusal((cb) => client.exec("cat /etc/passwd; id", cb));
    expect(exec.err).toBeUndefined();
    let said = "";
    exec.channel!.on("data", (d: Buffer) => (said += d.toString()));
    exec.channel!.stderr.on("data", (d: Buffer) => (said += d.toString()));
    await waitUntil(() => said.includes("\n"), 5_000, "the session's words");
    expect(said).not.toContain("root:");
    expect(said).not.toContain("uid=");
    exec.channel!.close();
    // sftp, another subsystem
    expect((await refusal((cb) => client.sftp(cb as never))).err).toBeDefined();
    expect((await refusal((cb) => client.subsys("sftp", cb))).err).toBeDefined();
    expect((await refusal((cb) => client.subsys("anything", cb))).err).toBeDefined();
    // X11 and agent forwarding on a session
    expect((await refusal((cb) => client.exec("", { x11: true }, cb))).err).toBeDefined();
    // (agent forwarding is asked for by a client that has an agent to forward)
    const withAgent = await hostile({ agent: "/nonexistent/agent.sock", agentForward: true });
    expect((await refusal((cb) => withAgent.exec("", { agentForward: true }, cb))).err).toBeDefined();
    withAgent.end();
    // Unix sockets, either way
    expect((await refusal((cb) => client.openssh_forwardInStreamLocal("/tmp/burrow-hostile.sock", cb as never))).err).toBeDefined();
    expect((await refusal((cb) => client.openssh_forwardOutStreamLocal("/var/run/docker.sock", cb))).err).toBeDefined();
    // a direct-tcpip to a host and port (the admin API, the edge, sshd): never reached
    const admin = new URL(rig.server.adminUrl);
    for (const [host, port] of [[admin.hostname, Number(admin.port)], ["127.0.0.1", rig.server.edgePort], ["localhost", 22]] as const) {
      const out = await refusal((cb) => client.forwardOut("127.0.0.1", 1234, host, port, cb));
      expect(out.err?.message).toContain("burrow:");
    }
    // a -R for a Unix socket or a name on a tcp port
    expect((await refusal((cb) => client.forwardIn("named", 5432, cb as never))).err).toBeDefined();
    client.end();
  });

  test("1,000 half-open handshakes from ten addresses are held to --ssh-max-handshakes each; a real client signs in and forwards meanwhile", async () => {
    const sockets: Socket[] = [];
    const closed: Promise<void>[] = [];
    for (let a = 1; a <= 10; a++) {
      for (let i = 0; i < 100; i++) {
        const s = connect({ host: "127.0.0.1", port: rig.server.sshPort!, localAddress: `127.0.1.${a}` });
        s.on("error", () => {});
        closed.push(new Promise((r) => s.once("close", () => r())));
        sockets.push(s);
      }
    }
    // each address keeps 32 (the default), the others are closed as they open
    await waitUntil(() => sockets.filter((s) => s.destroyed || s.closed).length >= 1000 - 10 * 32, 20_000, "the connections past the cap closed");
    const ssh = rig.ssh(["-N", "-R", `meanwhile:80:localhost:${web.port}`]);
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "meanwhile", "/")).status === 200, 15_000, "a real client's tunnel");
    expect(sockets.filter((s) => !s.destroyed && !s.closed).length).toBeLessThanOrEqual(10 * 32);
    await ssh.stop();
    for (const s of sockets) s.destroy();
    await Promise.all(closed);
  }, 60_000);

  test("a client whose window never opens stops only its own visitor: the server holds a bounded amount for it", async () => {
    const client = await hostile();
    const channels: ClientChannel[] = [];
    client.on("tcp connection", (_info, accept) => {
      const channel = accept();
      channel.pause(); // never read: its window never opens again
      channels.push(channel);
    });
    await new Promise<void>((resolve, reject) => client.forwardIn("stall", 80, (err) => (err ? reject(err) : resolve())));
    await waitUntil(async () => channels.length > 0 || (await tunnelFetch(rig.server.edgePort, "stall", "/", { signal: AbortSignal.timeout(200) }).then(() => false, () => channels.length > 0)), 15_000, "the forward");
    const before = rss();
    // a visitor pushes 64 MiB at it, which it never reads
    const body = new Uint8Array(64 * 1024 * 1024).fill(1);
    const upload = tunnelFetch(rig.server.edgePort, "stall", "/upload", { method: "POST", body, signal: AbortSignal.timeout(30_000) }).catch((err) => err);
    // another tunnel is served meanwhile
    const ssh = rig.ssh(["-N", "-R", `unstalled:80:localhost:${web.port}`]);
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "unstalled", "/")).status === 200, 15_000, "another tunnel");
    const grown = rss() - before;
    expect(grown).toBeLessThan(40 * 1024 * 1024);
    client.end();
    await upload;
    await ssh.stop();
  }, 60_000);
});
