/**
 * A restart users do not notice: SIGTERM to the server, a new server on the
 * same data dir and ports as the first lets go of them. Agents are told to
 * connect again at once (DRAIN) and come back on the new server with the
 * same name, while the old one finishes the requests in flight.
 */
import { expect, test } from "bun:test";
import { rmSync } from "node:fs";
import { encodeFrame, jsonPayload, type Frame } from "../../src/protocol/frames.ts";
import { FRAME_NAMES, FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { agentWebSocketPeer, refusalIn } from "../harness/agent-peer.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startServer } from "../harness/server.ts";
import { startUdpEcho, udpClient } from "../harness/udp.ts";
import { within } from "../harness/wait.ts";

/** Resolved when a request reaches the local service. */
let arrived = Promise.withResolvers<void>();
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    arrived.resolve();
    const ms = Number(new URL(req.url).searchParams.get("ms") ?? 0);
    await Bun.sleep(ms);
    return new Response(`slept ${ms}`);
  },
});

/** Liveness, not speed (bench/restart.ts measures how soon: tens of ms): the agent says Forwarding again, on the new server. */
async function secondForwarding(agent: TestAgent): Promise<void> {
  await within(
    (async () => {
      while (!/Forwarding[^\n]*\n[\s\S]*Forwarding/.test(agent.output.text())) await Bun.sleep(20);
    })(),
    15_000,
    "the agent's second Forwarding line",
  );
}

test("the agent moves to the new server by itself, without a backoff, and the request in flight on the old one completes", async () => {
  const first = await startServer({ keepDataDir: true });
  const adminPort = new URL(first.adminUrl).port;
  const api = await signedIn(first);
  const token = await api.createToken(await api.createUser("restarter"));
  const agent = await startAgent({ kind: "http", target: upstream.port!, server: first.edgeUrl, token, args: ["--subdomain", "steady"] });
  let second: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    arrived = Promise.withResolvers();
    const inFlight = tunnelFetch(first.edgePort, "steady", "/?ms=1500");
    await within(arrived.promise, 10_000, "the request to reach the local service"); // which takes 1.5 s
    first.proc.kill("SIGTERM");
    await first.output.waitFor(/told agents to connect again agents=1/, 5_000);
    await agent.output.waitFor(/the server is restarting/, 5_000);
    // the successor takes the same ports and data while the first still drains
    second = await startServer({
      dataDir: first.dataDir,
      args: ["--http-port", String(first.edgePort), "--agent-port", String(first.agentPort), "--admin-port", adminPort],
    });
    await secondForwarding(agent); // no backoff is checked below
    const res = await within(inFlight, 5_000, "the request in flight on the old server");
    expect(await res.text()).toBe("slept 1500");
    expect(await within(first.stop(), 10_000, "the old server to exit")).toBe(0);
    const after = await tunnelFetch(second.edgePort, "steady", "/?ms=0");
    expect(await after.text()).toBe("slept 0");
    // no backoff: the agent never waited out a "reconnecting in" delay
    expect(agent.output.text()).not.toContain("reconnecting in");
    expect(agent.output.text().match(/Forwarding\s+(\S+)/g)?.map((l) => l.split(/\s+/)[1])).toEqual([
      `http://steady.localhost:${first.edgePort}`,
      `http://steady.localhost:${first.edgePort}`,
    ]);
  } finally {
    await agent.stop();
    await first.stop();
    await second?.stop();
    rmSync(first.dataDir, { recursive: true, force: true });
  }
}, 40_000);

test("an agent whose HELLO does not say it understands DRAIN is never sent one: it hears SERVER_SHUTDOWN as before", async () => {
  const server = await startServer();
  try {
    const api = await signedIn(server);
    const token = await api.createToken(await api.createUser("oldagent"));
    const hello = (drain: boolean) =>
      encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }], ...(drain ? { drain } : {}) }));
    const old = agentWebSocketPeer(server.edgePort, [hello(false)], 10_000);
    const current = agentWebSocketPeer(server.edgePort, [hello(true)], 10_000);
    await within(
      (async () => {
        while ((server.output.text().match(/agent connected/g) ?? []).length < 2) await Bun.sleep(20);
      })(),
      5_000,
      "both agents to be connected",
    );
    server.proc.kill("SIGTERM");
    const [a, b] = await Promise.all([old, current]);
    const types = (frames: Frame[]) => frames.map((f) => FRAME_NAMES[f.type]);
    expect(types(a.frames)).toEqual(["READY", "ERROR"]);
    expect(JSON.parse(new TextDecoder().decode(a.frames[1]!.payload)).code).toBe("SERVER_SHUTDOWN");
    expect(types(b.frames)).toEqual(["READY", "DRAIN", "ERROR"]);
  } finally {
    await server.stop();
  }
}, 30_000);

