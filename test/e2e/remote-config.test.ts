/**
 * A device's tunnels kept on the server (its remote config): set through
 * the admin API and the portal's, checked by burrow.yml's own reader (a
 * mistake names the field), and run by `burrow start --remote`, which
 * follows each change live: a changed config is served within 5 s, a
 * removed tunnel goes, the others keep their requests in flight, all over
 * the one connection. A file beside it (--config) runs with it, the
 * server's tunnel winning a name both have; a tunnel the admin's rules no
 * longer allow goes alone, and the agent waits for the next config. A
 * server older than remote configs: the agent says so and exits 1.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import * as v from "valibot";
import { TokenConfigJson } from "../../src/api/responses.ts";
import { decodeFrames, encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType } from "../../src/protocol/wire.ts";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { portalAs } from "../harness/portal.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { slowRequestInFlight, slowService } from "../harness/slow-service.ts";
import { waitUntil, within } from "../harness/wait.ts";

/** What is promised: a change of the config is served within this. */
const LIVE_EFFECT_MS = 5_000;
/** Liveness only. */
const WAIT_MS = 15_000;

let server: TestServer;
let api: AdminClient;
let userId: number;
const dir = mkdtempSync(join(tmpdir(), "burrow-remote-config-"));
const a = slowService("A");
const b = slowService("B");
const running: Subprocess[] = [];

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  userId = await api.createUser("fleet-owner", { allowed_protocols: "http,tcp" });
});
afterAll(async () => {
  for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
  await server?.stop();
  a.stop();
  b.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** A new device: its token's secret and id. */
async function device(name: string): Promise<{ token: string; id: number }> {
  const res = await api.post(`/api/users/${userId}/tokens`, { device_name: name });
  return { token: res.body.token, id: res.body.token_id };
}

const http = (port: number, subdomain: string) => ({ proto: "http", addr: port, subdomain });

/** `burrow start --remote` with this token (and more flags), its output in text lines. */
function startRemote(token: string, args: string[] = [], serverUrl = server.edgeUrl) {
  const proc = Bun.spawn([...burrowCommand(), "start", "--remote", "--server", serverUrl, "--token", token, "--log", "text", "--no-inspect", ...args], {
    cwd: dir,
    env: { ...process.env, XDG_CONFIG_HOME: join(dir, ".xdg"), BURROW_SERVER: undefined, BURROW_TOKEN: undefined, BURROW_CONFIG: undefined, HTTPS_PROXY: "", ALL_PROXY: "" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  running.push(proc);
  return { proc, output: new LineReader(proc), stop: () => (proc.kill("SIGINT"), proc.exited) };
}

const answers = async (name: string, body: string) => (await (await tunnelFetch(server.edgePort, name, "/", { headers: { connection: "close" } })).text()) === body;

describe("the admin API", () => {
  test("GET before any is set: an empty map, version 0; PUT keeps it with the next version; a token that is not: 404", async () => {
    const d = await device("api-laptop");
    expect((await api.get(`/api/tokens/${d.id}/config`)).body).toEqual({ token_id: d.id, tunnels: {}, version: 0, updated_at: null });
    const put = await api.put(`/api/tokens/${d.id}/config`, { tunnels: { web: http(3000, "api-web") } });
    expect(put.status).toBe(200);
    expect(put.body).toMatchObject({ token_id: d.id, version: 1, tunnels: { web: { proto: "http", addr: 3000, subdomain: "api-web" } } });
    // the answer the OpenAPI document describes
    expect(v.safeParse(TokenConfigJson, put.body).success).toBe(true);
    expect(v.safeParse(TokenConfigJson, (await api.get(`/api/tokens/${d.id}/config`)).body).success).toBe(true);
    expect((await api.put(`/api/tokens/${d.id}/config`, { tunnels: {} })).body.version).toBe(2);
    expect((await api.get(`/api/tokens/99999/config`)).status).toBe(404);
    expect((await api.put(`/api/tokens/99999/config`, { tunnels: {} })).status).toBe(404);
  });

  test("a config burrow.yml's reader refuses is refused with the field's path, and the one kept stays", async () => {
    const d = await device("api-mistakes");
    await api.put(`/api/tokens/${d.id}/config`, { tunnels: { web: http(3000, "kept") } });
    const cases: [unknown, string][] = [
      [{ tunnels: { web: { proto: "gopher", addr: 1 } } }, "tunnels.web.proto:"],
      [{ tunnels: { web: { proto: "http", addr: 1, subdomian: "x" } } }, "tunnels.web.subdomian: unknown key"],
      [{ tunnels: { web: { proto: "http", addr: "no port" } } }, "tunnels.web.addr:"],
      [{ tunnels: { web: { proto: "tcp", addr: 22, subdomain: "x" } } }, "tunnels.web.subdomain:"],
      [{ tunnels: { web: { proto: "http", addr: 1, basic_auth: "u:p", oidc: { issuer: "https://id.example.com", client_id: "c", client_secret: "s" } } } }, "tunnels.web"],
      [{ tunnels: { web: { proto: "http", addr: 1, policy: "./policy.yml" } } }, "tunnels.web.policy: must be a policy"],
      [{ tunnels: { "bad name!": { proto: "http", addr: 1 } } }, "tunnels.bad name!:"],
      [{ tunnels: { web: { proto: "http" } } }, "tunnels.web.addr"],
      [{ tunnels: "web" }, "tunnels"],
    ];
    for (const [body, start] of cases) {
      const res = await api.put(`/api/tokens/${d.id}/config`, body);
      expect(res.status).toBe(400);
      expect(Object.keys(res.body)).toEqual(["error"]);
      expect(res.body.error).toStartWith(start);
    }
    const kept = (await api.get(`/api/tokens/${d.id}/config`)).body;
    expect(kept.version).toBe(1);
    expect(kept.tunnels.web.subdomain).toBe("kept");
    // a policy written in it is taken
    const withPolicy = await api.put(`/api/tokens/${d.id}/config`, { tunnels: { web: { ...http(3000, "kept"), policy: { on_http_request: [{ actions: [{ type: "deny" }] }] } } } });
    expect(withPolicy.status).toBe(200);
  });
});

describe("burrow start --remote", () => {
  test("runs the server's tunnels, and follows a change within 5 s: the new tunnel served, the removed one gone, a request in flight on the one kept completes", async () => {
    const d = await device("follower");
    await api.put(`/api/tokens/${d.id}/config`, { tunnels: { a: http(a.port, "rc-a"), b: http(b.port, "rc-b") } });
    const agent = startRemote(d.token);
    try {
      await waitUntil(async () => (await answers("rc-a", "A here")) && (await answers("rc-b", "B here")), WAIT_MS, "both tunnels of the config");
      const { rest } = await slowRequestInFlight(server.edgePort, "rc-a", a);
      const since = performance.now();
      expect((await api.put(`/api/tokens/${d.id}/config`, { tunnels: { a: http(a.port, "rc-a"), c: http(b.port, "rc-c") } })).status).toBe(200);
      // liveness bound, polled; the promise is checked on what it took
      await waitUntil(async () => (await answers("rc-c", "B here")) && (await tunnelFetch(server.edgePort, "rc-b", "/")).status === 404, WAIT_MS, "the new config served");
      expect(performance.now() - since).toBeLessThan(LIVE_EFFECT_MS);
      a.release();
      expect(await within(rest, WAIT_MS, "the request in flight on a")).toBe("second half");
      expect(await answers("rc-a", "A here")).toBe(true);
      // one connection all along
      expect(server.output.lines.filter((l) => l.includes("agent connected") && l.includes(`token=${d.id} `)).length).toBe(1);
      expect(agent.proc.exitCode).toBeNull();
    } finally {
      await agent.stop();
    }
  });

  test("a tunnel the admin's rules no longer allow goes alone, even the last one; the agent stays and takes the next config", async () => {
    const d = await device("narrowed");
    const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data: (s, data) => void s.write(data) } });
    await api.put(`/api/tokens/${d.id}/config`, { tunnels: { db: { proto: "tcp", addr: echo.port } } });
    const agent = startRemote(d.token);
    try {
      await agent.output.waitFor(/Forwarding\s+(db\s+)?\S+:\d+/, WAIT_MS);
      expect((await api.put(`/api/users/${userId}`, { allowed_protocols: "http" })).status).toBe(200);
      await agent.output.waitFor(/tunnel 'db' refused by the server: PROTOCOL_DENIED/, WAIT_MS);
      await api.put(`/api/tokens/${d.id}/config`, { tunnels: { web: http(a.port, "after-narrowing") } });
      await waitUntil(() => answers("after-narrowing", "A here"), WAIT_MS, "the next config served");
      expect(agent.proc.exitCode).toBeNull();
    } finally {
      await api.put(`/api/users/${userId}`, { allowed_protocols: "http,tcp" });
      await agent.stop();
      echo.stop(true);
    }
  });

  test("with --config: the file's tunnels run beside the server's, and where both name one, the server's wins", async () => {
    const d = await device("merged");
    await api.put(`/api/tokens/${d.id}/config`, { tunnels: { shared: http(a.port, "from-server") } });
    const file = join(dir, "merged.yml");
    writeFileSync(file, `tunnels:\n  shared:\n    proto: http\n    addr: ${b.port}\n    subdomain: from-file\n  own:\n    proto: http\n    addr: ${b.port}\n    subdomain: file-only\n`);
    const agent = startRemote(d.token, ["--config", file, "--all"]);
    try {
      await waitUntil(async () => (await answers("from-server", "A here")) && (await answers("file-only", "B here")), WAIT_MS, "the server's and the file's tunnels");
      expect((await tunnelFetch(server.edgePort, "from-file", "/")).status).toBe(404);
      await agent.output.waitFor(/tunnel 'shared' of the command line or config file is set aside/, WAIT_MS);
    } finally {
      await agent.stop();
    }
  });

  test("a server older than remote configs: the agent says so and exits 1, asking for nothing", async () => {
    const seen: number[] = [];
    const older = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch: (req, srv) => (srv.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 400 })),
      websocket: {
        message(ws, message) {
          decodeFrames(new Uint8Array(message as Buffer), (f) => {
            seen.push(f.type);
            // as the version before: `remote` and `live` dropped, READY without `live`
            if (f.type === FrameType.HELLO) ws.send(encodeFrame(FrameType.READY, 0, jsonPayload({ session: "s1", username: "old", tunnels: [] })));
          });
        },
      },
    });
    try {
      const agent = startRemote("brw_test", [], `http://127.0.0.1:${older.port}`);
      expect(await within(agent.proc.exited, WAIT_MS, "the agent's exit")).toBe(1);
      await agent.output.closed();
      expect(agent.output.text()).toContain("REMOTE_UNSUPPORTED");
      expect(seen).toContain(FrameType.GOAWAY);
      expect(seen).not.toContain(FrameType.ADD);
    } finally {
      older.stop(true);
    }
  });
});

describe("the portal", () => {
  test("a user sets their own device's tunnels; another user's device is as unknown as none", async () => {
    const portalUser = await api.createUser("portal-fleet");
    const own = (await api.post(`/api/users/${portalUser}/tokens`, { device_name: "mine" })).body.token_id;
    const theirs = (await device("not-theirs")).id;
    const portal = await portalAs(server.edgePort, "portal-fleet");
    expect((await portal.put(`/_burrow/api/me/tokens/${own}/config`, { tunnels: { web: http(3000, "portal-web") } })).status).toBe(200);
    expect((await portal.get(`/_burrow/api/me/tokens/${own}/config`)).body.version).toBe(1);
    // the admin sees what the user set
    expect((await api.get(`/api/tokens/${own}/config`)).body.tunnels.web.subdomain).toBe("portal-web");
    const bad = await portal.put(`/_burrow/api/me/tokens/${own}/config`, { tunnels: { web: { proto: "http" } } });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toStartWith("tunnels.web.addr");
    expect((await portal.get(`/_burrow/api/me/tokens/${theirs}/config`)).status).toBe(404);
    expect((await portal.put(`/_burrow/api/me/tokens/${theirs}/config`, { tunnels: {} })).status).toBe(404);
  });
});
