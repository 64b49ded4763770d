/**
 * Debian's autossh keeping an `ssh -R` up across a restart of the server
 * (SIGTERM, then a new server on the same data dir and ports): the name
 * is held for the key while autossh's ssh comes back (another user asking
 * for it meanwhile is refused), and it is the key's again once it has.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tunnelFetch } from "../harness/agent.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { LineReader } from "../harness/lines.ts";
import { freePort } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { sshOptions, sshSkipReason, startSshRig, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

function autosshSkipReason(): string | undefined {
  const ssh = sshSkipReason();
  if (ssh) return ssh;
  if (!Bun.which("autossh")) aptInstall(["autossh"], "the autossh test");
  return Bun.which("autossh") ? undefined : "no autossh (Debian's autossh)";
}

const skip = autosshSkipReason();
let dataDir: string;
let sshPort: number;
let server: TestServer;
let rig: SshRig;
let autossh: Subprocess<"ignore", "pipe", "pipe"> | undefined;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("kept up by autossh") });

const serverArgs = () => ["--ssh-port", String(sshPort)];

beforeAll(async () => {
  if (skip) return;
  dataDir = mkdtempSync(join(tmpdir(), "burrow-autossh-"));
  sshPort = freePort();
  server = await startServer({ dataDir, args: serverArgs() });
  rig = await startSshRig({ server });
}, 60_000);

afterAll(async () => {
  if (autossh && autossh.exitCode === null) {
    autossh.kill("SIGTERM");
    await autossh.exited;
  }
  await rig?.close();
  await server?.stop();
  web.stop(true);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

describe.skipIf(skip !== undefined)("autossh", () => {
  test("after the server restarts, autossh's ssh -R gets its name back; another user cannot take it meanwhile", async () => {
    const bob = await rig.api.createUser("bob");
    const bobKey = rig.keys.make();
    expect((await rig.api.post(`/api/users/${bob}/ssh-keys`, { key: bobKey.pub })).status).toBe(201);
    // -M 0: no monitoring port, ssh's own keepalive finds a dead server; restarted whatever its exit, at once
    autossh = Bun.spawn(["autossh", "-M", "0", ...sshOptions(sshPort, rig.key.file, ["-o", "ServerAliveInterval=2", "-o", "ServerAliveCountMax=2", "-o", "ExitOnForwardFailure=yes"]), "-N", "-R", `kept:80:localhost:${web.port}`, "127.0.0.1"], {
      env: { ...process.env, AUTOSSH_GATETIME: "0", AUTOSSH_POLL: "2", AUTOSSH_FIRST_POLL: "2" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const output = new LineReader(autossh);
    await waitUntil(async () => (await tunnelFetch(server.edgePort, "kept", "/")).status === 200, 20_000, "the tunnel through autossh");
    await server.stop();
    server = await startServer({ dataDir, args: serverArgs() });
    // while autossh comes back, the name is its key's: bob is refused it
    const bobs = rig.ssh(["-tt", "-R", `kept:80:localhost:${web.port}`], { key: bobKey, host: "127.0.0.1" });
    await bobs.output.waitFor(/-R kept:80 refused: SUBDOMAIN_TAKEN/, 20_000);
    await bobs.stop();
    await waitUntil(async () => (await tunnelFetch(server.edgePort, "kept", "/")).status === 200, 30_000, `the tunnel back through autossh: ${output.text()}`);
    expect(await (await tunnelFetch(server.edgePort, "kept", "/")).text()).toBe("kept up by autossh");
  }, 90_000);
});
