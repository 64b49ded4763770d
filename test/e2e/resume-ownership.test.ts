/**
 * A HELLO's `resume` names the session it takes over. Session ids appear in
 * log lines, so naming one proves nothing: only an agent with the same
 * token may replace a session; anyone else's `resume` is ignored and that
 * session goes on untouched.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { encodeFrame, jsonPayload, type Frame } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { agentWebSocketPeer } from "../harness/agent-peer.ts";
import { withTunnel, type Tunnel } from "../harness/tunnel.ts";

/** The victim's tunnel: its user, its agent, its local service. */
let victim: Tunnel;
let victimSession: string;
let otherToken: string;

beforeAll(async () => {
  victim = await withTunnel({ username: "victim", upstream: () => new Response("victim's service"), args: ["--subdomain", "victim"] });
  otherToken = await victim.api.createToken(await victim.api.createUser("intruder"));
  const line = await victim.server.output.waitFor(/agent connected session=\S+ user=victim/);
  victimSession = /session=(\S+)/.exec(line)![1]!;
});
afterAll(() => victim?.close());

const helloFrom = (token: string, tunnels: unknown[], resume: string) =>
  encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels, resume }));
const decoded = (frames: Frame[], type: number) => {
  const f = frames.find((x) => x.type === type);
  return f && JSON.parse(new TextDecoder().decode(f.payload));
};

async function victimUntouched() {
  expect(await (await victim.fetch("/")).text()).toBe("victim's service");
  const active = (await victim.api.get("/api/tunnels/active")).body as { subdomain?: string; username: string }[];
  expect(active.filter((t) => t.subdomain === "victim")).toHaveLength(1);
  expect(victim.server.output.text()).not.toContain(`session=${victimSession} code=SESSION_REPLACED`);
  expect(victim.server.output.text()).not.toMatch(/SESSION_REPLACED/);
  expect(victim.agent.output.text()).not.toMatch(/reconnecting|refused|lost the connection/);
}

test("another user's agent that names a live session in resume gets its own tunnel and the session stays", async () => {
  const { frames } = await agentWebSocketPeer(victim.server.edgePort, [helloFrom(otherToken, [{ protocol: "http" }], victimSession)], 1_500);
  const ready = decoded(frames, FrameType.READY);
  expect(ready?.username).toBe("intruder");
  expect(ready.session).not.toBe(victimSession);
  await victimUntouched();
});

test("another user's agent that names the session and asks for its subdomain is refused SUBDOMAIN_TAKEN", async () => {
  const { frames } = await agentWebSocketPeer(victim.server.edgePort, [helloFrom(otherToken, [{ protocol: "http", subdomain: "victim" }], victimSession)], 3_000);
  expect(decoded(frames, FrameType.ERROR)?.code).toBe("SUBDOMAIN_TAKEN");
  expect(decoded(frames, FrameType.READY)).toBeUndefined();
  await victimUntouched();
});
