/**
 * Where the inspector listens, as the agent's flags and the free ports
 * decide, and which tunnels it captures. The 4040-4049 scan runs on ports
 * of this test's own (BURROW_TEST_INSPECT_PORTS), taken or left free on
 * purpose, so it never meets another test's agent or a real one.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { listenOnFirstFree, portRange } from "../../src/agent/inspector/address.ts";
import { spawnAgent, startAgent, tunnelFetch } from "../harness/agent.ts";
import { LineReader } from "../harness/lines.ts";
import { burrowCommand } from "../harness/server.ts";
import { waitUntil, within } from "../harness/wait.ts";
import { startRig, startUpstream, type Rig, type Upstream } from "./rig.ts";

let rig: Rig;
let up: Upstream;
beforeAll(async () => {
  rig = await startRig();
  up = startUpstream();
});
afterAll(async () => {
  up?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
});

/** A port that was free a moment ago (the kernel's ephemeral pick). */
function freePort(): number {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  const port = s.port;
  s.stop(true);
  return port;
}

/** A port held by a listener of ours until disposed. */
function takenPort(): { port: number } & Disposable {
  const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
  return { port: s.port, [Symbol.dispose]: () => s.stop(true) };
}

/** Two neighbouring ports, the first held by a listener of ours, the second free a moment ago (a range to scan). */
function heldThenFree(): { held: number; free: number } & Disposable {
  for (let attempt = 0; attempt < 50; attempt++) {
    const held = takenPort();
    try {
      const probe = Bun.listen({ hostname: "127.0.0.1", port: held.port + 1, socket: { data() {} } });
      probe.stop(true);
      return { held: held.port, free: held.port + 1, [Symbol.dispose]: () => held[Symbol.dispose]() };
    } catch {
      held[Symbol.dispose]();
    }
  }
  throw new Error("no two neighbouring ports free");
}

const canConnect = async (port: number) => {
  try {
    const res = await fetch(`http://127.0.0.1:${port}/api/tunnels`, { signal: AbortSignal.timeout(2_000) });
    await res.arrayBuffer();
    return true;
  } catch {
    return false;
  }
};

const agentWith = (args: string[], env: Record<string, string> = {}) =>
  startAgent({ kind: "http", target: `127.0.0.1:${up.port}`, server: rig.server.edgeUrl, token: rig.token, args, env });

describe("the port scan (listenOnFirstFree), on real sockets", () => {
  test("takes the first free port, skipping taken ones; none free gives undefined", () => {
    using a = takenPort();
    using b = takenPort();
    const listen = ({ host, port }: { host: string; port: number }) => Bun.listen({ hostname: host, port, socket: { data() {} } });
    expect(listenOnFirstFree("127.0.0.1", [a.port, b.port], listen)).toBeUndefined();
    const free = freePort();
    const got = listenOnFirstFree("127.0.0.1", [a.port, b.port, free], listen);
    try {
      expect(got?.port).toBe(free);
    } finally {
      got?.stop(true);
    }
    expect([...portRange(4040, 4043)]).toEqual([4040, 4041, 4042, 4043]);
  });

  test("a failure that is not a taken port is not hidden", () => {
    expect(() => listenOnFirstFree("127.0.0.1", [1], () => {
      throw Object.assign(new Error("boom"), { code: "EACCES" });
    })).toThrow("boom");
  });
});

