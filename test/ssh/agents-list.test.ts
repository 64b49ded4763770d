/**
 * The SSH gateway's sessions in the server's list of agents (GET
 * /api/agents): each `ssh -R` forward is a session of its own, listed with
 * its key as its device (token_id null, ssh_key_id) and its tunnel; the
 * server's asks (restart, update) are refused with a reason, since
 * OpenSSH's client at the other end can do neither, and the forward goes
 * on untouched. With OpenSSH's own client against the real server.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { tunnelFetch } from "../harness/agent.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("through ssh") });

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig({ username: "sshlisted" });
}, 60_000);
afterAll(async () => {
  await rig?.close();
  web.stop(true);
});

interface Listed {
  id: string;
  username: string;
  token_id: number | null;
  ssh_key_id?: number;
  agent: string | null;
  transport: string;
  tunnels: { protocol: string; url: string }[];
  config: { remote: boolean };
  manage: unknown;
}

describe.skipIf(skip !== undefined)("ssh -R sessions in /api/agents", () => {
  test("listed with the key as device; restart and update asks are refused with why; the forward goes on", async () => {
    const ssh = rig.ssh(["-N", "-R", `listed:80:localhost:${web.port}`]);
    const agents = async () => (await rig.api.get("/api/agents")).body as Listed[];
    await waitUntil(async () => (await agents()).some((a) => a.tunnels.some((t) => t.url.includes("listed."))), 15_000, "the ssh session listed");
    const [key] = (await rig.api.get(`/api/users/${rig.userId}/ssh-keys`)).body as { id: number }[];
    const listed = (await agents()).find((a) => a.tunnels.some((t) => t.url.includes("listed.")))!;
    expect(listed).toMatchObject({ username: "sshlisted", token_id: null, ssh_key_id: key!.id, agent: "ssh", transport: "ssh", config: { remote: false }, manage: null });
    expect(listed.tunnels).toHaveLength(1);
    expect(listed.tunnels[0]!.protocol).toBe("http");

    for (const action of ["restart", "update"]) {
      const asked = await rig.api.post(`/api/agents/${listed.id}/${action}`, {});
      expect(asked.status).toBe(409);
      expect(asked.body.error).toContain(`an SSH gateway session (ssh -R) takes no ${action} ask`);
    }
    // nothing was sent to it: the forward still carries requests, on the same session
    expect(await (await tunnelFetch(rig.server.edgePort, "listed", "/")).text()).toBe("through ssh");
    expect((await agents()).some((a) => a.id === listed.id)).toBe(true);
    await ssh.stop();
    await waitUntil(async () => !(await agents()).some((a) => a.id === listed.id), 15_000, "the session gone from the list");
  });
});
