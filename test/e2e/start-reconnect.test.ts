/**
 * burrow start across a server restart: the one connection comes back with
 * every tunnel, each with the name or port the server gave it before (the
 * random name and the any-port included).
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { echoThrough, freeRange, restartablePort } from "../harness/ports.ts";
import { burrowCommand, startServer } from "../harness/server.ts";

const dataDir = mkdtempSync(join(tmpdir(), "burrow-start-reconnect-"));
const project = mkdtempSync(join(tmpdir(), "burrow-start-project-"));
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`up ${new URL(req.url).pathname}`) });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });
let edgePort: number;
let tcpRange: { first: number; last: number };
let token: string;
let agent: Subprocess | undefined;

const serve = () => startServer({ dataDir, keepDataDir: true, args: ["--http-port", String(edgePort), "--tcp-ports", `${tcpRange.first}-${tcpRange.last}`] });

beforeAll(async () => {
  edgePort = restartablePort();
  tcpRange = freeRange(6);
  await using server = await serve();
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("yml-roamer"));
});
afterAll(() => {
  if (agent && agent.exitCode === null) agent.kill("SIGKILL");
  upstream.stop(true);
  echo.stop(true);
  rmSync(dataDir, { recursive: true, force: true });
  rmSync(project, { recursive: true, force: true });
});

test("after a restart, both tunnels are back on the same connection with the same name and port", async () => {
  let server = await serve();
  try {
    writeFileSync(
      join(project, "burrow.yml"),
      `server: http://127.0.0.1:${edgePort}\ntoken: ${token}\ntunnels:\n  site: { proto: http, addr: ${upstream.port} }\n  shell: { proto: tcp, addr: ${echo.port} }\n`,
    );
    agent = Bun.spawn([...burrowCommand(), "start", "--all"], {
      cwd: project,
      env: { ...process.env, XDG_CONFIG_HOME: join(project, ".xdg"), HTTPS_PROXY: "", ALL_PROXY: "" },
      stdin: "ignore",
      stdout: "pipe",
      stderr: "pipe",
    });
    const output = new LineReader(agent);
    const site = /http:\/\/([a-z0-9]+)\.localhost/.exec(await output.waitFor(/Forwarding\s+site\s/, 15_000))![1]!;
    const port = Number(/:(\d+) ->/.exec(await output.waitFor(/Forwarding\s+shell\s/, 15_000))![1]);
    const firstReady = output.lines.length;

    await server.stop("SIGKILL");
    await output.waitFor(/reconnecting in/, 15_000, firstReady);
    server = await serve();
    const again = await Promise.all([output.waitFor(/Forwarding\s+site\s/, 20_000, firstReady), output.waitFor(/Forwarding\s+shell\s/, 20_000, firstReady)]);
    expect(again[0]).toContain(`http://${site}.localhost:${edgePort}`);
    expect(again[1]).toContain(`:${port} ->`);
    expect(await (await tunnelFetch(edgePort, site, "/back")).text()).toBe("up /back");
    expect(await echoThrough(port, "hello")).toContain("hello");
    const connected = server.output.lines.filter((l) => l.includes("agent connected"));
    expect(connected).toHaveLength(1);
    agent.kill("SIGINT");
    expect(await Promise.race([agent.exited, Bun.sleep(10_000).then(() => "still running")])).toBe(0);
  } finally {
    await server.stop();
  }
}, 60_000);