describe("the agent's flags", () => {
  test("by default it takes the first free port of its range and prints its address", async () => {
    using ports = heldThenFree();
    const second = ports.free;
    await using agent = await agentWith([], { BURROW_TEST_INSPECT_PORTS: `${ports.held}-${second}` });
    const line = await agent.output.waitFor(/Inspector\s+\S+/, 5_000);
    expect(line).toContain(`http://127.0.0.1:${second}`);
    expect(await canConnect(second)).toBe(true);
  });

  test("all ports of the range taken: one line says so, and the tunnel runs without an inspector", async () => {
    using ports = heldThenFree();
    const [low, high] = [ports.held, ports.free];
    // the free one taken too, by us: the whole range is busy
    const second = Bun.listen({ hostname: "127.0.0.1", port: high, socket: { data() {} } });
    using _second = { [Symbol.dispose]: () => second.stop(true) };
    await using agent = await agentWith([], { BURROW_TEST_INSPECT_PORTS: `${low}-${high}` });
    await agent.output.waitFor(/inspector off/, 5_000);
    const said = agent.output.text().split("\n").filter((l) => /inspector/i.test(l) && !l.startsWith("Forwarding")); // the user is inspector-user
    expect(said.length).toBe(1);
    expect(said[0]).toContain(`127.0.0.1:${low}-${high} are all taken`);
    const res = await tunnelFetch(rig.server.edgePort, agent.subdomain!, "/still-works");
    expect(res.status).toBe(200);
    expect(await res.text()).toBe("hello from /still-works");
  });

  test("--no-inspect: no inspector line and nothing listening where it would be", async () => {
    const port = freePort();
    await using agent = await agentWith(["--no-inspect"], { BURROW_TEST_INSPECT_PORTS: `${port}-${port}` });
    expect((await tunnelFetch(rig.server.edgePort, agent.subdomain!, "/x")).status).toBe(200);
    expect(agent.output.text()).not.toMatch(/Inspector/);
    expect(await canConnect(port)).toBe(false);
  });

  test("--inspect-addr that cannot be listened on: exit 2 with a clear error, before any tunnel", async () => {
    using taken = takenPort();
    const { proc, output } = spawnAgent({ kind: "http", target: up.port, server: rig.server.edgeUrl, token: rig.token, args: ["--inspect-addr", `127.0.0.1:${taken.port}`] });
    expect(await within(proc.exited, 10_000, "the agent to exit")).toBe(2);
    expect(output.text()).toContain(`cannot listen on 127.0.0.1:${taken.port} for the inspector: the port is in use`);
    expect(output.text()).not.toContain("Forwarding");
  });

  test("bad inspector flags are usage errors (exit 2) naming the flag", async () => {
    const cases: [string[], string][] = [
      [["--inspect-addr", "nonsense"], "--inspect-addr must be HOST:PORT"],
      [["--inspect-addr", "127.0.0.1:70000"], "--inspect-addr must be HOST:PORT"],
      [["--inspect-keep", "0"], "--inspect-keep must be a number of requests from 1 to"],
      [["--inspect-keep", "lots"], "--inspect-keep must be a number"],
      [["--no-inspect", "--inspect-addr", "127.0.0.1:4040"], "--no-inspect turns the inspector off"],
    ];
    await Promise.all(
      cases.map(async ([args, message]) => {
        const { proc, output } = spawnAgent({ kind: "http", target: up.port, server: rig.server.edgeUrl, token: rig.token, args });
        expect({ args, code: await within(proc.exited, 10_000, "the agent to exit") }).toEqual({ args, code: 2 });
        expect(output.text()).toContain(message);
      }),
    );
  });

  test("Ctrl-C with a page's live stream open: the agent still exits 0, at once", async () => {
    const agent = await agentWith(["--inspect-addr", "127.0.0.1:0"]);
    try {
      const inspector = /Inspector\s+(\S+)/.exec(await agent.output.waitFor(/Inspector\s+\S+/, 5_000))![1]!;
      const live = await fetch(`${inspector}/api/requests/stream`);
      const reader = live.body!.getReader();
      await reader.read(); // its first comment: the stream is open
      const started = performance.now();
      expect(await within(agent.stop(), 10_000, "the agent to exit")).toBe(0);
      expect(performance.now() - started).toBeLessThan(5_000);
      await reader.cancel().catch(() => {});
    } finally {
      await agent.stop();
    }
  });

  test("burrow tcp: the inspector runs, and lists its tunnel as not inspected", async () => {
    await using agent = await startAgent({ kind: "tcp", target: up.port, server: rig.server.edgeUrl, token: rig.token, args: ["--inspect-addr", "127.0.0.1:0"] });
    const inspector = /Inspector\s+(\S+)/.exec(await agent.output.waitFor(/Inspector\s+\S+/, 5_000))![1]!;
    const { tunnels } = (await (await fetch(`${inspector}/api/tunnels`)).json()) as any;
    expect(tunnels).toMatchObject([{ name: "tcp", protocol: "tcp", inspect: false }]);
  });

  test("an explicit --inspect-addr on another loopback address is used as given", async () => {
    const port = freePort();
    await using agent = await agentWith(["--inspect-addr", `localhost:${port}`]);
    expect(await agent.output.waitFor(/Inspector\s+\S+/, 5_000)).toContain(`http://localhost:${port}`);
  });
});

test("burrow start: a tunnel with inspect: false in burrow.yml is not captured, the others are", async () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-inspect-yml-"));
  const port = rig.server.edgePort;
  const file = join(dir, "burrow.yml");
  const sub = `ins${process.pid}`;
  writeFileSync(
    file,
    [
      "tunnels:",
      "  seen:",
      "    proto: http",
      `    addr: 127.0.0.1:${up.port}`,
      `    subdomain: ${sub}a`,
      "  unseen:",
      "    proto: http",
      `    addr: 127.0.0.1:${up.port}`,
      `    subdomain: ${sub}b`,
      "    inspect: false",
      "",
    ].join("\n"),
  );
  const proc = Bun.spawn([...burrowCommand(), "start", "--all", "--config", file, "--server", rig.server.edgeUrl, "--token", rig.token, "--inspect-addr", "127.0.0.1:0"], {
    env: { ...process.env, XDG_CONFIG_HOME: dir },
    stdin: "ignore",
    stdout: "pipe",
    stderr: "pipe",
  });
  const output = new LineReader(proc);
  try {
    const inspector = /Inspector\s+(\S+)/.exec(await output.waitFor(/Inspector\s+\S+/, 10_000))![1]!;
    await output.waitFor(/Forwarding.*unseen/, 10_000);
    expect((await tunnelFetch(port, `${sub}b`, "/not-captured")).status).toBe(200);
    expect((await tunnelFetch(port, `${sub}a`, "/captured")).status).toBe(200);
    await waitUntil(async () => ((await (await fetch(`${inspector}/api/requests`)).json()) as any).requests.length > 0, 5_000, "a capture");
    const list = ((await (await fetch(`${inspector}/api/requests`)).json()) as any).requests;
    expect(list.map((r: any) => `${r.tunnel} ${r.path}`)).toEqual(["seen /captured"]);
    const tunnels = ((await (await fetch(`${inspector}/api/tunnels`)).json()) as any).tunnels;
    expect(tunnels.map((t: any) => `${t.name} ${t.inspect}`).sort()).toEqual(["seen true", "unseen false"]);
  } finally {
    proc.kill("SIGINT");
    await within(proc.exited, 10_000, "burrow start to stop").catch(() => proc.kill("SIGKILL"));
    rmSync(dir, { recursive: true, force: true });
  }
});
