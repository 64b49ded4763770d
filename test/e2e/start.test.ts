/**
 * burrow start: the tunnels of a burrow.yml over one connection, against a
 * real server and real local services. One agent process, one "agent
 * connected" at the edge, every tunnel answering; a tunnel the server
 * refuses is named and the others run; flags win over the file.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
let token: string;
const dir = mkdtempSync(join(tmpdir(), "burrow start "));
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`web ${new URL(req.url).pathname}`) });
const api2 = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => Response.json({ from: "api", host: req.headers.get("host") }) });
const echo = Bun.listen({
  hostname: "127.0.0.1",
  port: 0,
  socket: { data: (socket, data) => void socket.write(`echo:${data.toString()}`) },
});
const running: Subprocess[] = [];

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  token = await api.createToken(await api.createUser("yml-user"));
});
afterAll(async () => {
  for (const p of running) if (p.exitCode === null) p.kill("SIGKILL");
  await server?.stop();
  web.stop(true);
  api2.stop(true);
  echo.stop(true);
  rmSync(dir, { recursive: true, force: true });
});

/** `burrow <args>` in `cwd`, with a private config dir. */
function burrow(args: string[], cwd: string, env: Record<string, string | undefined> = {}) {
  const proc = Bun.spawn([...burrowCommand(), ...args], {
    cwd,
    env: { ...process.env, XDG_CONFIG_HOME: join(cwd, ".xdg"), BURROW_SERVER: undefined, BURROW_TOKEN: undefined, HTTPS_PROXY: "", ALL_PROXY: "", ...env },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  running.push(proc);
  return { proc, output: new LineReader(proc) };
}

function project(name: string, yml: string): string {
  const cwd = join(dir, name);
  Bun.spawnSync(["mkdir", "-p", cwd]);
  writeFileSync(join(cwd, "burrow.yml"), yml);
  return cwd;
}

async function stopped(proc: Subprocess): Promise<number | null> {
  if (proc.exitCode === null) proc.kill("SIGINT");
  return Promise.race([proc.exited, Bun.sleep(10_000).then(() => (proc.kill("SIGKILL"), "still running" as const))]) as Promise<number | null>;
}

function tcpExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no tcp answer in 5 s")), 5_000);
    Bun.connect({
      hostname: "127.0.0.1",
      port,
      socket: {
        open: (s) => void s.write(text),
        data: (s, d) => {
          clearTimeout(timer);
          resolve(d.toString());
          s.end();
        },
        error: (_s, e) => reject(e),
      },
    }).catch(reject);
  });
}