test("names live at a clean stop are held for their tokens by the next server on the same data dir", async () => {
  const first = await startServer({ keepDataDir: true });
  let second: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const api = await signedIn(first);
    const owner = await api.createToken(await api.createUser("holder"));
    const other = await api.createToken(await api.createUser("grabber"));
    const hello = (token: string) =>
      encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http", subdomain: "kept" }], drain: true }));
    // an agent that hears DRAIN and never comes back on its own
    const gone = agentWebSocketPeer(first.edgePort, [hello(owner)], 10_000);
    await first.output.waitFor(/agent connected .*user=holder/, 5_000);
    expect(await within(first.stop(), 10_000, "the first server to stop")).toBe(0);
    await gone;
    second = await startServer({ dataDir: first.dataDir });
    await second.output.waitFor(/holding names for the agents of the server before names=1/, 5_000);
    // nobody else gets the name meanwhile
    const grab = await agentWebSocketPeer(second.edgePort, [hello(other)], 3_000);
    expect(refusalIn(grab.frames)?.code).toBe("SUBDOMAIN_TAKEN");
    // a visitor waits a moment for the agent, then hears it is away (502), not that there is no tunnel
    const res = await tunnelFetch(second.edgePort, "kept", "/");
    expect(res.status).toBe(502);
    // its own token takes it back
    const back = await agentWebSocketPeer(second.edgePort, [hello(owner)], 1_500);
    expect(back.frames.map((f) => FRAME_NAMES[f.type])).toEqual(["READY"]);
  } finally {
    await first.stop();
    await second?.stop();
    rmSync(first.dataDir, { recursive: true, force: true });
  }
}, 30_000);

test("a custom hostname alone, and a pool's members, are held too: each token takes its tunnel back, the pool as a pool", async () => {
  const first = await startServer({ keepDataDir: true });
  let second: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const api = await signedIn(first);
    const user = await api.createUser("team-held");
    expect((await api.post("/api/hostnames", { hostname: "held.example.test", user_id: user, verified: true })).status).toBe(201);
    const [one, two] = [await api.createToken(user, "one"), await api.createToken(user, "two")];
    const other = await api.createToken(await api.createUser("grabber-2"));
    const hello = (token: string, tunnels: unknown[]) => encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels, drain: true }));
    const byHostname = [{ protocol: "http", hostname: "held.example.test" }];
    const pooled = [{ protocol: "http", subdomain: "heldpool", pool: true }];
    const gone = [agentWebSocketPeer(first.edgePort, [hello(one, byHostname)], 10_000), agentWebSocketPeer(first.edgePort, [hello(one, pooled)], 10_000), agentWebSocketPeer(first.edgePort, [hello(two, pooled)], 10_000)];
    await first.output.waitFor(/agent connected .*token=1 .*held\.example\.test/, 5_000);
    await first.output.waitFor(/agent connected .*token=1 .*heldpool/, 5_000);
    await first.output.waitFor(/agent connected .*token=2 .*heldpool/, 5_000);
    expect(await within(first.stop(), 10_000, "the first server to stop")).toBe(0);
    await Promise.all(gone);
    second = await startServer({ dataDir: first.dataDir });
    await second.output.waitFor(/holding names for the agents of the server before names=2/, 5_000);
    // another user gets neither name meanwhile
    expect(refusalIn((await agentWebSocketPeer(second.edgePort, [hello(other, pooled)], 3_000)).frames)?.code).toBe("SUBDOMAIN_TAKEN");
    // the hostname's token takes it back, as a tunnel with that name only
    const hostnameBack = await agentWebSocketPeer(second.edgePort, [hello(one, byHostname)], 1_500);
    expect(hostnameBack.frames.map((f) => FRAME_NAMES[f.type])).toEqual(["READY"]);
    expect(JSON.parse(new TextDecoder().decode(hostnameBack.frames[0]!.payload)).tunnels).toEqual([expect.objectContaining({ hostname: "held.example.test" })]);
    // both members of the pool come back, each with its own token, as members
    for (const token of [one, two]) {
      const back = await agentWebSocketPeer(second.edgePort, [hello(token, pooled)], 1_500);
      expect(back.frames.map((f) => FRAME_NAMES[f.type])).toEqual(["READY"]);
      expect(JSON.parse(new TextDecoder().decode(back.frames[0]!.payload)).tunnels).toEqual([expect.objectContaining({ subdomain: "heldpool", pool: true })]);
    }
  } finally {
    await first.stop();
    await second?.stop();
    rmSync(first.dataDir, { recursive: true, force: true });
  }
}, 30_000);

