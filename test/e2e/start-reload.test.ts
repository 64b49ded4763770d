/**
 * burrow start changes its tunnels on a live connection: burrow.yml read
 * again on SIGHUP and when the file changes, and the agent API on the
 * inspector's port (POST /api/tunnels, DELETE /api/tunnels/NAME). A long
 * request in flight on tunnel A while tunnel B is added each way: A's
 * request completes, B answers; a tunnel whose settings changed is
 * replaced, the others untouched; a file that no longer reads is refused
 * with its error and the tunnels running stay. The real server, the real
 * agent (`burrow start`), real services, curl for the API.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { slowRequestInFlight, slowService } from "../harness/slow-service.ts";
import { waitUntil, within } from "../harness/wait.ts";

/** Liveness only: a change takes milliseconds. */
const WAIT_MS = 15_000;

let server: TestServer;
let api: AdminClient;
let token: string;
const dir = mkdtempSync(join(tmpdir(), "burrow start reload "));
const a = slowService("A");
const b = slowService("B");
const running: Subprocess[] = [];

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  token = await api.createToken(await api.createUser("reloader"));
});
afterAll(async () => {
  for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
  await server?.stop();
  a.stop();
  b.stop();
  rmSync(dir, { recursive: true, force: true });
});

/** The agent connections the server saw that carried `name`. */
const agentsConnected = (name: string) => server.output.lines.filter((l) => l.includes("agent connected") && l.includes(`//${name}.`)).length;

/** A project directory with this burrow.yml (tunnels: NAME -> settings lines). */
function project(name: string): { cwd: string; write(tunnels: string): void } {
  const cwd = join(dir, name);
  mkdirSync(cwd, { recursive: true });
  return { cwd, write: (tunnels) => writeFileSync(join(cwd, "burrow.yml"), `server: ${server.edgeUrl}\ntoken: ${token}\ntunnels:\n${tunnels}`) };
}

const http = (name: string, port: number, subdomain: string) => `  ${name}:\n    proto: http\n    addr: ${port}\n    subdomain: ${subdomain}\n`;

