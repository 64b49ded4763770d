/**
 * `ssh -L PORT:owner/name:PORT` through the SSH gateway: a private tunnel
 * of another user's (opened by the real agent with a token) reached with
 * OpenSSH's own client and an SSH key, as `burrow connect` reaches it. A
 * tcp tunnel shared and not shared (the same NOT_SHARED for a name that
 * does not exist, in OpenSSH's "open failed"), a private http tunnel
 * whose service reads X-Burrow-User, an unshare closing what is open, and
 * the connection audited.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { echoThrough, freePort } from "../harness/ports.ts";
import { startSshRig, sshSkipReason, type SshRig, type TestKey } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;
let aliceToken: string;
let carolKey: TestKey;
const echo = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { open: (s) => void s.write("ready\n"), data: (s, d) => void s.write(d) } });
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`private web sees user=${req.headers.get("x-burrow-user")}`) });

beforeAll(async () => {
  if (skip) return;
  // bob signs in with his key; alice owns the private tunnels, with the agent
  rig = await startSshRig({ username: "bob" });
  const alice = await rig.api.createUser("alice");
  aliceToken = await rig.api.createToken(alice);
  const carol = await rig.api.createUser("carol");
  carolKey = rig.keys.make();
  expect((await rig.api.post(`/api/users/${carol}/ssh-keys`, { key: carolKey.pub })).status).toBe(201);
}, 60_000);

afterAll(async () => {
  await rig?.close();
  echo.stop(true);
  web.stop(true);
});

function privateTunnel(kind: "tcp" | "http", target: number, name: string, share: string[]): Promise<TestAgent> {
  return startAgent({ kind, target, server: rig.server.edgeUrl, token: aliceToken, args: ["--private", "--name", name, ...(share.length ? ["--share", share.join(",")] : [])] });
}

/** Whether 127.0.0.1:`port` takes a connection now. */
function listening(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

describe.skipIf(skip !== undefined)("ssh -L reaches private tunnels", () => {
  test("a private tcp tunnel shared with bob: ssh -N -L carries bytes both ways, audited as his connection", async () => {
    await using _owner = await privateTunnel("tcp", echo.port, "db", ["bob"]);
    const local = freePort();
    const ssh = rig.ssh(["-N", "-o", "ExitOnForwardFailure=yes", "-L", `${local}:alice/db:5432`]);
    await waitUntil(() => listening(local), 15_000, "ssh's local port");
    expect(await echoThrough(local, "through ssh -L")).toBe("through ssh -L");
    expect(await echoThrough(local, "and again")).toBe("and again");
    // the admin API counts bob's connection among the tunnel's connectors (with several nodes, once the shared list has it)
    const connected = async () => ((await rig.api.get("/api/tunnels/active")).body as { private?: { target: string; connected: number } }[]).find((t) => t.private?.target === "alice/db")?.private?.connected;
    await waitUntil(async () => (await connected()) === 1, 10_000, "bob counted as connected");
    // written as the connection is admitted, not before its channel is answered
    const audited = async () => ((await rig.api.get("/api/audit?action=private.connect")).body as { username: string; target: string }[]).some((e) => e.username === "bob" && e.target === "private:alice/db");
    await waitUntil(audited, 10_000, "bob's connection in the audit log");
    await ssh.stop();
  });

  test("not shared: carol is refused NOT_SHARED, the same for a name or an owner that does not exist", async () => {
    await using _owner = await privateTunnel("tcp", echo.port, "db", ["bob"]);
    for (const target of ["alice/db", "alice/nothing", "nobody/db"]) {
      const local = freePort();
      const ssh = rig.ssh(["-N", "-L", `${local}:${target}:5432`], { key: carolKey });
      await waitUntil(() => listening(local), 15_000, "ssh's local port");
      const s = connect(local, "127.0.0.1");
      await new Promise<void>((r) => s.once("close", () => r()));
      await ssh.output.waitFor(/open failed: administratively prohibited: burrow: NOT_SHARED/, 10_000);
      await ssh.stop();
    }
  });

  test("a private http tunnel: requests through ssh -L reach the service with X-Burrow-User", async () => {
    await using _owner = await privateTunnel("http", web.port!, "web", ["bob"]);
    const local = freePort();
    const ssh = rig.ssh(["-N", "-L", `${local}:alice/web:80`]);
    await waitUntil(() => listening(local), 15_000, "ssh's local port");
    const res = await fetch(`http://127.0.0.1:${local}/`, { headers: { "X-Burrow-User": "forged" } });
    expect(await res.text()).toBe("private web sees user=bob");
    await ssh.stop();
  });

  test("the owner's tunnel goes and is declared again without bob: his open connection is closed, his next one refused NOT_SHARED", async () => {
    const owner = await privateTunnel("tcp", echo.port, "db", ["bob"]);
    const local = freePort();
    const ssh = rig.ssh(["-N", "-L", `${local}:alice/db:5432`]);
    await waitUntil(() => listening(local), 15_000, "ssh's local port");
    const held = connect(local, "127.0.0.1");
    const closed = new Promise<void>((r) => held.once("close", () => r()));
    held.on("error", () => {});
    await new Promise<void>((r) => held.once("data", () => r()));
    // the same name declared again without bob
    await owner.stop();
    await using _again = await privateTunnel("tcp", echo.port, "db", []);
    await closed;
    const next = connect(local, "127.0.0.1");
    next.on("error", () => {});
    await new Promise<void>((r) => next.once("close", () => r()));
    await ssh.output.waitFor(/open failed: administratively prohibited: burrow: NOT_SHARED/, 10_000);
    await ssh.stop();
  });
});
