/**
 * The compiled single executable as both ends of a tunnel: the server and
 * the agent are the same freshly built binary, alone in an empty directory,
 * carrying one HTTP request and one TCP echo.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { echoThrough, freeRange } from "../harness/ports.ts";
import { LineReader } from "../harness/lines.ts";
import { startUdpEcho, udpClient } from "../harness/udp.ts";

let workDir: string;
let binary: string;
let server: TestServer;
let token: string;
let tcpRange: { first: number; last: number };

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: (req) => new Response(`binary says ${req.method} ${new URL(req.url).pathname}`, { headers: { "x-upstream": "yes" } }),
});
/** Greets first, then echoes: the visitor speaks only once the agent has reached it. */
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

beforeAll(async () => {
  workDir = mkdtempSync(join(tmpdir(), "burrow-binary-tunnel-"));
  // alone in an empty directory: nothing of the source tree beside it
  const runDir = join(workDir, "run");
  binary = await compiledBurrow(runDir);

  tcpRange = freeRange(4);
  server = await startServer({ executable: binary, dataDir: join(runDir, "data"), args: ["--tcp-ports", `${tcpRange.first}-${tcpRange.last}`] });
  const api = await signedIn(server);
  const id = await api.createUser("binary-user");
  token = await api.createToken(id);
}, 120_000);

