/**
 * The live screen in a real terminal: the agent runs in tmux (its own
 * server, -L) against a real burrow server and a real local service. What
 * the pane shows is read with capture-pane: the public address, counters
 * that move with requests sent through the tunnel (one held open counts as
 * open), the status colours, a resize redrawn to the new width, the
 * reconnecting state while the server is down and online again when it is
 * back on the same port, the latency once a PONG came, the inspector's
 * address, and after Ctrl-C a terminal as it was (main screen, cursor
 * shown) with exit 0. A refusal leaves the screen first and then prints
 * itself where it stays.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { tunnelFetch } from "../harness/agent.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { freeRange } from "../harness/ports.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";

const tmuxInstalled = Bun.which("tmux") !== null || (aptInstall(["tmux"], "agent-screen.test needs tmux") && Bun.which("tmux") !== null);
if (!tmuxInstalled) console.warn("agent-screen.test: tmux is not installed and could not be installed; the terminal tests are skipped");

/**
 * Whether tmux can open a terminal here: some machines (containers without
 * /dev/pts) have tmux but no pseudo-terminals to give it, and there the
 * tests have nothing to run on. A throwaway session on its own socket, then
 * that server killed.
 */
function tmuxWorks(): boolean {
  const socket = `burrow-screen-probe-${process.pid}`;
  const probe = Bun.spawnSync(["tmux", "-L", socket, "new-session", "-d", "-x", "40", "-y", "10", "sleep 5"], { stdout: "pipe", stderr: "pipe", timeout: 10_000 });
  Bun.spawnSync(["tmux", "-L", socket, "kill-server"], { stdout: "ignore", stderr: "ignore", timeout: 5_000 });
  if (probe.exitCode !== 0) console.warn(`agent-screen.test: tmux cannot open a terminal here (${probe.stderr.toString().trim().slice(0, 200)}); the terminal tests are skipped`);
  return probe.exitCode === 0;
}
const haveTmux = tmuxInstalled && tmuxWorks();

/** This file's own tmux server: cleanup kills it and nothing else. */
const SOCKET = `burrow-screen-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
const home = mkdtempSync(join(tmpdir(), "burrow-screen-home-"));

function tmux(...args: string[]): string {
  const r = Bun.spawnSync(["tmux", "-L", SOCKET, "-f", "/dev/null", ...args], { stdout: "pipe", stderr: "pipe", timeout: 5_000 });
  if (r.exitCode !== 0) throw new Error(`tmux ${args.join(" ")}: ${r.stderr.toString()}`);
  return r.stdout.toString();
}

/** What the pane `target` shows now, line by line (`escapes`: with its colours). */
const pane = (target: string, escapes = false) => tmux("capture-pane", "-p", ...(escapes ? ["-e"] : []), "-t", target);
const paneFact = (target: string, format: string) => tmux("display-message", "-p", "-t", target, format).trim();

/**
 * Waits until the pane shows `pattern` (or passes `ok`); fails with what it
 * shows. A frame reaches tmux in pieces: a check that reads several lines
 * waits for all of them, not for the first.
 */
async function until(target: string, pattern: RegExp | ((screen: string) => boolean), what: string, ms = 10_000): Promise<string> {
  const ok = typeof pattern === "function" ? pattern : (screen: string) => pattern.test(screen);
  let shown = "";
  try {
    await waitUntil(() => ok((shown = pane(target))), ms, what, 100);
  } catch (err) {
    throw new Error(`${(err as Error).message}; the pane shows:\n${shown}`);
  }
  return shown;
}

/** The counters row under "total open rt1 rt5 p50 p90", as its six words. */
function counters(screen: string): string[] {
  const lines = screen.split("\n");
  const header = lines.findIndex((l) => /total\s+open\s+rt1\s+rt5\s+p50\s+p90/.test(l));
  if (header < 0) throw new Error(`no counters on the screen:\n${screen}`);
  return lines[header + 1]!.trim().split(/\s+/);
}

const quote = (w: string) => `'${w.replaceAll("'", `'\\''`)}'`;

/** Opens a tmux window running the agent in a shell that says how it exited, then waits. */
function runAgentIn(name: string, args: string[], extraEnv: string[] = [], size = { x: 120, y: 40 }): void {
  const env = [`XDG_CONFIG_HOME=${home}`, "HTTPS_PROXY=", "ALL_PROXY=", "TERM=xterm-256color", ...extraEnv].map(quote).join(" ");
  const agent = [...burrowCommand(), ...args].map(quote).join(" ");
  const command = `env -u NO_COLOR -u FORCE_COLOR -u BURROW_LOG ${env} ${agent}; echo EXITED=$?; sleep 600`;
  const session = ["new-session", "-d", "-s", name, "-x", String(size.x), "-y", String(size.y), command];
  // the first window starts this file's tmux server
  tmux(...session);
}

