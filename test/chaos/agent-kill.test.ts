/**
 * Chaos: the agent dies or freezes under its tunnel.
 *
 * kill -9: the process gets no chance to say goodbye, but the kernel closes
 * its socket at once, so the edge learns within moments (keepalive, 25 s of
 * silence, is only the fallback for a connection that stays open). Promised:
 * visitors get the 502 page at once — the request in flight at the kill
 * included, long before --response-timeout — never a hang or a 404; the
 * name is held for the same token during the grace period (60 s), another
 * user's agent asking for it meanwhile is refused SUBDOMAIN_TAKEN, and a new
 * agent with the same token gets it back.
 *
 * SIGSTOP, then SIGCONT (the process frozen for a few seconds, its socket
 * open and silent, less than the 25 s that make it dead): every visitor
 * during the freeze gets the 502 page within --response-timeout (2 s here)
 * plus one sweep, never a hang; another user cannot take the name; after
 * SIGCONT the same agent carries on with the same session (no reconnect)
 * and the name serves again. A freeze past keepalive death is in
 * agent-freeze.test.ts.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent, tunnelFetch, type AgentStart, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { deferred, within } from "../harness/wait.ts";

const RESPONSE_TIMEOUT_S = 2;
/**
 * A frozen agent's visitor is answered by the response timeout: the edge looks at waiting
 * requests every 50 ms, and a loaded machine may add seconds. Far below keepalive's 25 s, the
 * other way such a visitor could be answered.
 */
const TIMEOUT_ANSWER_MS = RESPONSE_TIMEOUT_S * 1000 + 5_000;
/**
 * Liveness, not speed: every other visitor is answered within this, however loaded the machine
 * (measured: a few ms). Why it was answered, the socket closed and not a timeout, the page says.
 */
const ANSWERED_MS = 10_000;

let server: TestServer;
let api: AdminClient;
let owner: string;
let other: string;
const running: TestAgent[] = [];

/** Resolved each time a /slow request reaches the local service. */
let slowArrived = deferred();
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    if (new URL(req.url).pathname === "/slow") {
      slowArrived.resolve();
      await Bun.sleep(10_000); // a local service that takes its time: the agent dies meanwhile
      return new Response("late");
    }
    return new Response("here");
  },
});

beforeAll(async () => {
  server = await startServer({ args: ["--response-timeout", String(RESPONSE_TIMEOUT_S)] });
  api = await signedIn(server);
  owner = await api.createToken(await api.createUser("owner"));
  other = await api.createToken(await api.createUser("intruder"));
});

afterAll(async () => {
  for (const a of running) {
    a.proc.kill("SIGCONT"); // a frozen process cannot act on SIGINT
    await a.stop("SIGKILL");
  }
  await server?.stop();
  upstream.stop(true);
});

