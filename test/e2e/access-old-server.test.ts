/**
 * An older server drops a tunnel's `access` settings (unknown keys) and
 * would open it to anyone. The agent sees READY without `access: true` for
 * a tunnel that asked for rules: it says why, tells the server it is leaving
 * (GOAWAY, so the name is freed at once) and exits 1, serving nothing.
 */
import { afterEach, expect, test } from "bun:test";
import { decodeFrames, encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType } from "../../src/protocol/wire.ts";
import { spawnAgent } from "../harness/agent.ts";

let fake: ReturnType<typeof Bun.serve> | undefined;
afterEach(() => fake?.stop(true));

/** A server that grants what it is asked, as an older server would: READY with no `access` mark. */
function olderServer(seen: number[], confirm: boolean) {
  fake = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, server) => (server.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 400 })),
    websocket: {
      message(ws, message) {
        const types: number[] = [];
        decodeFrames(new Uint8Array(message as Buffer), (f) => void types.push(f.type));
        for (const type of types) {
          seen.push(type);
          if (type !== FrameType.HELLO) continue;
          const tunnel = { id: "t1", protocol: "http", subdomain: "open", url: "http://open.localhost", ...(confirm ? { access: true } : {}) };
          ws.send(encodeFrame(FrameType.READY, 0, jsonPayload({ session: "s1", username: "old", tunnels: [tunnel] })));
        }
      },
    },
  });
  return `http://127.0.0.1:${fake.port}`;
}

test("a tunnel with basic auth granted by a server that does not confirm its rules: the agent leaves (exit 1), saying why", async () => {
  const seen: number[] = [];
  const { proc, output } = spawnAgent({ kind: "http", target: 3000, server: olderServer(seen, false), token: "brw_test", args: ["--log", "text", "--no-inspect", "--basic-auth", "u:pw-never-shown"] });
  try {
    const code = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => "timeout")]);
    expect(code).toBe(1);
    await output.closed();
    expect(output.text()).toContain("ACCESS_UNSUPPORTED: the server does not enforce access rules");
    expect(output.text()).toContain("update burrow on the server");
    expect(output.text()).not.toContain("Forwarding");
    expect(output.text()).not.toContain("pw-never-shown");
    expect(seen).toContain(FrameType.GOAWAY);
  } finally {
    proc.kill();
  }
});

test("the same READY with `access: true` is served as usual", async () => {
  const seen: number[] = [];
  const { proc, output } = spawnAgent({ kind: "http", target: 3000, server: olderServer(seen, true), token: "brw_test", args: ["--log", "text", "--no-inspect", "--basic-auth", "u:p"] });
  try {
    await output.waitFor(/Forwarding\s+http:\/\/open\.localhost/, 10_000);
    expect(seen).not.toContain(FrameType.GOAWAY);
  } finally {
    proc.kill();
  }
});
