/**
 * Real clients through tunnels opened with OpenSSH's `ssh -R`: curl (a
 * body, keep-alive, chunked), a WebSocket's messages both ways, and psql
 * and pgbench to a real Postgres (Debian's postgresql) through a tcp
 * tunnel on its allocated port.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { join } from "node:path";
import { postgresAvailable, startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;
const web = Bun.serve<undefined>({
  hostname: "127.0.0.1",
  port: 0,
  fetch(req, server) {
    if (req.headers.get("upgrade") === "websocket") return server.upgrade(req) ? undefined : new Response("no", { status: 400 });
    if (req.method === "POST") return req.text().then((t) => new Response(`posted ${t.length}`));
    // an answer of unknown length: chunked
    return new Response(new ReadableStream({ start: (c) => (c.enqueue(new TextEncoder().encode("chunk one, ")), c.enqueue(new TextEncoder().encode("chunk two")), c.close()) }));
  },
  websocket: { message: (ws, m) => void ws.send(`echo: ${m}`) },
});

/** Runs a client program to its end (bounded); its exit code and output. */
async function run(cmd: string[], env: Record<string, string> = {}): Promise<{ code: number; out: string }> {
  const proc = Bun.spawn(cmd, { stdin: "ignore", stdout: "pipe", stderr: "pipe", env: { ...process.env, ...env } });
  const timer = setTimeout(() => proc.kill("SIGKILL"), 60_000);
  const [out, err] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text()]);
  const code = await proc.exited;
  clearTimeout(timer);
  return { code, out: out + err };
}

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig();
}, 60_000);
afterAll(async () => {
  await rig?.close();
  web.stop(true);
});

describe.skipIf(skip !== undefined)("real clients through ssh -R", () => {
  test("curl: a chunked answer, a posted body, two requests on one kept-alive connection", async () => {
    const ssh = rig.ssh(["-N", "-R", `curled:80:localhost:${web.port}`]);
    const url = `http://curled.localhost:${rig.server.edgePort}/`;
    const resolve = ["--resolve", `curled.localhost:${rig.server.edgePort}:127.0.0.1`];
    await waitUntil(async () => (await run(["curl", "-sf", ...resolve, url])).code === 0, 15_000, "the tunnel");
    expect((await run(["curl", "-sS", ...resolve, url])).out).toBe("chunk one, chunk two");
    expect((await run(["curl", "-sS", ...resolve, "--data-binary", "x".repeat(100_000), url])).out).toBe("posted 100000");
    const twice = await run(["curl", "-sS", "-v", ...resolve, url, url]);
    expect(twice.out).toContain("Re-using existing connection");
    expect(twice.out.match(/chunk one, chunk two/g)?.length).toBe(2);
    await ssh.stop();
  });

  test("a WebSocket: messages both ways through the tunnel", async () => {
    const ssh = rig.ssh(["-N", "-R", `sockets:80:localhost:${web.port}`]);
    await waitUntil(async () => (await run(["curl", "-sf", "--resolve", `sockets.localhost:${rig.server.edgePort}:127.0.0.1`, `http://sockets.localhost:${rig.server.edgePort}/`])).code === 0, 15_000, "the tunnel");
    const ws = new WebSocket(`ws://127.0.0.1:${rig.server.edgePort}/live`, { headers: { host: `sockets.localhost:${rig.server.edgePort}` } } as never);
    const got: string[] = [];
    await new Promise<void>((resolve, reject) => {
      ws.onopen = () => ["one", "two", "three"].forEach((m) => ws.send(m));
      ws.onmessage = (e) => {
        got.push(String(e.data));
        if (got.length === 3) resolve();
      };
      ws.onerror = () => reject(new Error("websocket error"));
      setTimeout(() => reject(new Error(`only ${got.length} messages`)), 10_000);
    });
    expect(got).toEqual(["echo: one", "echo: two", "echo: three"]);
    ws.close();
    await ssh.stop();
  });

  describe.skipIf(postgresAvailable() === undefined)("Postgres", () => {
    let pg: TestPostgres;
    beforeAll(async () => {
      pg = await startPostgres();
    }, 60_000);
    afterAll(async () => pg?.stop());

    test("psql and pgbench through ssh -R 0:localhost:PGPORT", async () => {
      const ssh = rig.ssh(["-N", "-R", `0:localhost:${pg.port}`]);
      const port = Number(/Allocated port (\d+)/.exec(await ssh.output.waitFor(/Allocated port \d+/, 15_000))![1]);
      const url = new URL(pg.url);
      url.port = String(port);
      expect(await run([join(pg.bin, "psql"), url.href, "-At", "-c", "SELECT 6 * 7"])).toEqual({ code: 0, out: "42\n" });
      const env = { PGPASSWORD: decodeURIComponent(url.password) };
      const conn = ["-h", "127.0.0.1", "-p", String(port), "-U", url.username, url.pathname.slice(1)];
      expect((await run([join(pg.bin, "pgbench"), "-i", "-s", "1", "-q", ...conn], env)).code).toBe(0);
      const bench = await run([join(pg.bin, "pgbench"), "-c", "4", "-j", "2", "-t", "200", "-n", ...conn], env);
      expect(bench.code).toBe(0);
      expect(bench.out).toContain("number of transactions actually processed: 800/800");
      expect(bench.out).toContain("number of failed transactions: 0");
      await ssh.stop();
    }, 120_000);
  });
});