const http = (token: string, subdomain: string): AgentStart => ({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", subdomain] });

async function agent(token: string, subdomain: string): Promise<TestAgent> {
  const a = await startAgent(http(token, subdomain));
  running.push(a);
  return a;
}

/** One visitor request: its status, body and how long the answer took. Bounded: a hang fails the test. */
async function visit(name: string, path = "/", boundMs = ANSWERED_MS): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  const res = await within(tunnelFetch(server.edgePort, name, path), boundMs, `an answer from ${name}${path}`);
  const body = await within(res.text(), boundMs, `the body from ${name}${path}`);
  return { status: res.status, body, ms: performance.now() - t0 };
}

/** The live tunnels of that name, as the admin API lists them: who holds it and since when. */
async function listed(name: string): Promise<{ token_id: number; connected_at: string }[]> {
  const all = (await api.get("/api/tunnels/active")).body as { subdomain?: string; token_id: number; connected_at: string }[];
  return all.filter((t) => t.subdomain === name).map(({ token_id, connected_at }) => ({ token_id, connected_at }));
}

test("kill -9 of an agent: 502 at once (the request in flight too), the name held for its token, refused to another user, taken back by the same token", async () => {
  const victim = await agent(owner, "victim");
  expect((await visit("victim")).body).toBe("here");

  slowArrived = deferred();
  const inFlight = visit("victim", "/slow");
  await within(slowArrived.promise, 5_000, "the slow request to reach the local service");

  const killedAt = performance.now();
  victim.proc.kill("SIGKILL");
  await within(victim.proc.exited, 5_000, "the agent to die");

  // the visitor who was waiting gets the 502 page because the connection closed, not because of the timeout
  const waited = await inFlight;
  expect(waited.status).toBe(502);
  expect(waited.body).toContain("the tunnel&#39;s connection closed");
  expect(performance.now() - killedAt).toBeLessThan(ANSWERED_MS);

  // every visitor from then on: the 502 page, fast (the name is held, agentless: not a 404)
  for (let i = 0; i < 10; i++) {
    const v = await visit("victim", `/after-${i}`);
    expect(v.status).toBe(502);
    expect(v.body).toContain("its agent is reconnecting or busy");
    expect(v.ms).toBeLessThan(ANSWERED_MS);
  }
  expect(await listed("victim")).toEqual([]);

  // held for the token during the grace period: another user's agent is refused
  expect(await refusal(http(other, "victim"))).toMatch(/^burrow: refused by the server: SUBDOMAIN_TAKEN: /);
  expect((await visit("victim")).status).toBe(502);

  // the same token, in a new process, gets it back at once
  const back = await agent(owner, "victim");
  expect(back.subdomain).toBe("victim");
  expect((await visit("victim")).body).toBe("here");
  expect(await listed("victim")).toHaveLength(1);
});

test("SIGSTOP then SIGCONT of an agent: 502 within --response-timeout during the freeze, no hang, nobody else takes the name, and it serves again after", async () => {
  const frozen = await agent(owner, "frozen");
  expect((await visit("frozen")).body).toBe("here");
  const [before] = await listed("frozen");

  frozen.proc.kill("SIGSTOP");
  try {
    const frozeAt = performance.now();
    // visitors during the freeze: one at a time, then several at once; each answered within the bound
    const answers = [await visit("frozen", "/one"), ...(await Promise.all(Array.from({ length: 5 }, (_, i) => visit("frozen", `/many-${i}`))))];
    for (const a of answers) {
      expect(a.status).toBe(502);
      expect(a.body).toContain(`it did not answer within ${RESPONSE_TIMEOUT_S} s`);
      expect(a.ms).toBeGreaterThanOrEqual(RESPONSE_TIMEOUT_S * 1000 - 100);
      expect(a.ms).toBeLessThan(TIMEOUT_ANSWER_MS);
    }
    // the frozen session still holds the name: another user is refused
    expect(await refusal(http(other, "frozen"))).toMatch(/SUBDOMAIN_TAKEN/);
    // still inside keepalive's 25 s (the test's premise, not a speed): the edge has not given up on it
    expect(performance.now() - frozeAt).toBeLessThan(20_000);
    expect(await listed("frozen")).toHaveLength(1);
  } finally {
    frozen.proc.kill("SIGCONT");
  }

  // thawed: the same process, the same session, serving again (bounded: a few tries, a second in all)
  let after = await visit("frozen", "/thawed");
  for (let i = 0; i < 20 && after.status !== 200; i++) {
    await Bun.sleep(50); // between tries
    after = await visit("frozen", "/thawed");
  }
  expect(after).toMatchObject({ status: 200, body: "here" });
  expect(after.ms).toBeLessThan(ANSWERED_MS);
  expect(frozen.proc.exitCode).toBeNull();
  expect(frozen.output.text()).not.toContain("reconnecting");
  expect(frozen.output.lines.filter((l) => l.startsWith("Forwarding"))).toHaveLength(1);
  expect(await listed("frozen")).toEqual([before!]);
});
