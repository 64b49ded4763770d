/**
 * The server's list of its agents (GET /api/agents) and its asks to one of
 * them (POST /api/agents/:id/restart, /update), against real agents: each
 * connection listed with what it said of itself (version, OS, architecture,
 * start), its tunnels by its own names, the config it runs and its last
 * error; an ask answered by the agent's own flags (--remote-restart on by
 * default, --remote-update off), a refusal said in the API's answer, an
 * accepted restart reconnecting with its names; an agent of the version
 * before (no `live` in its HELLO) listed, and refused any ask.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as v from "valibot";
import { AgentJson, AskAcceptedJson, EntryList } from "../../src/api/responses.ts";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { rawConnection } from "../harness/raw-agent.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

const WAIT_MS = 15_000;

let server: TestServer;
let api: AdminClient;
let userId: number;
const dir = mkdtempSync(join(tmpdir(), "burrow-agents-api-"));
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("web") });
const running: Subprocess[] = [];
const agents: TestAgent[] = [];

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  userId = await api.createUser("fleet-admin-view");
  const other = await api.createUser("someone");
  await api.post("/api/domains", { subdomain: "not-yours", user_id: other });
});
afterAll(async () => {
  for (const a of agents) await a.stop();
  for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
  await server?.stop();
  web.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

const token = async (name: string) => (await api.post(`/api/users/${userId}/tokens`, { device_name: name })).body as { token: string; token_id: number };
const listed = async () => (await api.get("/api/agents")).body as any[];
const ofToken = async (id: number) => (await listed()).find((a) => a.token_id === id);

test("each connected agent is listed with what it said of itself, its tunnels by its own names, the config it runs and its last error", async () => {
  const t = await token("yml-box");
  writeFileSync(
    join(dir, "burrow.yml"),
    `server: ${server.edgeUrl}\ntoken: ${t.token}\ntunnels:\n  site:\n    proto: http\n    addr: ${web.port}\n    subdomain: listed-site\n  refused:\n    proto: http\n    addr: ${web.port}\n    subdomain: not-yours\n`,
  );
  const proc = Bun.spawn([...burrowCommand(), "start", "--all", "--log", "text", "--no-inspect"], { cwd: dir, env: { ...process.env, XDG_CONFIG_HOME: join(dir, ".xdg"), BURROW_SERVER: undefined, BURROW_TOKEN: undefined }, stdout: "pipe", stderr: "pipe" });
  running.push(proc);
  const out = new LineReader(proc);
  await out.waitFor(/Forwarding\s+site/, WAIT_MS);
  await waitUntil(async () => (await ofToken(t.token_id))?.last_error !== null && (await ofToken(t.token_id))?.last_error !== undefined, WAIT_MS, "the agent's STATUS");
  const a = await ofToken(t.token_id);
  expect(a).toMatchObject({
    node: null,
    user_id: userId,
    username: "fleet-admin-view",
    agent: expect.stringMatching(/^burrow\//),
    os: process.platform,
    arch: process.arch,
    transport: expect.stringMatching(/^(direct|websocket)$/),
    connects: null,
    config: { remote: false, version: null, error: null },
    manage: { restart: true, update: false },
  });
  expect(a.id).toMatch(/^[0-9a-f-]{36}$/);
  expect(Date.parse(a.started_at)).toBeLessThanOrEqual(Date.parse(a.connected_at));
  expect(a.remote).toMatch(/^127\.0\.0\.1:\d+$/);
  expect(a.tunnels).toEqual([{ id: expect.any(String), name: "site", protocol: "http", url: expect.stringContaining("listed-site."), source: "local" }]);
  expect(a.last_error.message).toContain("tunnel 'refused' refused: SUBDOMAIN_RESERVED");
  // the answer the OpenAPI document describes
  const shaped = v.safeParse(EntryList(AgentJson), await listed());
  expect(shaped.success ? [] : shaped.issues.map((i) => `${v.getDotPath(i)} ${i.message}`)).toEqual([]);
  proc.kill("SIGINT");
  await proc.exited;
  await waitUntil(async () => (await ofToken(t.token_id)) === undefined, WAIT_MS, "the agent to leave the list");
});

describe("the server's asks, answered by the agent's own flags", () => {
  test("restart (on by default): 200 with its words; it connects again, a new id, the same names", async () => {
    const t = await token("restartable");
    const agent = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token: t.token, args: ["--subdomain", "restartable", "--log", "text", "--no-inspect"] });
    agents.push(agent);
    await waitUntil(async () => (await ofToken(t.token_id))?.manage !== undefined, WAIT_MS, "the agent listed");
    const before = (await ofToken(t.token_id)).id;
    const res = await api.post(`/api/agents/${before}/restart`);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ status: "accepted", message: "connecting again" });
    expect(v.safeParse(AskAcceptedJson, res.body).success).toBe(true);
    await agent.output.waitFor(/asked this agent to connect again/, WAIT_MS);
    await waitUntil(async () => ((await ofToken(t.token_id))?.id ?? before) !== before, WAIT_MS, "a new session");
    expect((await ofToken(t.token_id)).tunnels[0].url).toContain("restartable.");
    await waitUntil(async () => (await tunnelFetch(server.edgePort, "restartable", "/")).status === 200, WAIT_MS, "the tunnel back");
    expect(agent.proc.exitCode).toBeNull();
    // the old id is gone
    expect((await api.post(`/api/agents/${before}/restart`)).status).toBe(404);
  });

  test("an agent whose flags say no: 409 AGENT_REFUSED with its answer, and nothing done", async () => {
    const t = await token("stubborn");
    const agent = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token: t.token, args: ["--remote-restart", "off", "--log", "text", "--no-inspect"] });
    agents.push(agent);
    await waitUntil(async () => (await ofToken(t.token_id)) !== undefined, WAIT_MS, "the agent listed");
    const a = await ofToken(t.token_id);
    expect(a.manage).toEqual({ restart: false, update: false });
    const restart = await api.post(`/api/agents/${a.id}/restart`);
    expect(restart.status).toBe(409);
    expect(restart.body).toEqual({ error: "the agent refused: this agent's --remote-restart is off" });
    const update = await api.post(`/api/agents/${a.id}/update`);
    expect(update.status).toBe(409);
    expect(update.body.error).toContain("--remote-update is off");
    expect((await ofToken(t.token_id)).id).toBe(a.id);
  });

  test("update with --remote-update on: 200, and the agent runs burrow update (here from source, which it refuses: said as the agent's last error)", async () => {
    const t = await token("updatable");
    const agent = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token: t.token, args: ["--remote-update", "on", "--log", "text", "--no-inspect"] });
    agents.push(agent);
    await waitUntil(async () => (await ofToken(t.token_id)) !== undefined, WAIT_MS, "the agent listed");
    const a = await ofToken(t.token_id);
    const res = await api.post(`/api/agents/${a.id}/update`);
    expect(res.status).toBe(200);
    expect(res.body.message).toBe("running burrow update");
    await agent.output.waitFor(/burrow update: /, 60_000);
    await waitUntil(async () => String((await ofToken(t.token_id))?.last_error?.message ?? "").includes("burrow update failed"), WAIT_MS, "the update's failure in the list");
  });

  test("an agent whose connection ends before it answers: 504 AGENT_NO_ANSWER saying so, not a refusal", async () => {
    const t = await token("gone-mid-ask");
    const conn = await rawConnection({ port: server.edgePort, via: "websocket" });
    try {
      conn.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token: t.token, tunnels: [{ protocol: "http" }], agent: "burrow/9.9.9", live: true, manage: { restart: true, update: false } })));
      await conn.until(() => conn.frames.some((f) => f.type === FrameType.READY), WAIT_MS);
      const a = await ofToken(t.token_id);
      const asked = api.post(`/api/agents/${a.id}/restart`);
      // the ASK came; the agent goes without a word
      await conn.until(() => conn.frames.some((f) => f.type === FrameType.ASK), WAIT_MS);
      conn.close();
      const res = await asked;
      expect(res.status).toBe(504);
      expect(res.body).toEqual({ error: "the agent's connection ended before it answered" });
    } finally {
      conn.close();
    }
  });

  test("an agent of the version before (no `live`) is listed, and refused any ask in the API's answer; an unknown id is 404", async () => {
    const t = await token("old-timer");
    const conn = await rawConnection({ port: server.edgePort, via: "websocket" });
    try {
      conn.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token: t.token, tunnels: [{ protocol: "http" }], agent: "burrow/0.0.9" })));
      await conn.until(() => conn.frames.some((f) => f.type === FrameType.READY), WAIT_MS);
      const a = await ofToken(t.token_id);
      expect(a).toMatchObject({ agent: "burrow/0.0.9", os: null, manage: null });
      const res = await api.post(`/api/agents/${a.id}/restart`);
      expect(res.status).toBe(409);
      expect(res.body.error).toContain("older than them");
      // never sent a frame it does not know
      expect(conn.frames.some((f) => f.type === FrameType.ASK)).toBe(false);
      expect(conn.closed).toBe(false);
    } finally {
      conn.close();
    }
    expect((await api.post("/api/agents/00000000-0000-0000-0000-000000000000/restart")).status).toBe(404);
    expect((await api.post("/api/agents/not-an-id/update")).status).toBe(404);
  });
});
