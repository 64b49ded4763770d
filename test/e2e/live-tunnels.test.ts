/**
 * Tunnels added to and removed from a live connection (wire.ts ADD,
 * REMOVE): a long request in flight on tunnel A while tunnel B is added
 * completes, and B answers; B removed, A's requests still go on and B's
 * name is free at once; a tunnel the rules refuse refuses only itself. And
 * the version rules: an agent that does not say `live` (the version
 * before's) and a server that does not answer it change their tunnels by
 * connecting again, as before.
 *
 * The agent here is burrow-agent's connect() (sdk/src), in this process, as
 * a program uses it; the server is the real one.
 */
import { afterAll, expect, test } from "bun:test";
import { connect } from "../../sdk/src/index.ts";
import { Agent, type AgentOutput } from "../../src/agent/client.ts";
import { parseTarget } from "../../src/agent/settings/tunnel-options.ts";
import { tunnelOf } from "../../src/agent/settings/tunnel-spec.ts";
import { decodeFrames, encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType } from "../../src/protocol/wire.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { withServer } from "../harness/tunnel.ts";
import { slowRequestInFlight, slowService } from "../harness/slow-service.ts";
import { waitUntil, within } from "../harness/wait.ts";

const services: { stop(): void }[] = [];
afterAll(() => services.forEach((s) => s.stop()));

test("a long request on tunnel A goes on while tunnel B is added and removed on the same connection; B answers, then its name is free", async () => {
  await using rig = await withServer({ username: "live-sdk" });
  const a = slowService("A");
  const b = slowService("B");
  services.push(a, b);
  const session = connect({ server: rig.server.edgeUrl, token: rig.token });
  try {
    const ta = await within(session.forward({ port: a.port, subdomain: "live-a" }), 15_000, "tunnel A");
    const { rest: inFlight } = await slowRequestInFlight(rig.server.edgePort, "live-a", a);
    const tb = await within(session.forward({ port: b.port, subdomain: "live-b" }), 15_000, "tunnel B added");
    expect(tb.url).toContain("live-b");
    expect(await (await tunnelFetch(rig.server.edgePort, "live-b", "/")).text()).toBe("B here");
    a.release();
    expect(await within(inFlight, 10_000, "A's request")).toBe("second half");

    // B goes while another of A's requests is in flight: that one completes, B's name answers 404 and is free
    const { rest: again } = await slowRequestInFlight(rig.server.edgePort, "live-a", a);
    await within(tb.close(), 10_000, "B closed");
    expect((await tunnelFetch(rig.server.edgePort, "live-b", "/")).status).toBe(404);
    a.release();
    expect(await within(again, 10_000, "A's second request")).toBe("second half");
    expect(await (await tunnelFetch(rig.server.edgePort, "live-a", "/")).text()).toBe("A here");
    // one connection all along: the server saw one agent connect
    expect(rig.server.output.lines.filter((l) => l.includes("agent connected")).length).toBe(1);
    expect(ta.url).toContain("live-a");
  } finally {
    await session.close();
  }
});

test("a tunnel the rules refuse is refused alone with its code; the session and its other tunnel go on", async () => {
  await using rig = await withServer({ username: "live-refused", user: { max_tunnels: 2 } });
  const other = await rig.api.createUser("someone-else");
  expect((await rig.api.post("/api/domains", { subdomain: "theirs", user_id: other })).status).toBe(201);
  const a = slowService("A");
  services.push(a);
  const session = connect({ server: rig.server.edgeUrl, token: rig.token });
  try {
    await within(session.forward({ port: a.port, subdomain: "mine-a" }), 15_000, "tunnel A");
    const { rest: inFlight } = await slowRequestInFlight(rig.server.edgePort, "mine-a", a);
    const refused = await session.forward({ port: a.port, subdomain: "theirs" }).then(
      () => undefined,
      (err) => err,
    );
    expect(refused?.code).toBe("SUBDOMAIN_RESERVED");
    await within(session.forward({ port: a.port, subdomain: "mine-b" }), 15_000, "a second tunnel");
    const third = await session.forward({ port: a.port, subdomain: "mine-c" }).then(
      () => undefined,
      (err) => err,
    );
    expect(third?.code).toBe("TUNNEL_LIMIT");
    a.release();
    expect(await within(inFlight, 10_000, "A's request")).toBe("second half");
    expect(await (await tunnelFetch(rig.server.edgePort, "mine-a", "/")).text()).toBe("A here");
  } finally {
    await session.close();
  }
});