describe("several tunnels, one connection", () => {
  test("--all: every tunnel of the file answers, and the edge saw one agent connection carrying them all", async () => {
    const cwd = project(
      "all",
      `server: ${server.edgeUrl}
token: ${token}
tunnels:
  site:
    proto: http
    addr: 127.0.0.1:${web.port}
    subdomain: yml-site
  api:
    proto: http
    addr: ${api2.port}
    subdomain: yml-api
    host_header: rewrite
  echo:
    proto: tcp
    addr: 127.0.0.1:${echo.port}
`,
    );
    const before = server.output.lines.filter((l) => l.includes("agent connected")).length;
    const { proc, output } = burrow(["start", "--all"], cwd);
    const lines = await Promise.all([
      output.waitFor(/Forwarding\s+site\s+http:\/\/yml-site\./, 15_000),
      output.waitFor(/Forwarding\s+api\s+http:\/\/yml-api\./, 15_000),
      output.waitFor(/Forwarding\s+echo\s+\S+:\d+/, 15_000),
    ]);
    expect(lines[1]).toContain(`-> localhost:${api2.port}`);
    const tcpPort = Number(/:(\d+) ->/.exec(lines[2]!)?.[1]);

    const site = await tunnelFetch(server.edgePort, "yml-site", "/a");
    expect(await site.text()).toBe("web /a");
    const apiRes = await tunnelFetch(server.edgePort, "yml-api", "/b");
    expect(await apiRes.json()).toEqual({ from: "api", host: `localhost:${api2.port}` });
    expect(await tcpExchange(tcpPort, "ping")).toBe("echo:ping");

    // one handshake at the edge, naming all three public addresses
    const connected = server.output.lines.filter((l) => l.includes("agent connected")).slice(before);
    expect(connected).toHaveLength(1);
    expect(connected[0]).toContain("yml-site.");
    expect(connected[0]).toContain("yml-api.");
    expect(connected[0]).toContain(`:${tcpPort}`);
    // request lines say which tunnel they went through
    await output.waitFor(/site\s+GET\s+\/a\s+200/, 5_000);
    await output.waitFor(/api\s+GET\s+\/b\s+200/, 5_000);
    const active = await api.get("/api/tunnels/active");
    expect(active.body.filter((t: { username?: string }) => t.username === "yml-user")).toHaveLength(3);
    expect(await stopped(proc)).toBe(0);
  }, 30_000);

  test("NAME...: only the named tunnels start", async () => {
    const cwd = project(
      "named",
      `tunnels:
  one: { proto: http, addr: ${web.port}, subdomain: yml-one }
  two: { proto: http, addr: ${web.port}, subdomain: yml-two }
`,
    );
    const { proc, output } = burrow(["start", "two", "--server", server.edgeUrl, "--token", token], cwd);
    await output.waitFor(/Forwarding\s+http:\/\/yml-two\./, 15_000);
    expect((await tunnelFetch(server.edgePort, "yml-two", "/")).status).toBe(200);
    expect((await tunnelFetch(server.edgePort, "yml-one", "/")).status).toBe(404);
    expect(output.text()).not.toContain("yml-one");
    expect(await stopped(proc)).toBe(0);
  }, 30_000);
});

describe("a tunnel the server refuses", () => {
  test("is named with its code, and the others run", async () => {
    const owner = await api.createUser("yml-owner");
    expect((await api.post("/api/domains", { subdomain: "yml-theirs", user_id: owner })).status).toBe(201);
    const cwd = project(
      "partial",
      `tunnels:
  mine: { proto: http, addr: ${web.port}, subdomain: yml-mine }
  theirs: { proto: http, addr: ${web.port}, subdomain: yml-theirs }
`,
    );
    const { proc, output } = burrow(["start", "--all", "--server", server.edgeUrl, "--token", token], cwd);
    const refusal = await output.waitFor(/tunnel 'theirs'/, 15_000);
    expect(refusal).toContain("SUBDOMAIN_RESERVED");
    await output.waitFor(/Forwarding\s+mine\s+http:\/\/yml-mine\./, 15_000); // named: the file has two tunnels, though one runs
    expect(await (await tunnelFetch(server.edgePort, "yml-mine", "/x")).text()).toBe("web /x");
    expect(proc.exitCode).toBeNull();
    expect(await stopped(proc)).toBe(0);
  }, 30_000);

  test("past the user's tunnel limit: the first tunnels run, the rest are refused with TUNNEL_LIMIT", async () => {
    const limited = await api.createUser("yml-limited", { max_tunnels: 1 });
    const limitedToken = await api.createToken(limited);
    const cwd = project(
      "limit",
      `tunnels:
  first: { proto: http, addr: ${web.port}, subdomain: yml-first }
  second: { proto: http, addr: ${web.port}, subdomain: yml-second }
`,
    );
    const { proc, output } = burrow(["start", "--all", "--server", server.edgeUrl, "--token", limitedToken], cwd);
    // the count includes the tunnel of this same file that was granted first
    expect(await output.waitFor(/tunnel 'second'/, 15_000)).toContain("TUNNEL_LIMIT: user 'yml-limited' has 1 of 1 tunnels open");
    await output.waitFor(/Forwarding\s+first\s+http:\/\/yml-first\./, 15_000);
    expect((await tunnelFetch(server.edgePort, "yml-first", "/")).status).toBe(200);
    expect(await stopped(proc)).toBe(0);
  }, 30_000);

  test("when every tunnel is refused, burrow exits 1 with the refusal", async () => {
    const owner = await api.createUser("yml-owner2");
    await api.post("/api/domains", { subdomain: "yml-r1", user_id: owner });
    await api.post("/api/domains", { subdomain: "yml-r2", user_id: owner });
    const cwd = project(
      "none",
      `tunnels:
  a: { proto: http, addr: ${web.port}, subdomain: yml-r1 }
  b: { proto: http, addr: ${web.port}, subdomain: yml-r2 }
`,
    );
    const { proc, output } = burrow(["start", "--all", "--server", server.edgeUrl, "--token", token], cwd);
    const code = await Promise.race([proc.exited, Bun.sleep(15_000).then(() => "still running")]);
    expect(code).toBe(1);
    expect(output.text()).toContain("SUBDOMAIN_RESERVED");
    expect(output.text()).not.toContain("Forwarding");
  }, 30_000);
});