let server: TestServer | undefined;
let token: string;
let dataDir: string;
/**
 * /hold waits for this gate. One gate, made before any request: the agent
 * counts a request open before the service has read it, so on a loaded
 * machine release() can come first, and the request must then pass at once.
 */
let release: () => void = () => {};
const holdGate = new Promise<void>((r) => (release = r));
const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  // /hold is held on purpose until the test releases it: on a loaded machine that took longer than Bun's 10 s default
  idleTimeout: 0,
  fetch: async (req) => {
    const path = new URL(req.url).pathname;
    if (path === "/hold") await holdGate;
    return new Response("ok", { status: path === "/missing" ? 404 : 200 });
  },
});

beforeAll(async () => {
  if (!haveTmux) return;
  server = await startServer({ keepDataDir: true });
  dataDir = server.dataDir;
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("screen-user"));
});
afterAll(async () => {
  release();
  if (haveTmux) Bun.spawnSync(["tmux", "-L", SOCKET, "kill-server"], { stdout: "ignore", stderr: "ignore" });
  await server?.stop("SIGKILL");
  upstream.stop(true);
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  rmSync(home, { recursive: true, force: true });
});

describe.skipIf(!haveTmux)("the live screen in tmux", () => {
  test("address, moving counters, colours, resize, reconnecting, latency, and a clean terminal after Ctrl-C", async () => {
    const edgePort = server!.edgePort;
    const inspectPort = freeRange(1).first;
    runAgentIn("main", ["http", String(upstream.port), "--server", server!.edgeUrl, "--token", token, "--inspect-addr", `127.0.0.1:${inspectPort}`]);
    let screen = await until("main", /Session Status\s+online/, "the session online");
    // drawn on the alternate screen with the cursor hidden: nothing scrolls into the terminal's history
    expect(paneFact("main", "#{alternate_on} #{cursor_flag}")).toBe("1 0");
    expect(screen).toMatch(/User\s+screen-user/);
    expect(screen).toContain(`Server              ${server!.edgeUrl}`);
    expect(screen).toContain(`Inspector           http://127.0.0.1:${inspectPort}`);
    const forwarding = /Forwarding\s+http:\/\/([a-z0-9]+)\.localhost:(\d+) -> localhost:(\d+)/.exec(screen);
    expect(forwarding).not.toBeNull();
    const sub = forwarding![1]!;
    expect(Number(forwarding![2])).toBe(edgePort);
    expect(Number(forwarding![3])).toBe(upstream.port!);
    expect(counters(screen).slice(0, 2)).toEqual(["0", "0"]);

    // requests through the tunnel: five 200s and a 404
    for (let i = 0; i < 5; i++) expect((await tunnelFetch(edgePort, sub, `/page/${i}`)).status).toBe(200);
    expect((await tunnelFetch(edgePort, sub, "/missing")).status).toBe(404);
    const requestLines = (screen: string) => screen.split("\n").filter((l) => /^\d\d:\d\d:\d\d\s+GET/.test(l));
    screen = await until("main", (s) => /^ +6 +0 +[0-9.]+ /m.test(s) && requestLines(s).length === 6, "total 6, open 0 and six requests listed");
    const [, , rt1, rt5, p50, p90] = counters(screen);
    expect(Number(rt1)).toBeCloseTo(6 / 60, 2);
    expect(Number(rt5)).toBeCloseTo(6 / 300, 2);
    expect(p50).toMatch(/^[0-9.]+ms$/);
    expect(p90).toMatch(/^[0-9.]+ms$/);
    // the last requests, the newest first
    const listed = requestLines(screen);
    expect(listed.map((l) => /GET\s+(\S+)/.exec(l)![1])).toEqual(["/missing", "/page/4", "/page/3", "/page/2", "/page/1", "/page/0"]);
    expect(listed[0]).toMatch(/\/missing\s+404\s+\d+ ms$/);
    // status colours: a 404 yellow, a 200 green
    const coloured = pane("main", true);
    expect(coloured).toMatch(/\x1b\[33m404/);
    expect(coloured).toMatch(/\x1b\[32m200/);

    // a request the local service has not answered yet is open
    const held = tunnelFetch(edgePort, sub, "/hold");
    await until("main", /^ +7 +1 +[0-9.]+ /m, "total 7, open 1");
    release();
    expect((await held).status).toBe(200);
    await until("main", /^ +7 +0 +[0-9.]+ /m, "total 7, open 0 after the answer");

    // narrower and shorter: drawn again to the new size, lines cut to it, nothing wrapped
    tmux("resize-window", "-t", "main", "-x", "60", "-y", "18");
    const complete = /^\d\d:\d\d:\d\d\s+GET\s+\S+\s+(200|404)\s+\d+ ms$/;
    const redrawn = (width: number) => (s: string) => {
      const rows = s.replace(/\n$/, "").split("\n");
      return rows[0]!.length === width && /^burrow \S+ {2,}\(Ctrl-C to quit\)$/.test(rows[0]!) && requestLines(s).length > 0 && requestLines(s).every((l) => complete.test(l));
    };
    screen = await until("main", redrawn(60), "the screen drawn again to 60 columns");
    const lines = screen.replace(/\n$/, "").split("\n");
    expect(lines.length).toBe(18);
    expect(screen).toMatch(/total\s+open\s+rt1\s+rt5\s+p50\s+p90/); // the narrow layout keeps every counter
    // every line that starts with a time is a whole request line: nothing wrapped onto the next
    for (const l of lines.filter((l) => /^\d\d:\d\d:\d\d/.test(l))) expect(l).toMatch(complete);
    // 18 rows leave room for fewer of the 7 requests than 40 did
    expect(requestLines(screen).length).toBeLessThan(7);
    // and wider again
    tmux("resize-window", "-t", "main", "-x", "100", "-y", "40");
    screen = await until("main", redrawn(100), "the screen drawn again to 100 columns");
    expect(requestLines(screen)).toHaveLength(7);

    // the round trip to the edge, from the PONG of the PING the agent sends after READY
    await until("main", /Latency\s+\d+ ms/, "the latency", 15_000);

    // the server goes away: the screen says so and counts down to the next try
    await server!.stop("SIGKILL");
    screen = await until("main", /Session Status\s+reconnecting in \d+ s \(attempt \d+/, "the reconnecting state");
    expect(screen).toMatch(/Latency\s+-$/m); // no round trip to a server that is gone
    // back on the same port with the same database: online again
    server = await startServer({ dataDir, keepDataDir: true, args: ["--http-port", String(edgePort)] });
    expect(server.edgePort).toBe(edgePort);
    await until("main", /Session Status\s+online/, "online again after the server came back", 20_000);

    // Ctrl-C: the agent exits 0 and the terminal is as it was
    tmux("send-keys", "-t", "main", "C-c");
    screen = await until("main", /EXITED=\d+/, "the agent to exit");
    expect(screen).toContain("EXITED=0");
    expect(screen).not.toContain("Session Status");
    expect(screen).not.toContain("Forwarding");
    expect(paneFact("main", "#{alternate_on} #{cursor_flag}")).toBe("0 1");
    // attributes reset: what the shell prints after is plain
    expect(pane("main", true)).toMatch(/^EXITED=0$/m);
  }, 180_000);

  test("NO_COLOR: the same screen without a colour", async () => {
    runAgentIn("plain", ["http", String(upstream.port), "--server", server!.edgeUrl, "--token", token, "--no-inspect"], ["NO_COLOR=1"]);
    await until("plain", /Session Status\s+online/, "the session online");
    const match = /Forwarding\s+http:\/\/([a-z0-9]+)\./.exec(pane("plain"))!;
    expect((await tunnelFetch(server!.edgePort, match[1]!, "/missing")).status).toBe(404);
    await until("plain", /\/missing\s+404/, "the request listed");
    expect(paneFact("plain", "#{alternate_on}")).toBe("1");
    expect(pane("plain", true)).not.toMatch(/\x1b\[[0-9;]*m/);
    tmux("send-keys", "-t", "plain", "C-c");
    expect(await until("plain", /EXITED=\d+/, "the agent to exit")).toContain("EXITED=0");
  }, 30_000);

  test("a server that cannot be reached yet is named while the agent keeps trying", async () => {
    const closed = `http://127.0.0.1:${freeRange(1).first}`;
    runAgentIn("unreachable", ["http", String(upstream.port), "--server", closed, "--token", token, "--no-inspect"]);
    const screen = await until("unreachable", /Session Status\s+reconnecting/, "the agent retrying");
    expect(screen).toMatch(new RegExp(`^Server\\s+${closed.replaceAll(".", "\\.")}$`, "m"));
    tmux("send-keys", "-t", "unreachable", "C-c");
    expect(await until("unreachable", /EXITED=\d+/, "the agent to exit")).toContain("EXITED=0");
  }, 30_000);

  test("a refusal leaves the screen first and then stays printed; exit 1", async () => {
    runAgentIn("refused", ["http", String(upstream.port), "--server", server!.edgeUrl, "--token", "brw_" + "0".repeat(43)]);
    const screen = await until("refused", /EXITED=\d+/, "the agent to exit");
    expect(screen).toContain("EXITED=1");
    expect(screen).toMatch(/burrow: refused by the server: AUTH_FAILED: /);
    expect(screen).not.toContain("Session Status");
    expect(paneFact("refused", "#{alternate_on} #{cursor_flag}")).toBe("0 1");
  }, 30_000);
});