/** `burrow start --all` in `cwd`, up once every name in `names` is forwarding. */
async function start(cwd: string, names: string[], args: string[] = ["--no-inspect"]) {
  const proc = Bun.spawn([...burrowCommand(), "start", "--all", "--log", "text", ...args], {
    cwd,
    env: { ...process.env, XDG_CONFIG_HOME: join(cwd, ".xdg"), BURROW_SERVER: undefined, BURROW_TOKEN: undefined, HTTPS_PROXY: "", ALL_PROXY: "" },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  running.push(proc);
  const output = new LineReader(proc);
  try {
    for (const n of names) await output.waitFor(new RegExp(`Forwarding\\s+(${n}\\s+)?http://`), WAIT_MS);
  } catch (err) {
    proc.kill("SIGKILL");
    throw new Error(`burrow start did not come up: ${(err as Error).message}\n${output.text()}`);
  }
  return { proc, output, stop: () => (proc.kill("SIGINT"), proc.exited) };
}

describe("burrow.yml reloaded", () => {
  test("SIGHUP: B is added while a long request on A is in flight; A's request completes, B answers, over the same connection", async () => {
    const p = project("sighup");
    p.write(http("a", a.port, "hup-a"));
    const agent = await start(p.cwd, ["a"]);
    try {
      expect(agentsConnected("hup-a")).toBe(1);
      const { rest } = await slowRequestInFlight(server.edgePort, "hup-a", a);
      p.write(http("a", a.port, "hup-a") + http("b", b.port, "hup-b"));
      agent.proc.kill("SIGHUP");
      await agent.output.waitFor(/Forwarding\s+b\s+http:\/\/hup-b\./, WAIT_MS);
      expect(await (await tunnelFetch(server.edgePort, "hup-b", "/")).text()).toBe("B here");
      a.release();
      expect(await within(rest, WAIT_MS, "A's request")).toBe("second half");
      expect(agentsConnected("hup-a")).toBe(1);
      expect(agent.proc.exitCode).toBeNull();
    } finally {
      await agent.stop();
    }
  });

  test("a change of the file, without a signal: a tunnel whose settings changed is replaced, one that is gone is removed, the others are untouched", async () => {
    const p = project("watched");
    p.write(http("a", a.port, "w-a") + http("b", b.port, "w-b") + http("c", b.port, "w-c"));
    const agent = await start(p.cwd, ["a", "b", "c"]);
    try {
      const { rest } = await slowRequestInFlight(server.edgePort, "w-a", a);
      // b moves to another name, c goes, a stays as it is
      p.write(http("a", a.port, "w-a") + http("b", b.port, "w-b2"));
      await agent.output.waitFor(/Forwarding\s+b\s+http:\/\/w-b2\./, WAIT_MS);
      await agent.output.waitFor(/reloaded: .*removed \(.*c/, WAIT_MS);
      expect((await tunnelFetch(server.edgePort, "w-b", "/")).status).toBe(404);
      expect((await tunnelFetch(server.edgePort, "w-c", "/")).status).toBe(404);
      expect(await (await tunnelFetch(server.edgePort, "w-b2", "/")).text()).toBe("B here");
      // a's local service changes only: taken in place, its name never away
      p.write(http("a", b.port, "w-a") + http("b", b.port, "w-b2"));
      // (a visitor connection open before goes on to the service it had: a new one here)
      const fresh = () => tunnelFetch(server.edgePort, "w-a", "/", { headers: { connection: "close" } });
      await waitUntil(async () => (await (await fresh()).text()) === "B here", WAIT_MS, "a taking its new local service");
      a.release();
      expect(await within(rest, WAIT_MS, "the request in flight on a")).toBe("second half");
    } finally {
      await agent.stop();
    }
  });

  test("a file that no longer reads is refused with its error, and the tunnels running stay", async () => {
    const p = project("broken");
    p.write(http("a", a.port, "br-a"));
    const agent = await start(p.cwd, ["a"]);
    try {
      p.write(`${http("a", a.port, "br-a")}  b:\n    proto: gopher\n    addr: 1\n`);
      agent.proc.kill("SIGHUP");
      const line = await agent.output.waitFor(/not reloaded/, WAIT_MS);
      expect(line).toContain("burrow.yml:");
      expect(line).toContain("tunnels.b.proto");
      expect(line).toContain("the tunnels running stay");
      expect(await (await tunnelFetch(server.edgePort, "br-a", "/")).text()).toBe("A here");
      expect(agent.proc.exitCode).toBeNull();
    } finally {
      await agent.stop();
    }
  });
});

describe("the agent API on the inspector's port", () => {
  /** curl, as a script calls the API. */
  async function curl(method: string, url: string, body?: unknown): Promise<{ status: number; body: any }> {
    const args = ["curl", "-s", "-o", "-", "-w", "\n%{http_code}", "-X", method, url, ...(body === undefined ? [] : ["-H", "Content-Type: application/json", "-d", JSON.stringify(body)])];
    const proc = Bun.spawn(args, { stdout: "pipe", stderr: "pipe" });
    const text = await new Response(proc.stdout).text();
    await proc.exited;
    const cut = text.lastIndexOf("\n");
    const raw = text.slice(0, cut);
    return { status: Number(text.slice(cut + 1)), body: raw === "" ? undefined : JSON.parse(raw) };
  }

  test("POST /api/tunnels adds B while a long request on A is in flight; GET lists both; DELETE stops B; mistakes and refusals say why", async () => {
    const p = project("agent-api");
    p.write(http("a", a.port, "api-a"));
    const agent = await start(p.cwd, ["a"], ["--inspect-addr", "127.0.0.1:0"]);
    try {
      const inspector = /Inspector\s+(http:\/\/\S+)/.exec(await agent.output.waitFor(/Inspector\s+http:/, WAIT_MS))![1]!;
      const { rest } = await slowRequestInFlight(server.edgePort, "api-a", a);
      const made = await curl("POST", `${inspector}/api/tunnels`, { name: "b", proto: "http", addr: String(b.port), subdomain: "api-b" });
      expect(made.status).toBe(201);
      expect(made.body).toMatchObject({ name: "b", uri: "/api/tunnels/b", proto: "http", source: "api" });
      expect(made.body.public_url).toContain("api-b.localhost");
      expect(await (await tunnelFetch(server.edgePort, "api-b", "/")).text()).toBe("B here");
      a.release();
      expect(await within(rest, WAIT_MS, "A's request")).toBe("second half");
      expect(agentsConnected("api-a")).toBe(1);

      const listed = await curl("GET", `${inspector}/api/tunnels`);
      expect(listed.body.tunnels.map((t: { name: string }) => t.name).sort()).toEqual(["a", "b"]);
      expect((await curl("GET", `${inspector}/api/tunnels/b`)).body.config.addr).toBe(`http://localhost:${b.port}`);

      // mistakes: the field named as the body names it; a name that runs; a refusal with the server's code
      const bad = await curl("POST", `${inspector}/api/tunnels`, { name: "c", proto: "http", addr: "not a port" });
      expect(bad.status).toBe(400);
      expect(bad.body.error).toStartWith("addr:");
      expect((await curl("POST", `${inspector}/api/tunnels`, { proto: "http", addr: "1" })).body.error).toStartWith("name:");
      expect((await curl("POST", `${inspector}/api/tunnels`, { name: "a", proto: "http", addr: "1" })).status).toBe(409);
      const refused = await curl("POST", `${inspector}/api/tunnels`, { name: "c", proto: "http", addr: "1", subdomain: "admin" });
      expect(refused.status).toBe(422);
      expect(refused.body).toMatchObject({ code: "TUNNEL_REFUSED", refusal: { code: "SUBDOMAIN_RESERVED" } });

      expect((await curl("DELETE", `${inspector}/api/tunnels/b`)).status).toBe(204);
      expect((await tunnelFetch(server.edgePort, "api-b", "/")).status).toBe(404);
      expect((await curl("DELETE", `${inspector}/api/tunnels/b`)).status).toBe(404);
      expect(await (await tunnelFetch(server.edgePort, "api-a", "/")).text()).toBe("A here");
    } finally {
      await agent.stop();
    }
  });

  test("from another site's page, or on an inspector moved off loopback, tunnels are not changed", async () => {
    const p = project("agent-api-guard");
    p.write(http("a", a.port, "guard-a"));
    const agent = await start(p.cwd, ["a"], ["--inspect-addr", "0.0.0.0:0"]);
    try {
      const port = /Inspector\s+http:\/\/\S+:(\d+)/.exec(await agent.output.waitFor(/Inspector\s+http:/, WAIT_MS))![1]!;
      const post = (headers: Record<string, string>) =>
        fetch(`http://127.0.0.1:${port}/api/tunnels`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ name: "x", proto: "http", addr: "1" }) });
      expect((await post({ origin: "http://evil.example" })).status).toBe(403);
      const offLoopback = await post({});
      expect(offLoopback.status).toBe(403);
      expect(((await offLoopback.json()) as { code: string }).code).toBe("LOOPBACK_ONLY");
      // reading is as before
      expect((await fetch(`http://127.0.0.1:${port}/api/tunnels`)).status).toBe(200);
    } finally {
      await agent.stop();
    }
  });
});
