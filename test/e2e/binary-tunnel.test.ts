/**
 * The compiled single executable as both ends of a tunnel: the server and
 * the agent are the same freshly built binary, alone in an empty directory,
 * carrying one HTTP request and one TCP echo.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { freeRange } from "../harness/ports.ts";

const root = join(import.meta.dir, "..", "..");
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
  const build = Bun.spawn(
    [process.execPath, "build", "--compile", "--minify", join(root, "src/main.ts"), "--outfile", join(workDir, "build", "burrow")],
    { cwd: root, stdout: "pipe", stderr: "pipe" },
  );
  const [stderr, code] = await Promise.all([new Response(build.stderr).text(), build.exited]);
  if (code !== 0) throw new Error(`build failed: ${stderr}`);
  // alone in an empty directory: nothing of the source tree beside it
  const runDir = join(workDir, "run");
  mkdirSync(runDir);
  binary = join(runDir, "burrow");
  copyFileSync(join(workDir, "build", "burrow"), binary);
  Bun.spawnSync(["chmod", "+x", binary]);

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
