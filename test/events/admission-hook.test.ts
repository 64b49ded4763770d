/**
 * --admission-hook against a real receiver in a process of its own that
 * verifies every request with `standardwebhooks`: it is asked before an
 * agent's tunnels go live, with who asks for what; its allow admits, its
 * refusal reaches the agent with its code and message (ADMISSION_REFUSED);
 * a hook that hangs, answers nonsense or crashes refuses the handshake
 * (ADMISSION_UNAVAILABLE, which the agent waits out) unless the server
 * runs with --admission-hook-fail-open, which admits. And without its
 * secret the server does not start.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { newWebhookSecret } from "../../src/core/events/signing.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAdmissionReceiver, type AdmissionReceiver } from "../harness/admission-receiver.ts";
import { refusal, spawnAgent, startAgent } from "../harness/agent.ts";
import { runBurrow } from "../harness/run.ts";
import { startServer, type TestServer } from "../harness/server.ts";

const SECRET = newWebhookSecret();
let hook: AdmissionReceiver;
let server: TestServer;
let api: AdminClient;
let token: string;
let userId: number;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

beforeAll(async () => {
  hook = await startAdmissionReceiver(SECRET);
  server = await startServer({
    args: ["--admission-hook", hook.url, "--admission-hook-timeout", "1", "--webhook-allow-private", "on"],
    env: { BURROW_ADMISSION_HOOK_SECRET: SECRET },
  });
  api = await signedIn(server);
  userId = await api.createUser("hooked");
  token = await api.createToken(userId, "laptop");
});
afterAll(async () => {
  await server?.stop();
  await hook?.stop();
  upstream.stop(true);
});

/** An agent that is refused but waits and tries again: its first refusal line, then it is stopped. */
async function waitedOut(args: string[] = []): Promise<string> {
  const { proc, output } = spawnAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args });
  try {
    return await output.waitFor(/refused|Forwarding/, 15_000);
  } finally {
    proc.kill("SIGKILL");
    await proc.exited;
  }
}

describe("the admission hook", () => {
  test("allows: asked with who asks for what, signed; the tunnel goes live", async () => {
    await hook.mode("allow");
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "hooked"] });
    expect(agent.publicUrl).toContain("hooked.");
    const [ask] = await hook.asks();
    expect(ask!.type).toBe("admission.request");
    expect(ask!.id).toMatch(/^adm_/);
    expect(ask!.data).toEqual({
      user_id: userId,
      username: "hooked",
      token_id: expect.any(Number),
      ssh_key_id: null,
      device_name: "laptop",
      address: "127.0.0.1",
      tunnels: [{ kind: "http", name: "hooked", hostname: null, port: null, private: false }],
    });
  });

  test("refuses: the agent is told the hook's code and message", async () => {
    await hook.mode("refuse");
    const said = await refusal({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "hooked"] });
    expect(said).toContain("ADMISSION_REFUSED");
    expect(said).toContain("NOT_IN_HOURS: tunnels only between 8:00 and 20:00");
    expect((await api.get("/api/tunnels/active")).body).toEqual([]);
  });

  test("hangs past --admission-hook-timeout, or answers nonsense: refused, and the agent waits to try again", async () => {
    await hook.mode("hang");
    const started = performance.now();
    expect(await waitedOut()).toContain("ADMISSION_UNAVAILABLE");
    expect(performance.now() - started).toBeLessThan(10_000);
    await hook.mode("garbage");
    expect(await waitedOut()).toContain("ADMISSION_UNAVAILABLE");
    await server.output.waitFor(/admission hook failed: refused/, 5_000);
  });

  test("crashes in the middle of a request: refused (fail closed); the server itself goes on", async () => {
    await hook.mode("crash");
    expect(await waitedOut()).toContain("ADMISSION_UNAVAILABLE");
    expect(await hook.proc.exited).toBe(3);
    // and while it is gone
    expect(await waitedOut()).toContain("ADMISSION_UNAVAILABLE");
    expect((await api.get("/api/users")).status).toBe(200);
  });

  test("with --admission-hook-fail-open, a hook that is gone admits", async () => {
    await using open = await startServer({
      args: ["--admission-hook", hook.url, "--admission-hook-timeout", "1", "--admission-hook-fail-open", "on", "--webhook-allow-private", "on"],
      env: { BURROW_ADMISSION_HOOK_SECRET: SECRET },
    });
    const admin = await signedIn(open);
    const t = await admin.createToken(await admin.createUser("open"));
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: open.edgeUrl, token: t });
    expect(agent.publicUrl).not.toBe("");
    await open.output.waitFor(/admission hook failed: admitted \(--admission-hook-fail-open\)/, 5_000);
  });

  test("a loopback hook without --webhook-allow-private: the server does not start, as a webhook's URL is refused when given", async () => {
    const closed = await runBurrow(["server", "--admission-hook", "http://127.0.0.1:9/admit"], { env: { BURROW_ADMISSION_HOOK_SECRET: SECRET } });
    expect(closed.code).toBe(2);
    expect(closed.stderr).toContain("--admission-hook: 127.0.0.1 is not a public address: refused (--webhook-allow-private on allows it)");
  });

  test("without BURROW_ADMISSION_HOOK_SECRET, or with a bad one, the server does not start", async () => {
    const none = await runBurrow(["server", "--admission-hook", "https://hooks.example.com/admit"], { env: { BURROW_ADMISSION_HOOK_SECRET: "" } });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain("BURROW_ADMISSION_HOOK_SECRET");
    const bad = await runBurrow(["server", "--admission-hook", "https://hooks.example.com/admit"], { env: { BURROW_ADMISSION_HOOK_SECRET: "hunter2" } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).not.toContain("hunter2");
  });
});
