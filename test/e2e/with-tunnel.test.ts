/**
 * The withTunnel() fixture the end-to-end tests stand on: it brings up a
 * real server, user, token, local service and agent, and leaves nothing
 * behind: not when a test ends, and not when the set-up fails half way.
 */
import { expect, test } from "bun:test";
import { readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { echoThrough, refuses } from "../harness/ports.ts";
import { ECHO, withServer, withTunnel } from "../harness/tunnel.ts";

/** The processes this test process started that are still there. */
function children(): number[] {
  const pids: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      // the parent pid is the second field after the command's closing parenthesis
      const ppid = Number(readFileSync(`/proc/${name}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
      if (ppid === process.pid) pids.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** The data dirs and agent homes the harness has made in this file's temporary directory and not removed. */
const dirs = () => readdirSync(tmpdir()).filter((n) => n.startsWith("burrow-test-") || n.startsWith("burrow-agent-home-"));

/** What a step started and left behind: the processes and directories that were not there before it. */
function leftBehind(before: { pids: number[]; dirs: string[] }) {
  return { pids: children().filter((p) => !before.pids.includes(p)), dirs: dirs().filter((d) => !before.dirs.includes(d)) };
}
const now = () => ({ pids: children(), dirs: dirs() });
const NOTHING = { pids: [], dirs: [] };

test("an http tunnel is ready when withTunnel returns, and closing it stops the agent, the local service and the server", async () => {
  const before = now();
  await using t = await withTunnel({ username: "fixture-http", upstream: (req) => new Response(`fixture ${new URL(req.url).pathname}`), args: ["--subdomain", "fixture"] });
  expect(t.agent.publicUrl).toBe(`http://fixture.localhost:${t.server.edgePort}`);
  expect(await (await t.fetch("/first")).text()).toBe("fixture /first");
  const users = (await t.api.get("/api/users")).body as { id: number; username: string }[];
  expect(users.find((u) => u.id === t.userId)?.username).toBe("fixture-http");
  expect(leftBehind(before).pids.sort()).toEqual([t.server.proc.pid, t.agent.proc.pid].sort());
  await t.close();
  expect(t.agent.proc.exitCode).toBe(0);
  expect(t.server.proc.exitCode).toBe(0);
  expect(await refuses(t.upstreamPort)).toBe(true);
  expect(await refuses(t.server.edgePort)).toBe(true);
  expect(leftBehind(before)).toEqual(NOTHING);
});

test("a tcp tunnel to the built-in echo carries bytes both ways", async () => {
  await using t = await withTunnel({ kind: "tcp", username: "fixture-tcp", upstream: ECHO });
  expect(t.agent.publicUrl).toBe(`localhost:${t.agent.port}`);
  expect(await echoThrough(t.agent.port!, "through the fixture")).toBe("through the fixture");
  expect(() => t.fetch("/")).toThrow(/http tunnel/);
});

test("`await using` stops everything when the test body throws", async () => {
  const before = now();
  let pids: number[] = [];
  const failing = async () => {
    await using t = await withTunnel({ username: "fixture-throws", upstream: () => new Response("ok") });
    pids = [t.server.proc.pid, t.agent.proc.pid];
    throw new Error("the test failed here");
  };
  await expect(failing()).rejects.toThrow("the test failed here");
  expect(pids).toHaveLength(2);
  expect(leftBehind(before)).toEqual(NOTHING);
});

test("when the agent cannot come up, withTunnel fails with its output and stops the server it started", async () => {
  const before = now();
  // a subdomain the agent refuses before it connects: it exits with a usage error
  const failed = await withTunnel({ username: "fixture-refused", upstream: () => new Response("never"), args: ["--subdomain", "-not-a-name-"] }).then(
    () => undefined,
    (err: Error) => err,
  );
  expect(failed?.message).toContain("agent did not come up");
  expect(leftBehind(before)).toEqual(NOTHING);
});

test("agents started on a rig stop with it; a server passed in is left running", async () => {
  await using outer = await withServer({ username: "fixture-owner" });
  {
    await using inner = await withServer({ server: outer.server, username: "fixture-guest" });
    const agent = await inner.startAgent({ kind: "tcp", target: outer.server.edgePort });
    expect(agent.port).toBeGreaterThan(0);
    await inner.close();
    expect(agent.proc.exitCode).toBe(0);
  }
  expect(outer.server.proc.exitCode).toBeNull();
  expect((await outer.api.get("/api/auth/me")).status).toBe(200);
});
