/**
 * A tunnel added to a live connection (wire.ts ADD, which `burrow start`'s
 * reload, the agent API, `--remote` and the SDK's connect() all send) meets
 * what a HELLO's tunnel meets: the operator's admission hook is asked about
 * it before it goes live (its refusal refuses that tunnel alone), and it is
 * said as events the same way: tunnel.online when it goes live,
 * tunnel.offline when the agent removes it, tunnel.refused with the code
 * when the rules or the hook refuse it. The real server, a hook receiver in
 * a process of its own and a webhook receiver, both verifying signatures
 * with `standardwebhooks`; the agent is burrow-agent's connect().
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, type Session } from "../../sdk/src/index.ts";
import { newWebhookSecret } from "../../src/core/events/signing.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAdmissionReceiver, type AdmissionReceiver } from "../harness/admission-receiver.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil, within } from "../harness/wait.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";

const SECRET = newWebhookSecret();
let hook: AdmissionReceiver;
let server: TestServer;
let api: AdminClient;
let receiver: WebhookReceiver;
let userId: number;
let tokenId: number;
let session: Session;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("here") });

beforeAll(async () => {
  hook = await startAdmissionReceiver(SECRET);
  server = await startServer({
    args: ["--admission-hook", hook.url, "--admission-hook-timeout", "2", "--webhook-allow-private", "on", "--webhook-backoff-max", "1"],
    env: { BURROW_ADMISSION_HOOK_SECRET: SECRET },
  });
  api = await signedIn(server);
  receiver = startReceiver();
  const made = await api.post("/api/webhooks", { url: receiver.url, events: ["tunnel.*"] });
  receiver.secrets.push(made.body.secret);
  userId = await api.createUser("adder", { skip_warning: true });
  const token = await api.post(`/api/users/${userId}/tokens`, { device_name: "router" });
  tokenId = token.body.token_id;
  session = connect({ server: server.edgeUrl, token: token.body.token });
  // the session's first tunnel, by its HELLO: the hook allows it
  await within(session.forward({ port: upstream.port!, subdomain: "adder-a" }), 15_000, "the first tunnel");
});
afterAll(async () => {
  await session?.close().catch(() => {});
  await server?.stop();
  await hook?.stop();
  await receiver?.stop();
  upstream.stop(true);
});

const events = (type: string) => receiver.received.filter((r) => r.event.type === type).map((r) => r.event.data as Record<string, any>);
const said = (type: string, match: (d: Record<string, any>) => boolean, what: string) =>
  waitUntil(() => events(type).some(match), 20_000, what).then(() => events(type).find(match)!);
const refusedWith = (p: Promise<unknown>) =>
  p.then(
    () => undefined,
    (err: { code?: string; message?: string }) => err,
  );

describe("a tunnel added to a live connection", () => {
  test("is asked of the admission hook, alone; allowed, it goes live as tunnel.online, and its removal is tunnel.offline", async () => {
    await hook.mode("allow");
    const before = (await hook.asks()).length;
    const b = await within(session.forward({ port: upstream.port!, subdomain: "adder-b" }), 15_000, "tunnel B added");
    const asks = await hook.asks();
    expect(asks.length).toBe(before + 1);
    expect(asks.at(-1)!.data).toEqual({
      user_id: userId,
      username: "adder",
      token_id: tokenId,
      ssh_key_id: null,
      device_name: "router",
      address: "127.0.0.1",
      tunnels: [{ kind: "http", name: "adder-b", hostname: null, port: null, private: false }],
    });
    const online = await said("tunnel.online", (d) => String(d.address).includes("adder-b"), "tunnel.online for B");
    expect(online).toMatchObject({ user_id: userId, username: "adder", token_id: tokenId, kind: "http", node: "local" });
    expect(await (await tunnelFetch(server.edgePort, "adder-b", "/")).text()).toBe("here");

    await within(b.close(), 10_000, "B removed");
    const offline = await said("tunnel.offline", (d) => d.tunnel_id === online.tunnel_id, "tunnel.offline for B");
    expect(offline).toMatchObject({ user_id: userId, kind: "http" });
    expect(offline.bytes_out).toBeGreaterThan(0);
    // the first tunnel is not said offline: it goes on
    expect(events("tunnel.offline").filter((d) => String(d.address).includes("adder-a"))).toEqual([]);
  });

  test("the hook refuses it: refused alone with the hook's code, said as tunnel.refused; the connection's other tunnel goes on", async () => {
    await hook.mode("refuse");
    try {
      const err = await refusedWith(session.forward({ port: upstream.port!, subdomain: "adder-c" }));
      expect(err?.code).toBe("ADMISSION_REFUSED");
      expect(err?.message).toContain("NOT_IN_HOURS: tunnels only between 8:00 and 20:00");
      const refused = await said("tunnel.refused", (d) => d.code === "ADMISSION_REFUSED", "tunnel.refused by the hook");
      expect(refused).toMatchObject({ user_id: userId, username: "adder", token_id: tokenId, address: "127.0.0.1" });
      expect((await tunnelFetch(server.edgePort, "adder-c", "/")).status).toBe(404);
      expect(await (await tunnelFetch(server.edgePort, "adder-a", "/")).text()).toBe("here");
    } finally {
      await hook.mode("allow");
    }
  });

  test("a hook that does not answer refuses it too (fail closed), with the code the agent waits out", async () => {
    await hook.mode("hang");
    try {
      const err = await refusedWith(session.forward({ port: upstream.port!, subdomain: "adder-d" }));
      expect(err?.code).toBe("ADMISSION_UNAVAILABLE");
      expect((await tunnelFetch(server.edgePort, "adder-d", "/")).status).toBe(404);
    } finally {
      await hook.mode("allow");
    }
  });

  test("the rules refuse it: said as tunnel.refused with their code, and the hook is not asked about it", async () => {
    const other = await api.createUser("someone-else");
    expect((await api.post("/api/domains", { subdomain: "not-adders", user_id: other })).status).toBe(201);
    const before = (await hook.asks()).length;
    const err = await refusedWith(session.forward({ port: upstream.port!, subdomain: "not-adders" }));
    expect(err?.code).toBe("SUBDOMAIN_RESERVED");
    const refused = await said("tunnel.refused", (d) => d.code === "SUBDOMAIN_RESERVED", "tunnel.refused by the rules");
    expect(refused).toMatchObject({ user_id: userId, username: "adder", token_id: tokenId });
    expect((await hook.asks()).length).toBe(before);
  });
});
