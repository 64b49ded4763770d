/**
 * The admission hook (--admission-hook) on the SSH gateway's way in: an
 * `ssh -R` forward is an agent's session in memory, so the operator's hook
 * is asked about its tunnel before it goes live, as for an agent's HELLO
 * or a tunnel added to a live connection; its refusal reaches OpenSSH as
 * the forward's failure, with the hook's code. OpenSSH's own client, the
 * real server, a hook receiver verifying signatures with standardwebhooks.
 * The session's device is its SSH key, named as the admin API names it
 * (`token_id` null, `ssh_key_id`) in the hook's ask and in the events.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newWebhookSecret } from "../../src/core/events/signing.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { startAdmissionReceiver, type AdmissionReceiver } from "../harness/admission-receiver.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";

const skip = sshSkipReason();
const SECRET = newWebhookSecret();
let hook: AdmissionReceiver;
let server: TestServer;
let rig: SshRig;
let receiver: WebhookReceiver;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("admitted") });

beforeAll(async () => {
  if (skip) return;
  hook = await startAdmissionReceiver(SECRET);
  server = await startServer({
    args: ["--ssh-port", "0", "--admission-hook", hook.url, "--admission-hook-timeout", "2", "--webhook-allow-private", "on"],
    env: { BURROW_ADMISSION_HOOK_SECRET: SECRET },
  });
  rig = await startSshRig({ server, username: "hooked-ssh" });
  receiver = startReceiver();
  const made = await rig.api.post("/api/webhooks", { url: receiver.url, events: ["tunnel.*"] });
  receiver.secrets.push(made.body.secret);
}, 60_000);
afterAll(async () => {
  await rig?.close();
  await server?.stop();
  await hook?.stop();
  await receiver?.stop();
  web.stop(true);
});

describe.skipIf(skip !== undefined)("ssh -R and the admission hook", () => {
  test("the hook refuses: the forward fails with its code, nothing goes live", async () => {
    await hook.mode("refuse");
    const ssh = rig.ssh(["-N", "-R", `hooked:80:localhost:${web.port}`]);
    await ssh.output.waitFor(/burrow: -R hooked:80 refused: ADMISSION_REFUSED: NOT_IN_HOURS: tunnels only between 8:00 and 20:00/, 15_000);
    expect((await tunnelFetch(server.edgePort, "hooked", "/")).status).toBe(404);
    await ssh.stop();
  });

  test("the hook allows: asked with the key's owner and the forward's tunnel, which goes live", async () => {
    await hook.mode("allow");
    const before = (await hook.asks()).length;
    const ssh = rig.ssh(["-N", "-R", `hooked:80:localhost:${web.port}`]);
    await waitUntil(async () => (await tunnelFetch(server.edgePort, "hooked", "/")).status === 200, 15_000, "the forward live");
    const asks = await hook.asks();
    expect(asks.length).toBe(before + 1);
    expect(asks.at(-1)!.data).toMatchObject({ user_id: rig.userId, username: "hooked-ssh", token_id: null, ssh_key_id: rig.keyId, device_name: "hooked-ssh@laptop", tunnels: [{ kind: "http", name: "hooked", hostname: null, port: null, private: false }] });
    await ssh.stop();
    // the events name the key the same way
    const said = (type: string) => receiver.received.map((r) => r.event).filter((e) => e.type === type && (e.data as { address?: string }).address?.includes("hooked"));
    await waitUntil(() => said("tunnel.offline").length > 0, 20_000, "tunnel.offline");
    for (const type of ["tunnel.online", "tunnel.offline"]) expect(said(type)[0]!.data).toMatchObject({ user_id: rig.userId, token_id: null, ssh_key_id: rig.keyId });
  });
});
