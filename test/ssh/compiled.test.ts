/**
 * The SSH gateway in the compiled single executable (`npm run build`),
 * where ssh2 runs without its optional native parts (build/ssh2-pure-js.ts):
 * host keys made in the data dir, a key added, and OpenSSH's `ssh -R`
 * carrying an http request and a tcp echo.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { tunnelFetch } from "../harness/agent.ts";
import { compiledBurrow } from "../harness/compiled.ts";
import { echoThrough } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let workDir: string;
let server: TestServer;
let rig: SshRig;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`compiled says ${new URL(req.url).pathname}`) });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

beforeAll(async () => {
  if (skip) return;
  workDir = mkdtempSync(join(tmpdir(), "burrow-ssh-compiled-"));
  const runDir = join(workDir, "run");
  const binary = await compiledBurrow(runDir);
  server = await startServer({ executable: binary, dataDir: join(runDir, "data"), args: ["--ssh-port", "0"] });
  rig = await startSshRig({ server });
}, 180_000);

afterAll(async () => {
  await rig?.close();
  await server?.stop();
  web.stop(true);
  echo.stop(true);
  if (workDir) rmSync(workDir, { recursive: true, force: true });
});

describe.skipIf(skip !== undefined)("the SSH gateway in the compiled executable", () => {
  test("its host keys are made in the data dir, private to the server, and their fingerprints logged", () => {
    for (const file of ["ssh_host_ed25519_key", "ssh_host_rsa_key"]) {
      const path = join(server.dataDir, "ssh", file);
      expect(existsSync(path)).toBe(true);
      expect(statSync(path).mode & 0o777).toBe(0o600);
    }
    expect(server.output.text()).toMatch(/ssh gateway listening port=\d+ fingerprint_ed25519=SHA256:\S+ fingerprint_rsa=SHA256:\S+/);
  });

  test("ssh -R carries an http request and a tcp echo", async () => {
    const http = rig.ssh(["-N", "-R", `built:80:localhost:${web.port}`]);
    await waitUntil(async () => (await tunnelFetch(server.edgePort, "built", "/x")).status === 200, 20_000, "the tunnel");
    expect(await (await tunnelFetch(server.edgePort, "built", "/path")).text()).toBe("compiled says /path");
    const tcp = rig.ssh(["-N", "-R", `0:localhost:${echo.port}`]);
    const line = await tcp.output.waitFor(/Allocated port \d+/, 20_000);
    expect(await echoThrough(Number(/Allocated port (\d+)/.exec(line)![1]), "native-free")).toBe("native-free");
    await http.stop();
    await tcp.stop();
  });
});