test("a tls tunnel's name is held as a tls tunnel's: its token takes it back, and plain HTTP to it gets the 421 page", async () => {
  const first = await startServer({ keepDataDir: true, args: ["--tls-port", "0"] });
  let second: Awaited<ReturnType<typeof startServer>> | undefined;
  try {
    const api = await signedIn(first);
    const owner = await api.createToken(await api.createUser("sealer", { allowed_protocols: "http,tls" }));
    const hello = encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token: owner, tunnels: [{ protocol: "tls", subdomain: "sealed" }], drain: true }));
    const gone = agentWebSocketPeer(first.edgePort, [hello], 10_000);
    await first.output.waitFor(/agent connected .*user=sealer/, 5_000);
    expect(await within(first.stop(), 10_000, "the first server to stop")).toBe(0);
    await gone;
    second = await startServer({ dataDir: first.dataDir, args: ["--tls-port", "0"] });
    await second.output.waitFor(/holding names for the agents of the server before names=1/, 5_000);
    // held as what it was: plain HTTP to it is told it is a tls tunnel, not that its agent is away
    expect((await tunnelFetch(second.edgePort, "sealed", "/")).status).toBe(421);
    const back = await agentWebSocketPeer(second.edgePort, [hello], 1_500);
    expect(back.frames.map((f) => FRAME_NAMES[f.type])).toEqual(["READY"]);
    const ready = JSON.parse(new TextDecoder().decode(back.frames[0]!.payload));
    expect(ready.tunnels).toEqual([expect.objectContaining({ protocol: "tls", subdomain: "sealed" })]);
  } finally {
    await first.stop();
    await second?.stop();
    rmSync(first.dataDir, { recursive: true, force: true });
  }
}, 30_000);

test("a udp tunnel keeps its port across a restart: the old server lets go of it as it drains, the agent takes it again on the new one", async () => {
  const first = await startServer({ keepDataDir: true });
  const adminPort = new URL(first.adminUrl).port;
  const api = await signedIn(first);
  const token = await api.createToken(await api.createUser("udp-restarter", { allowed_protocols: "udp" }));
  const echo = await startUdpEcho();
  const agent = await startAgent({ kind: "udp", target: echo.port, server: first.edgeUrl, token });
  let second: Awaited<ReturnType<typeof startServer>> | undefined;
  const client = await udpClient(agent.port!);
  try {
    client.send("before");
    await client.waitFor(1);
    first.proc.kill("SIGTERM");
    await agent.output.waitFor(/the server is restarting/, 5_000);
    second = await startServer({
      dataDir: first.dataDir,
      args: ["--http-port", String(first.edgePort), "--agent-port", String(first.agentPort), "--admin-port", adminPort],
    });
    await secondForwarding(agent);
    expect(agent.output.text().match(/Forwarding\s+(\S+)/g)?.map((l) => l.split(/\s+/)[1])).toEqual([`udp://localhost:${agent.port}`, `udp://localhost:${agent.port}`]);
    // the same visitor socket, the same port: answered through the new server
    for (let i = 0; i < 5 && client.got.length < 2; i++) {
      client.send("after");
      await client.waitFor(2, 1_000).catch(() => {});
    }
    expect(client.got.map(String)).toEqual(["before", "after"]);
  } finally {
    client.close();
    echo.close();
    await agent.stop();
    await first.stop();
    await second?.stop();
    rmSync(first.dataDir, { recursive: true, force: true });
  }
}, 40_000);
