/**
 * Security class: guessing and holding the SSH gateway's sign-in. Failed
 * sign-ins are counted per address by the agents' handshake throttle
 * (--handshake-limit): past it the address is turned away before its key
 * is read, even with a good key; a connection that never signs in is cut
 * after --ssh-handshake-timeout; an address holds at most
 * --ssh-max-handshakes connections signing in at once. Each with OpenSSH's
 * own client or raw sockets against the real server.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { startSshRig, sshSkipReason, type SshRig } from "../harness/ssh-client.ts";
import { waitUntil } from "../harness/wait.ts";

const skip = sshSkipReason();
let rig: SshRig;

beforeAll(async () => {
  if (skip) return;
  rig = await startSshRig({ args: ["--handshake-limit", "3", "--ssh-handshake-timeout", "2", "--ssh-max-handshakes", "4"] });
}, 60_000);
afterAll(() => rig?.close());

/** A raw TCP connection to the gateway from `from` (a loopback address of its own, apart from the other tests'); `closed`: when the server closes it, with what it sent. */
async function rawConnection(from: string, send?: string): Promise<{ closed: Promise<{ text: string; ms: number }>; text(): string; end(): void }> {
  const started = performance.now();
  let text = "";
  const { promise, resolve } = Promise.withResolvers<{ text: string; ms: number }>();
  const sock = connect({ host: "127.0.0.1", port: rig.server.sshPort!, localAddress: from });
  await new Promise<void>((r, reject) => {
    sock.once("connect", () => r());
    sock.once("error", reject);
  });
  if (send !== undefined) sock.write(send);
  sock.on("data", (d) => (text += d.toString("latin1")));
  sock.on("error", () => {});
  sock.on("close", () => resolve({ text, ms: performance.now() - started }));
  return { closed: promise, text: () => text, end: () => sock.destroy() };
}

describe.skipIf(skip !== undefined)("the SSH gateway's sign-in holds against guessing and holding", () => {
  test("failed sign-ins lock the address: past --handshake-limit even the right key is refused RATE_LIMITED, unread", async () => {
    for (let i = 0; i < 3; i++) {
      const wrong = rig.ssh(["-N"], { key: rig.keys.make() });
      expect(await wrong.proc.exited).toBe(255);
      expect(wrong.output.text()).toContain("Permission denied (publickey)");
    }
    const right = rig.ssh(["-N"]);
    expect(await right.proc.exited).toBe(255);
    expect(right.output.text()).toMatch(/Received disconnect from .*burrow: RATE_LIMITED: too many failed handshakes/);
    // refusals are audited, counted per address, code and minute
    const codes = async () => ((await rig.api.get("/api/audit?action=ssh.refused&limit=10")).body as { code: string }[]).map((e) => e.code);
    await waitUntil(async () => (await codes()).includes("AUTH_FAILED") && (await codes()).includes("RATE_LIMITED"), 10_000, "the refusals in the audit log");
  });

  test("a connection that never signs in is cut after --ssh-handshake-timeout", async () => {
    const silent = await rawConnection("127.0.0.2");
    const after = await silent.closed;
    expect(after.text.startsWith("SSH-2.0-burrow\r\n")).toBe(true);
    expect(after.ms).toBeGreaterThan(1_500);
    expect(after.ms).toBeLessThan(20_000);
  });

  test("an address holds --ssh-max-handshakes connections signing in at once; the next is closed as it opens, others are not", async () => {
    const held = await Promise.all(Array.from({ length: 4 }, () => rawConnection("127.0.0.3")));
    const extra = await rawConnection("127.0.0.3");
    const refused = await extra.closed;
    expect(refused.text).toBe("");
    expect(refused.ms).toBeLessThan(1_500);
    // another address is not held back by them
    const other = await rawConnection("127.0.0.4", "SSH-2.0-test\r\n");
    await waitUntil(() => other.text().startsWith("SSH-2.0-burrow"), 5_000, "the other address's version line");
    other.end();
    for (const h of held) h.end();
  });

  test("garbage before the version line, and endless lines instead of it, end the connection", async () => {
    const garbage = await rawConnection("127.0.0.5", "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    expect((await garbage.closed).ms).toBeLessThan(5_000);
    const lines = await rawConnection("127.0.0.6", "x".repeat(10_000));
    expect((await lines.closed).ms).toBeLessThan(5_000);
  });
});
