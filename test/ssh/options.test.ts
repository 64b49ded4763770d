/**
 * The options after the host (`ssh -R demo:80:... host -- --basic-auth me:pw`;
 * OpenSSH reads its own options after the host too, until `--`):
 * burrow http's, tcp's and tls's flags that make sense for a forward, read
 * by the command line's own code, so a mistake reads as the CLI says it.
 * Access rules, --host-header and --private --share, each with OpenSSH's
 * client; a command that is no options runs nothing.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { tunnelFetch } from "../harness/agent.ts";
import { echoThrough, freePort } from "../harness/ports.ts";
import { burrowCommand } from "../harness/server.ts";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`host=${req.headers.get("host")} user=${req.headers.get("x-burrow-user")}`) });
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig();
}, 60_000);
afterAll(async () => {
  await rig?.close();
  web.stop(true);
  echo.stop(true);
});

/** What the CLI says of `burrow http 3000 <flags>` (stderr's first line). */
function cliSays(flags: string[]): string {
  const out = Bun.spawnSync([...burrowCommand(), "http", "3000", "--server", "http://127.0.0.1:1", "--token", "brw_not_used", ...flags], { stdout: "pipe", stderr: "pipe" });
  return out.stderr.toString().split("\n")[0]!;
}

describe.skipIf(skip !== undefined)("options after the host", () => {
  test("--basic-auth: visitors must sign in", async () => {
    const ssh = rig.ssh(["-tt", "-R", `guarded:80:localhost:${web.port}`], { command: ["--", "--basic-auth", "me:secret-pw"] });
    await ssh.output.waitFor(/Forwarding\s+http:\/\/guarded\./, 15_000);
    expect((await tunnelFetch(rig.server.edgePort, "guarded", "/")).status).toBe(401);
    const ok = await tunnelFetch(rig.server.edgePort, "guarded", "/", { headers: { authorization: `Basic ${btoa("me:secret-pw")}` } });
    expect(ok.status).toBe(200);
    await ssh.stop();
  });

  test("--host-header: the service is sent that Host; quoted words stay one", async () => {
    const ssh = rig.ssh(["-tt", "-R", `hosted:80:localhost:${web.port}`], { command: ["--", "--host-header", "'app.internal:8080'", "--request-header-add", "'X-From: ssh gateway'"] });
    await ssh.output.waitFor(/Forwarding\s+http:\/\/hosted\./, 15_000);
    expect(await (await tunnelFetch(rig.server.edgePort, "hosted", "/")).text()).toBe("host=app.internal:8080 user=null");
    await ssh.stop();
  });

  test("--private --share: -R db:5432 is a private tcp tunnel 'db', reached by bob with ssh -L and by no port", async () => {
    const bob = await rig.api.createUser("bob");
    const bobKey = rig.keys.make();
    expect((await rig.api.post(`/api/users/${bob}/ssh-keys`, { key: bobKey.pub })).status).toBe(201);
    const owner = rig.ssh(["-tt", "-R", `db:5432:localhost:${echo.port}`], { command: ["--", "--private", "--share", "bob"] });
    await owner.output.waitFor(/Private\s+not public; reach it with\s+burrow connect alice\/db\s+or\s+ssh -L PORT:alice\/db:5432\s+\(shared with bob\)/, 15_000);
    const active = (await rig.api.get("/api/tunnels/active")).body as { private?: { target: string }; port?: number }[];
    const listed = active.find((t) => t.private?.target === "alice/db");
    expect(listed?.port).toBeUndefined();
    const local = freePort();
    const reach = rig.ssh(["-N", "-L", `${local}:alice/db:5432`], { key: bobKey });
    await waitUntil(async () => (await echoThrough(local, "p").catch(() => "")) === "p", 15_000, "bob's -L");
    expect(await echoThrough(local, "private over ssh both ways")).toBe("private over ssh both ways");
    await reach.stop();
    await owner.stop();
  });

  test("--allow-cidr on a tcp forward: a visitor from elsewhere is closed as it connects", async () => {
    const ssh = rig.ssh(["-tt", "-R", `0:localhost:${echo.port}`], { command: ["--", "--allow-cidr", "10.0.0.0/8"] });
    const port = Number(/Allocated port (\d+)/.exec(await ssh.output.waitFor(/Allocated port \d+/, 15_000))![1]);
    const s = connect(port, "127.0.0.1");
    s.on("error", () => {});
    let got = "";
    s.on("data", (d) => (got += d.toString()));
    await new Promise<void>((r) => s.once("close", () => r()));
    expect(got).toBe("");
    await ssh.stop();
  });

  for (const [flags, why] of [
    [["--basic-auth", "nocolon"], "a value the CLI refuses"],
    [["--colour"], "a flag no command has"],
    [["--private", "--share", "bob", "--oidc-issuer", "https://id.example.com"], "options that do not go together"],
  ] as const) {
    test(`${why} is refused in the CLI's words, and no tunnel opens`, async () => {
      const ssh = rig.ssh(["-tt", "-R", `refusedopt:80:localhost:${web.port}`], { command: ["--", ...flags] });
      const expected = cliSays([...flags]).replace(/^burrow: /, "");
      // said once for the session (a flag no command has), or for the forward (a value, what goes with what)
      await ssh.output.waitFor(new RegExp(`burrow: (-R refusedopt:80 refused: )?${expected.replace(/[.*+?^${}()|[\]\\]/g, "\\$&").slice(0, 60)}`), 15_000);
      expect(await ssh.proc.exited).not.toBe(0);
      expect((await tunnelFetch(rig.server.edgePort, "refusedopt", "/")).status).not.toBe(200);
    });
  }

  test("an option of another kind is refused for that forward: --basic-auth on a tcp tunnel", async () => {
    const ssh = rig.ssh(["-tt", "-R", `0:localhost:${echo.port}`], { command: ["--", "--basic-auth", "me:pw"] });
    await ssh.output.waitFor(/-R 0 refused: unknown flag --basic-auth for a tcp tunnel/, 15_000);
    await ssh.stop();
  });

  test("a command that is no options runs nothing: it is refused, exit 2", async () => {
    const ssh = rig.ssh(["-T"], { command: ["cat", "/etc/passwd"] });
    expect(await ssh.proc.exited).toBe(2);
    expect(ssh.output.text()).toContain("unexpected argument 'cat': this server runs no command, it takes options");
    expect(ssh.output.text()).not.toContain("root:");
  });
});
