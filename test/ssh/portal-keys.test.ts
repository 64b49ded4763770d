/**
 * A user's own SSH keys: on the portal (added, listed, removed, held to
 * max_devices with their tokens), and with `burrow keys add` through the
 * token `burrow login` saved (the real CLI), whose key goes when that token
 * is revoked. The gateway's host keys as the portal gives them, checked by
 * OpenSSH itself (StrictHostKeyChecking with the known_hosts lines).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { tunnelFetch } from "../harness/agent.ts";
import { portalAs } from "../harness/portal.ts";
import { burrowCommand } from "../harness/server.ts";
import { sshOptions, startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("mine") });

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig();
}, 60_000);
afterAll(async () => {
  await rig?.close();
  web.stop(true);
});

/** `burrow keys add` as the real CLI, with a saved-login-like environment (server and token). */
async function keysAdd(args: string[], token: string): Promise<{ code: number; out: string; err: string }> {
  const proc = Bun.spawn([...burrowCommand(), "keys", "add", ...args], {
    env: { ...process.env, BURROW_SERVER: `http://localhost:${rig.server.edgePort}`, BURROW_TOKEN: token },
    stdout: "pipe",
    stderr: "pipe",
  });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out, err };
}

describe.skipIf(skip !== undefined)("a user's own SSH keys", () => {
  test("the portal gives the gateway's port and host keys; OpenSSH connects with them as its only known hosts", async () => {
    const res = await fetch(`http://localhost:${rig.server.edgePort}/_burrow/api/ssh`);
    const ssh = (await res.json()) as { port: number; host_keys: { type: string; fingerprint: string; known_hosts: string }[]; command: string };
    expect(ssh.port).toBe(rig.server.sshPort!);
    expect(ssh.host_keys.map((k) => k.type)).toEqual(["ED25519", "RSA"]);
    for (const k of ssh.host_keys) expect(rig.server.output.text()).toContain(`fingerprint_${k.type.toLowerCase()}=${k.fingerprint}`);
    // the lines name the host as users reach it; here it is 127.0.0.1
    const knownHosts = join(rig.keys.dir, "known_hosts");
    writeFileSync(knownHosts, ssh.host_keys.map((k) => k.known_hosts.replace(/^\[localhost\]/, "[127.0.0.1]")).join("\n") + "\n");
    const options = sshOptions(rig.server.sshPort!, rig.key.file).map((o) => (o === "StrictHostKeyChecking=no" ? "StrictHostKeyChecking=yes" : o === "UserKnownHostsFile=/dev/null" ? `UserKnownHostsFile=${knownHosts}` : o));
    const checked = Bun.spawn(["ssh", ...options, "-N", "-R", `checked:80:localhost:${web.port}`, "127.0.0.1"], { stdout: "pipe", stderr: "pipe" });
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "checked", "/")).status === 200, 15_000, "the tunnel with the host key checked");
    checked.kill();
    await checked.exited;
    // a host key that is not the server's is refused by OpenSSH, before it signs in
    writeFileSync(knownHosts, `[127.0.0.1]:${rig.server.sshPort} ${rig.keys.make().pub}\n`);
    const wrong = Bun.spawn(["ssh", ...options, "-o", "HostKeyAlgorithms=ssh-ed25519", "-N", "127.0.0.1"], { stdout: "pipe", stderr: "pipe" });
    expect(await wrong.exited).toBe(255);
    expect(await new Response(wrong.stderr).text()).toContain("REMOTE HOST IDENTIFICATION HAS CHANGED");
  });

  test("on the portal: added, listed, used, removed (its session closed); max_devices counts keys with tokens", async () => {
    const id = await rig.api.createUser("portal-keys", { max_devices: 2 });
    await rig.api.createToken(id);
    const portal = await portalAs(rig.server.edgePort, "portal-keys");
    const key = rig.keys.make();
    const added = await portal.post("/_burrow/api/me/ssh-keys", { key: key.pub, name: "laptop" });
    expect(added.status).toBe(201);
    expect(added.body).toMatchObject({ name: "laptop", fingerprint: key.fingerprint, user_id: id });
    expect((await portal.get("/_burrow/api/me/ssh-keys")).body).toEqual([added.body]);
    expect((await portal.get("/_burrow/api/me")).body.devices).toBe(2);
    // a token and a key make two devices: a third is refused
    const third = await portal.post("/_burrow/api/me/ssh-keys", { key: rig.keys.make().pub });
    expect(third.status).toBe(409);
    expect(third.body.error).toContain("2 of your 2 devices");
    const ssh = rig.ssh(["-N", "-R", `portalkey:80:localhost:${web.port}`], { key });
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "portalkey", "/")).status === 200, 15_000, "the tunnel");
    const tunnels = (await portal.get("/_burrow/api/me/tunnels")).body as { device_name: string }[];
    expect(tunnels.map((t) => t.device_name)).toEqual(["SSH key laptop"]);
    // another user's key is as unknown as one that does not exist
    const other = await portalAs(rig.server.edgePort, "alice").catch(() => undefined);
    if (other) expect((await other.delete(`/_burrow/api/me/ssh-keys/${added.body.id}`)).status).toBe(404);
    expect((await portal.delete(`/_burrow/api/me/ssh-keys/${added.body.id}`)).status).toBe(200);
    expect(await ssh.proc.exited).toBe(255);
    expect(ssh.output.text()).toContain("KEY_REVOKED");
  });

  test("burrow keys add: with the device's token, the key is added and works; revoking that token removes it", async () => {
    const id = await rig.api.createUser("cli-keys");
    const made = await rig.api.post(`/api/users/${id}/tokens`, { device_name: "laptop" });
    const key = rig.keys.make("ed25519", undefined, "cli@laptop");
    const added = await keysAdd([`${key.file}.pub`, "--name", "from the cli"], made.body.token);
    expect(added.err).toBe("");
    expect(added.code).toBe(0);
    expect(added.out).toContain(`Added SSH key 'from the cli' (${key.fingerprint})`);
    expect(added.out).toMatch(/ssh -p \d+ -R myapp:80:localhost:3000 localhost/);
    expect(added.out).toMatch(/ED25519\s+SHA256:/);
    const ssh = rig.ssh(["-N", "-R", `clikey:80:localhost:${web.port}`], { key });
    await waitUntil(async () => (await tunnelFetch(rig.server.edgePort, "clikey", "/")).status === 200, 15_000, "the tunnel");
    expect((await rig.api.delete(`/api/tokens/${made.body.token_id}`)).status).toBe(200);
    expect(await ssh.proc.exited).toBe(255);
    expect(ssh.output.text()).toContain("KEY_REVOKED");
    expect((await rig.api.get(`/api/users/${id}/ssh-keys`)).body).toEqual([]);
  });

  test("burrow keys add refuses a private key without sending it, and a wrong token with the server's words", async () => {
    const id = await rig.api.createUser("cli-refused");
    const token = (await rig.api.post(`/api/users/${id}/tokens`, { device_name: "laptop" })).body.token as string;
    const key = rig.keys.make();
    const privateKey = await keysAdd([key.file], token);
    expect(privateKey.code).toBe(2);
    expect(privateKey.err).toContain(`is a private key: give its public half, ${key.file}.pub`);
    expect(privateKey.err).not.toContain(readFileSync(key.file, "utf8").split("\n")[1]!);
    expect((await rig.api.get(`/api/users/${id}/ssh-keys`)).body).toEqual([]);
    const wrong = await keysAdd([`${key.file}.pub`], "brw_" + "x".repeat(43));
    expect(wrong.code).toBe(1);
    expect(wrong.err).toContain("this device's token is not valid: run burrow login again");
  });
});