/** What an in-process agent was told. */
function recording() {
  const events: string[] = [];
  const out: AgentOutput = {
    ready: (r) => void events.push(`ready ${r.tunnels.map((t) => t.name).join(",")}`),
    request() {},
    connection() {},
    reconnecting: (why) => void events.push(`reconnecting ${why}`),
    refused: (code) => void events.push(`refused ${code}`),
    tunnelRefused: (name, code) => void events.push(`tunnel refused ${name} ${code}`),
    tunnelAdded: (t) => void events.push(`added ${t.name}`),
    tunnelRemoved: (name) => void events.push(`removed ${name}`),
  };
  return { events, out };
}

const httpTunnel = (name: string, port: number, subdomain: string) => ({ name, ...tunnelOf({ kind: "http", target: parseTarget(String(port), true), subdomain }) });

test("the version before: an agent that does not say `live` changes its tunnels by connecting again, and its requests in flight are cut, as before", async () => {
  await using rig = await withServer({ username: "old-agent" });
  const a = slowService("A");
  services.push(a);
  const { events, out } = recording();
  const agent = new Agent({ server: rig.server.edgeUrl, token: rig.token, tunnels: [httpTunnel("a", a.port, "old-a")], out, live: false });
  const run = agent.run();
  try {
    await waitUntil(() => events.includes("ready a"), 15_000, "READY");
    const { rest: inFlight } = await slowRequestInFlight(rig.server.edgePort, "old-a", a);
    const change = await within(agent.retune([httpTunnel("a", a.port, "old-a"), httpTunnel("b", a.port, "old-b")]), 15_000, "the change");
    expect(change.reconnected).toBe(true);
    expect(change.added.map((t) => t.name)).toEqual(["b"]);
    expect(events.filter((e) => e.startsWith("ready")).length).toBe(2);
    a.release();
    // the old connection went, and A's request with it
    expect(await within(inFlight, 10_000, "A's request")).toBe("cut");
    expect(await (await tunnelFetch(rig.server.edgePort, "old-b", "/")).text()).toBe("A here");
    expect(rig.server.output.lines.filter((l) => l.includes("agent connected")).length).toBe(2);
  } finally {
    agent.stop();
    await run;
  }
});

test("the version before: a server whose READY does not say `live` gets a new connection with the new list, and never an ADD", async () => {
  const seen: { type: number; body: any }[] = [];
  let hellos = 0;
  const older = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, server) => (server.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 400 })),
    websocket: {
      message(ws, message) {
        decodeFrames(new Uint8Array(message as Buffer), (f) => {
          const body = f.payload.byteLength > 0 && f.type !== FrameType.PING ? JSON.parse(new TextDecoder().decode(f.payload)) : undefined;
          seen.push({ type: f.type, body });
          if (f.type !== FrameType.HELLO) return;
          hellos++;
          // as the version before answers: no `live`, the unknown `live` of HELLO dropped
          const tunnels = body.tunnels.map((t: any, i: number) => ({ id: `t${hellos}-${i}`, protocol: "http", subdomain: t.subdomain, url: `http://${t.subdomain}.localhost`, index: i }));
          ws.send(encodeFrame(FrameType.READY, 0, jsonPayload({ session: `s${hellos}`, username: "old", tunnels })));
        });
      },
    },
  });
  const { events, out } = recording();
  const agent = new Agent({ server: `http://127.0.0.1:${older.port}`, token: "brw_test", tunnels: [httpTunnel("a", 1, "a")], out });
  const run = agent.run();
  try {
    await waitUntil(() => events.includes("ready a"), 15_000, "READY");
    expect(seen[0]?.body.live).toBe(true); // the agent says it could
    const change = await within(agent.retune([httpTunnel("a", 1, "a"), httpTunnel("b", 1, "b")]), 15_000, "the change");
    expect(change.reconnected).toBe(true);
    expect(change.added.map((t) => t.name)).toEqual(["b"]);
    expect(seen.some((f) => f.type === FrameType.ADD || f.type === FrameType.REMOVE)).toBe(false);
    expect(seen.some((f) => f.type === FrameType.GOAWAY)).toBe(true);
    expect(seen.filter((f) => f.type === FrameType.HELLO).at(-1)?.body.tunnels.map((t: any) => t.subdomain)).toEqual(["a", "b"]);
  } finally {
    agent.stop();
    await run;
    older.stop(true);
  }
});