describe("settings and mistakes", () => {
  test("--token on the command line wins over the file's token", async () => {
    const cwd = project("flags", `server: ${server.edgeUrl}\ntoken: brw_not_a_real_token\ntunnels:\n  w: { proto: http, addr: ${web.port}, subdomain: yml-flag }\n`);
    const { proc, output } = burrow(["start", "w", "--token", token], cwd);
    await output.waitFor(/Forwarding\s+http:\/\/yml-flag\./, 15_000);
    expect(await stopped(proc)).toBe(0);
    // and the file's own token is what is used without the flag: refused
    const second = burrow(["start", "w"], cwd);
    expect(await Promise.race([second.proc.exited, Bun.sleep(15_000).then(() => "still running")])).toBe(1);
    expect(second.output.text()).toContain("AUTH_FAILED");
  }, 30_000);

  test("a mistake in the file: exit 2 with FILE:LINE: FIELD before anything connects", async () => {
    const cwd = project("bad", `tunnels:\n  w:\n    proto: http\n    addr: 3000\n    subdomian: x\n`);
    const { proc, output } = burrow(["start", "--all", "--server", server.edgeUrl, "--token", token], cwd);
    expect(await proc.exited).toBe(2);
    expect(output.text()).toContain(`${join(cwd, "burrow.yml")}:5: tunnels.w.subdomian: unknown key`);
  });

  test("burrow config check: a summary and exit 0, or the mistake and exit 2; --config names another file", async () => {
    const cwd = project("check", `tunnels:\n  w: { proto: http, addr: 3000, subdomain: Shop }\n  d: { proto: tcp, addr: 5432 }\n`);
    const ok = burrow(["config", "check"], cwd);
    expect(await ok.proc.exited).toBe(0);
    expect(ok.output.text()).toContain(`${join(cwd, "burrow.yml")}: ok, 2 tunnels`);
    expect(ok.output.text()).toMatch(/w\s+http shop -> localhost:3000/);
    writeFileSync(join(cwd, "other.yml"), "tunnels:\n  x: { proto: ftp, addr: 21 }\n");
    const bad = burrow(["config", "check", "--config", "other.yml"], cwd);
    expect(await bad.proc.exited).toBe(2);
    expect(bad.output.text()).toContain(`${join(cwd, "other.yml")}:2: tunnels.x.proto: must be http, tcp, tls or udp (got 'ftp')`);
  });

  test("no file anywhere: start says where it looked", async () => {
    const cwd = join(dir, "empty");
    Bun.spawnSync(["mkdir", "-p", cwd]);
    const { proc, output } = burrow(["start", "--all"], cwd);
    expect(await proc.exited).toBe(2);
    expect(output.text()).toContain(`no config file: looked for ${join(cwd, "burrow.yml")}`);
  });

  test("start without names or --all lists the file's tunnels; an unknown name is refused", async () => {
    const cwd = project("names", `tunnels:\n  alpha: { proto: http, addr: 1 }\n  beta: { proto: http, addr: 2 }\n`);
    const none = burrow(["start"], cwd);
    expect(await none.proc.exited).toBe(2);
    expect(none.output.text()).toContain("alpha, beta");
    const unknown = burrow(["start", "gamma"], cwd);
    expect(await unknown.proc.exited).toBe(2);
    expect(unknown.output.text()).toContain("no tunnel named 'gamma'");
  });
});