afterAll(async () => {
  await server?.stop();
  upstream.stop(true);
  echo.stop(true);
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

test("the compiled agent opens an http tunnel on the compiled server and carries a request", async () => {
  await using agent = await startAgent({ executable: binary, kind: "http", target: upstream.port!, server: server.edgeUrl, token, args: ["--subdomain", "compiled"] });
  expect(agent.publicUrl).toBe(`http://compiled.localhost:${server.edgePort}`);
  const res = await tunnelFetch(server.edgePort, "compiled", "/from/binary", { method: "POST", body: "x" });
  expect(res.status).toBe(200);
  expect(res.headers.get("x-upstream")).toBe("yes");
  expect(await res.text()).toBe("binary says POST /from/binary");
  await agent.output.waitFor(/POST\s+\/from\/binary\s+200/, 2_000);
  expect(await agent.stop()).toBe(0);
});

test("the compiled agent opens a tcp tunnel on the compiled server and echoes", async () => {
  await using agent = await startAgent({ executable: binary, kind: "tcp", target: echo.port, server: server.edgeUrl, token });
  expect(agent.port).toBeGreaterThanOrEqual(tcpRange.first);
  expect(agent.port).toBeLessThanOrEqual(tcpRange.last);

  let got = "";
  const { promise, resolve, reject } = Promise.withResolvers<void>();
  const timer = setTimeout(() => reject(new Error(`no echo after 5 s (got '${got}')`)), 5_000);
  const sock = await Bun.connect({
    hostname: "127.0.0.1",
    port: agent.port!,
    socket: {
      data(s, d) {
        if (got === "") s.write("hello binary\n"); // after the greeting
        got += d.toString();
        if (got === "ready\nhello binary\n") resolve();
      },
      close: () => reject(new Error(`closed early (got '${got}')`)),
    },
  });
  try {
    await promise;
  } finally {
    clearTimeout(timer);
    sock.end();
  }
  expect(got).toBe("ready\nhello binary\n");
  await agent.output.waitFor(/connection from 127\.0\.0\.1:\d+/, 2_000);
  expect(await agent.stop()).toBe(0);
});

test("the compiled agent is refused with a code by the compiled server like the source one", async () => {
  await using agent = await startAgent({
    executable: binary,
    kind: "http",
    target: upstream.port!,
    server: server.edgeUrl,
    token,
    args: ["--subdomain", "www"],
    waitFor: /^burrow: refused/,
  });
  expect(await agent.proc.exited).toBe(1);
  expect(agent.output.text()).toMatch(/^burrow: refused by the server: SUBDOMAIN_RESERVED: /m);
});

test("the compiled agent checks a burrow.yml and starts its tunnels over one connection", async () => {
  const dir = join(workDir, "project");
  Bun.spawnSync(["mkdir", "-p", dir]);
  writeFileSync(
    join(dir, "burrow.yml"),
    `server: ${server.edgeUrl}\ntunnels:\n  site: { proto: http, addr: ${upstream.port}, subdomain: compiled-yml }\n  shell: { proto: tcp, addr: ${echo.port} }\n`,
  );
  const env = { ...process.env, XDG_CONFIG_HOME: join(dir, ".xdg"), BURROW_TOKEN: token, HTTPS_PROXY: "", ALL_PROXY: "" };
  const check = Bun.spawnSync([binary, "config", "check"], { cwd: dir, env, stdout: "pipe", stderr: "pipe" });
  expect(check.exitCode).toBe(0);
  expect(check.stdout.toString()).toContain("ok, 2 tunnels");
  const proc = Bun.spawn([binary, "start", "--all"], { cwd: dir, env, stdout: "pipe", stderr: "pipe" });
  try {
    const output = new LineReader(proc);
    await output.waitFor(/Forwarding\s+site\s+http:\/\/compiled-yml\./, 15_000);
    const shell = Number(/:(\d+) ->/.exec(await output.waitFor(/Forwarding\s+shell\s/, 15_000))![1]);
    expect(await (await tunnelFetch(server.edgePort, "compiled-yml", "/yml")).text()).toBe("binary says GET /yml");
    expect(await echoThrough(shell, "over yml")).toContain("over yml");
    proc.kill("SIGINT");
    expect(await Promise.race([proc.exited, Bun.sleep(10_000).then(() => "still running")])).toBe(0);
  } finally {
    if (proc.exitCode === null) proc.kill("SIGKILL");
  }
}, 30_000);

test("the compiled agent opens a udp tunnel on the compiled server: a datagram and its reply, whole", async () => {
  const id = await (await signedIn(server)).createUser("binary-udp-user", { allowed_protocols: "udp" });
  const udpToken = await (await signedIn(server)).createToken(id);
  const udpEcho = await startUdpEcho((d) => Buffer.concat([Buffer.from("binary echoes "), d]));
  await using agent = await startAgent({ executable: binary, kind: "udp", target: udpEcho.port, server: server.edgeUrl, token: udpToken });
  const client = await udpClient(agent.port!);
  try {
    expect(agent.publicUrl).toMatch(/^udp:\/\/localhost:\d+$/);
    for (let i = 0; i < 5 && client.got.length === 0; i++) {
      client.send("a datagram");
      await client.waitFor(1, 1_000).catch(() => {});
    }
    expect(client.got[0]?.toString()).toBe("binary echoes a datagram");
    await agent.output.waitFor(/udp flow from 127\.0\.0\.1:\d+/, 2_000);
  } finally {
    client.close();
    udpEcho.close();
  }
});

test("compiled agents share a custom hostname as a pool, each with a path route: requests spread, /api goes to its service", async () => {
  const api = await signedIn(server);
  const id = await api.createUser("binary-pool-user");
  expect((await api.post("/api/hostnames", { hostname: "demo.compiled.test", user_id: id, verified: true })).status).toBe(201);
  const poolToken = await api.createToken(id);
  const members = [0, 1].map((n) => Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(`member ${n}`) }));
  const apiService = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`api saw ${new URL(req.url).pathname}`) });
  try {
    const args = ["--hostname", "demo.compiled.test", "--pool", "--route", `/api=${apiService.port}`, "--health-check", "tcp"];
    await using a = await startAgent({ executable: binary, kind: "http", target: members[0]!.port!, server: server.edgeUrl, token: poolToken, args });
    await using b = await startAgent({ executable: binary, kind: "http", target: members[1]!.port!, server: server.edgeUrl, token: poolToken, args });
    expect(a.publicUrl).toBe(`http://demo.compiled.test:${server.edgePort}`);
    expect(b.publicUrl).toBe(a.publicUrl);
    const seen = new Map<string, number>();
    for (let i = 0; i < 20; i++) {
      const res = await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: "demo.compiled.test" } });
      const body = await res.text();
      seen.set(body, (seen.get(body) ?? 0) + 1);
    }
    expect(seen.get("member 0")).toBe(10);
    expect(seen.get("member 1")).toBe(10);
    const routed = await fetch(`http://127.0.0.1:${server.edgePort}/api/v1`, { headers: { host: "demo.compiled.test" } });
    expect(await routed.text()).toBe("api saw /api/v1");
  } finally {
    for (const m of members) m.stop(true);
    apiService.stop(true);
  }
}, 30_000);
