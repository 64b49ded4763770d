/**
 * HTTP/2 and tunnels opened with `ssh -R`: a visitor on HTTP/2 (curl with
 * prior knowledge on the plain port, each stream through the h2 door) gets
 * to the client's -R target as an HTTP/1.1 visitor does, bodies both ways
 * and several streams on one connection (nghttp's); and with `--upstream-protocol h2c`
 * after the host, the gateway speaks HTTP/2 to an h2c service behind the
 * -R, through the SSH connection. `--upstream-protocol h2` needs TLS to the
 * service, which a channel does not carry: refused, with why.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { NGHTTP, nghttp2Available, run } from "../harness/nghttp2.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason() ?? (nghttp2Available() ? undefined : "no nghttp (Debian's nghttp2-client)");
let rig: SshRig;
let h2c: H2EchoServer;
const web = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  fetch: async (req) => {
    const path = new URL(req.url).pathname;
    if (req.method === "POST") return new Response(`got ${(await req.arrayBuffer()).byteLength} bytes on ${path}`);
    return new Response(`hello ${path}`);
  },
});

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig();
  h2c = await startH2Echo();
}, 60_000);
afterAll(async () => {
  await rig?.close();
  await h2c?.stop();
  web.stop(true);
});

/** curl to `name`'s `path` on the edge's plain port, with the given flags: exit code and output (bounded). */
async function curl(name: string, paths: string[], flags: string[]): Promise<{ code: number; out: string }> {
  const port = rig.server.edgePort;
  const urls = paths.map((p) => `http://${name}.localhost:${port}${p}`);
  const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "--resolve", `${name}.localhost:${port}:127.0.0.1`, ...flags, ...urls], { stdout: "pipe", stderr: "pipe" });
  const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
  return { code, out: out + err };
}

describe.skipIf(skip !== undefined)("HTTP/2 and ssh -R", () => {
  test("curl --http2-prior-knowledge reaches an ssh -R http tunnel over HTTP/2: answers, a posted body, several streams on one connection", async () => {
    const ssh = rig.ssh(["-N", "-R", `hhtwo:80:localhost:${web.port}`]);
    await waitUntil(async () => (await curl("hhtwo", ["/"], ["-f"])).code === 0, 15_000, "tunnel hhtwo");
    const one = await curl("hhtwo", ["/a"], ["--http2-prior-knowledge", "-w", "\\n%{http_version} %{http_code}"]);
    expect(one.out).toBe("hello /a\n2 200");
    const posted = await curl("hhtwo", ["/up"], ["--http2-prior-knowledge", "--data-binary", "x".repeat(100_000), "-w", "\\n%{http_version}"]);
    expect(posted.out).toBe("got 100000 bytes on /up\n2");
    // nghttp asks for its URLs at once, each a stream of one connection (curl 7.88 cannot reuse a prior-knowledge connection)
    const port = rig.server.edgePort;
    const three = await run([NGHTTP, "-v", "-H", `:authority: hhtwo.localhost:${port}`, ...["/1", "/2", "/3"].map((p) => `http://127.0.0.1:${port}${p}`)], 30_000);
    expect(three.code).toBe(0);
    expect(three.stdout.match(/Connected/g)?.length).toBe(1);
    for (const n of [1, 2, 3]) expect(three.stdout).toContain(`hello /${n}`);
    expect(three.stdout.match(/recv \(stream_id=\d+\) :status: 200/g)?.length).toBe(3);
    await ssh.stop();
  });

  test("--upstream-protocol h2c after the host: the gateway speaks HTTP/2 to the h2c service behind the -R, through the SSH connection", async () => {
    const before = h2c.requests;
    const ssh = rig.ssh(["-tt", "-R", `grpcish:80:localhost:${h2c.port}`], { command: ["--", "--upstream-protocol", "h2c"] });
    await ssh.output.waitFor(/Forwarding\s+http:\/\/grpcish\./, 15_000);
    const h1 = await curl("grpcish", ["/over-h1"], ["-f", "-D", "-"]);
    expect(h1.code).toBe(0);
    expect(h1.out).toContain("x-method: GET");
    expect(h1.out).toContain("GET /over-h1\n");
    const h2 = await curl("grpcish", ["/over-h2"], ["--http2-prior-knowledge", "-w", "%{http_version}"]);
    expect(h2.out).toBe("GET /over-h2\n2");
    // the h2c service heard both: the agent's side spoke HTTP/2 to it
    expect(h2c.requests - before).toBe(2);
    await ssh.stop();
  });

  test("--upstream-protocol h2 is refused with why (no TLS through a channel), and no tunnel opens", async () => {
    const ssh = rig.ssh(["-tt", "-R", `tlsup:80:localhost:${h2c.port}`], { command: ["--", "--upstream-protocol", "h2"] });
    await ssh.output.waitFor(/-R tlsup:80 refused: --upstream-protocol h2: the server reaches your -R target through the SSH connection, without TLS; use h2c/, 15_000);
    expect((await curl("tlsup", ["/"], ["-f"])).code).not.toBe(0);
    await ssh.stop();
  });
});
