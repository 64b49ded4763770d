/**
 * Chaos: an agent frozen (SIGSTOP) for longer than keepalive allows, its
 * socket open and silent: a half-dead peer that no socket error reveals.
 *
 * Promised: the edge declares it dead after DEAD_AFTER_MS (25 s) of silence,
 * found by the mux's keepalive within a second of that, so within about 26 s; until then every visitor
 * gets the 502 page within --response-timeout (2 s here), and after it at
 * once; never a hang. The name stays held for the token (grace): another
 * user's agent asking for it is refused SUBDOMAIN_TAKEN. After SIGCONT the
 * agent finds its connection closed, reconnects by itself and gets the same
 * name back, and it serves again.
 *
 * Takes about 30 s: the 25 s of silence are the point. The short freeze,
 * where the agent resumes its session, is in agent-kill.test.ts.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { DEAD_AFTER_MS } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { spawnAgent, startAgent, tunnelFetch, type AgentStart, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { within } from "../harness/wait.ts";

const RESPONSE_TIMEOUT_S = 2;
/** The keepalive looks at every connection once a second (protocol/keepalive.ts), plus a generous margin for a loaded machine. */
const DEAD_FOUND_MS = DEAD_AFTER_MS + 1_000 + 14_000;
/** A visitor of the frozen agent is answered by the response timeout: a loaded machine may add seconds, far below keepalive's 25 s. */
const TIMEOUT_ANSWER_MS = RESPONSE_TIMEOUT_S * 1000 + 5_000;
/** Liveness, not speed: once the agent is known dead a visitor is answered within this (measured: a few ms; the page says why). */
const ANSWERED_MS = 10_000;

let server: TestServer;
let owner: string;
let other: string;
let sleeper: TestAgent | undefined;

const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("here") });

beforeAll(async () => {
  server = await startServer({ args: ["--response-timeout", String(RESPONSE_TIMEOUT_S)] });
  const api = await signedIn(server);
  owner = await api.createToken(await api.createUser("sleepy"));
  other = await api.createToken(await api.createUser("intruder"));
});

afterAll(async () => {
  sleeper?.proc.kill("SIGCONT");
  await sleeper?.stop("SIGKILL");
  await server?.stop();
  upstream.stop(true);
});

const http = (token: string): AgentStart => ({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "sleeper"] });

async function visit(path: string): Promise<{ status: number; body: string; ms: number }> {
  const t0 = performance.now();
  const res = await within(tunnelFetch(server.edgePort, "sleeper", path), ANSWERED_MS, `an answer for ${path}`);
  const body = await within(res.text(), ANSWERED_MS, `the body for ${path}`);
  return { status: res.status, body, ms: performance.now() - t0 };
}

test(
  "an agent frozen past keepalive: 502s within the response timeout, then dead within ~30 s, the name held, and back by itself after SIGCONT",
  async () => {
    sleeper = await startAgent(http(owner));
    expect((await visit("/")).body).toBe("here");

    sleeper.proc.kill("SIGSTOP");
    const frozeAt = performance.now();
    let deadAt: number | undefined;
    try {
      void server.output.waitFor(/agent silent too long, closing/, DEAD_FOUND_MS + 1_000).then(
        () => (deadAt = performance.now()),
        () => {},
      );
      // visitors all through the freeze, one after the other (bounded in count and time)
      const answers: { status: number; body: string; ms: number; at: number }[] = [];
      for (let i = 0; i < 200 && deadAt === undefined && performance.now() - frozeAt < DEAD_FOUND_MS; i++) {
        answers.push({ ...(await visit(`/frozen-${i}`)), at: performance.now() - frozeAt });
      }
      expect(deadAt).toBeDefined();
      const deadAfter = deadAt! - frozeAt;
      expect(deadAfter).toBeGreaterThanOrEqual(DEAD_AFTER_MS - 500);
      expect(deadAfter).toBeLessThan(DEAD_FOUND_MS);

      // before the edge gave up: each visitor waited out the response timeout, no longer
      expect(answers.length).toBeGreaterThanOrEqual(10);
      for (const a of answers) {
        expect(a.status).toBe(502);
        expect(a.ms).toBeLessThan(TIMEOUT_ANSWER_MS);
      }
      // after: at once, the agent is known gone (the page says so, not that it waited out the response timeout)
      for (let i = 0; i < 5; i++) {
        const a = await visit(`/dead-${i}`);
        expect(a.status).toBe(502);
        expect(a.body).toContain("its agent is reconnecting or busy");
        expect(a.ms).toBeLessThan(ANSWERED_MS);
      }
      // held for its token in grace: another user's agent is refused
      const { proc, output, home } = spawnAgent(http(other));
      try {
        expect(await within(proc.exited, 10_000, "the other user's agent to be refused")).toBe(1);
        await output.closed();
        expect(output.text()).toMatch(/burrow: refused by the server: SUBDOMAIN_TAKEN: /);
      } finally {
        proc.kill("SIGKILL");
        rmSync(home, { recursive: true, force: true });
      }
    } finally {
      sleeper.proc.kill("SIGCONT");
    }

    // thawed: it learns its connection is gone, reconnects and takes its name back
    await sleeper.output.waitFor(/reconnecting in/, 5_000);
    const forwarding = () => sleeper!.output.lines.filter((l) => l.startsWith("Forwarding"));
    await within(
      (async () => {
        while (forwarding().length < 2) await Bun.sleep(20);
      })(),
      10_000,
      "the agent's second Forwarding line",
    );
    expect(forwarding()[1]).toBe(forwarding()[0]!);
    expect((await visit("/thawed")).body).toBe("here");
    expect(sleeper.proc.exitCode).toBeNull();
  },
  DEAD_FOUND_MS + 20_000,
);
