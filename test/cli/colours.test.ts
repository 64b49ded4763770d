/**
 * Colour only where a person reads: the rule (NO_COLOR, FORCE_COLOR, a
 * terminal, TERM=dumb), and the real agent under a real pseudo-terminal
 * (util-linux `script`), where its lines are coloured and Ctrl-C typed at the
 * terminal stops it cleanly; piped, the same lines carry no escape codes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { colourWanted, paint } from "../../src/cli/colours.ts";
import { signedIn } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { burrowCommand, startServer, type TestServer } from "../harness/server.ts";

const ESC = "\x1b[";

/**
 * Whether `script` can give a command a terminal on this machine: the same
 * flags as the test, with Bun itself as the command, which must see a
 * terminal on stdin and stdout.
 */
function ptyAvailable(script: string): boolean {
  const bun = `'${process.execPath.replaceAll("'", `'\\''`)}'`;
  const check = `${bun} -e 'console.log(process.stdin.isTTY && process.stdout.isTTY ? "pty-ok" : "no-tty")'`;
  const probe = Bun.spawnSync([script, "-q", "-e", "-c", check, "/dev/null"], { stdin: "pipe", stdout: "pipe", stderr: "pipe", timeout: 10_000 });
  const ok = probe.exitCode === 0 && probe.stdout.toString().includes("pty-ok");
  if (!ok) console.warn(`colours.test: script gave no terminal (exit ${probe.exitCode}): ${(probe.stdout.toString() + probe.stderr.toString()).trim().slice(0, 300)}`);
  return ok;
}

describe("colourWanted", () => {
  const cases: [string, boolean | undefined, Record<string, string>, boolean][] = [
    ["a terminal", true, { TERM: "xterm-256color" }, true],
    ["a pipe", false, {}, false],
    ["unknown (no stream facts)", undefined, {}, false],
    ["a dumb terminal", true, { TERM: "dumb" }, false],
    ["NO_COLOR on a terminal", true, { NO_COLOR: "1" }, false],
    ["an empty NO_COLOR is not set", true, { NO_COLOR: "" }, true],
    ["FORCE_COLOR into a pipe", false, { FORCE_COLOR: "1" }, true],
    ["FORCE_COLOR wins over NO_COLOR", false, { FORCE_COLOR: "1", NO_COLOR: "1" }, true],
    ["FORCE_COLOR=0 on a terminal", true, { FORCE_COLOR: "0" }, false],
  ];
  test.each(cases)("%s", (_name, isTTY, env, wanted) => {
    expect(colourWanted({ isTTY, env })).toBe(wanted);
  });

  test("off, paint returns the text unchanged; on, it wraps it and resets only what it set", () => {
    expect(paint(false).status(503, "503")).toBe("503");
    expect(paint(true).status(503)).toBe("\x1b[31m503\x1b[39m");
    expect(paint(true).status(404)).toBe("\x1b[33m404\x1b[39m");
    expect(paint(true).status(200)).toBe("\x1b[32m200\x1b[39m");
    expect(paint(true).bold("x")).toBe("\x1b[1mx\x1b[22m");
    expect(paint(true).status("101 websocket")).toBe("\x1b[32m101 websocket\x1b[39m");
    expect(paint(true).status("failed")).toBe("\x1b[31mfailed\x1b[39m");
  });
});

describe("the agent", () => {
  let server: TestServer;
  let token: string;
  const home = mkdtempSync(join(tmpdir(), "burrow colours "));
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("ok") });

  beforeAll(async () => {
    server = await startServer();
    const api = await signedIn(server);
    token = await api.createToken(await api.createUser("colour-user"));
  });
  afterAll(async () => {
    await server?.stop();
    upstream.stop(true);
    rmSync(home, { recursive: true, force: true });
  });

  test("piped, its lines carry no escape codes", async () => {
    await using agent = await startAgent({ kind: "http", target: upstream.port!, server: server.edgeUrl, token, env: { NO_COLOR: undefined, FORCE_COLOR: undefined } });
    expect(agent.output.text()).toContain("Forwarding");
    expect(agent.output.text()).not.toContain(ESC);
  });

  const script = "/usr/bin/script";
  // Some machines (containers without /dev/pts, sandboxes) have `script` but
  // cannot open a pseudo-terminal; there the test has nothing to run on.
  const ptyWorks = process.platform === "linux" && existsSync(script) && ptyAvailable(script);
  if (!ptyWorks) console.warn("colours.test: no pseudo-terminal here (script could not open one); the terminal test is skipped");
  test.skipIf(!ptyWorks)("on a terminal, with --log text, its lines are coloured, and Ctrl-C typed there stops it with exit 0", async () => {
    // --log text: lines on a terminal (the default there is the live screen, tested in agent-screen.test.ts)
    const command = [...burrowCommand(), "http", String(upstream.port), "--server", server.edgeUrl, "--token", token, "--log", "text"]
      .map((w) => `'${w.replaceAll("'", `'\\''`)}'`)
      .join(" ");
    // script runs the command with $SHELL -c; exec makes the agent the
    // terminal's own process, because a shell that waits for it (dash) is
    // killed by the same Ctrl-C and would report 130 for the agent's 0
    const shellCommand = `exec ${command}`;
    // script gives the agent a pseudo-terminal; what we write to its stdin is typed there
    const proc = Bun.spawn([script, "-q", "-e", "-c", shellCommand, "/dev/null"], {
      env: { ...process.env, TERM: "xterm-256color", NO_COLOR: undefined, FORCE_COLOR: undefined, XDG_CONFIG_HOME: home, HTTPS_PROXY: "", ALL_PROXY: "" },
      stdin: "pipe",
      stdout: "pipe",
      stderr: "pipe",
    });
    const output = new LineReader(proc);
    try {
      const line = await output.waitFor(/Forwarding/, 15_000);
      expect(line).toContain(`${ESC}32mForwarding${ESC}39m`);
      proc.stdin.write("\x03"); // Ctrl-C, through the terminal's line discipline
      proc.stdin.flush();
      const code = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => "still running")]);
      expect(code).toBe(0);
    } finally {
      proc.kill("SIGKILL");
    }
  }, 30_000);
});
