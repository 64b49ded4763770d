/**
 * A hostile or broken server: whatever it sends, the agent does not crash;
 * it names the fault (PROTOCOL_ERROR) and exits with code 1.
 */
import { afterEach, expect, test } from "bun:test";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType } from "../../src/protocol/wire.ts";
import { spawnAgent } from "../harness/agent.ts";

let fake: ReturnType<typeof Bun.serve> | undefined;
afterEach(() => fake?.stop(true));

/** A server that answers the agent's HELLO with `reply`. */
function fakeServer(reply: Uint8Array | string) {
  fake = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch: (req, server) => (server.upgrade(req, { data: undefined }) ? undefined : new Response("no", { status: 400 })),
    websocket: { message: (ws) => void ws.send(reply) },
  });
  return `http://127.0.0.1:${fake.port}`;
}

const cases: [string, Uint8Array | string][] = [
  ["garbage bytes", new Uint8Array([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11])],
  ["a READY that is not JSON", encodeFrame(FrameType.READY, 0, new TextEncoder().encode("{"))],
  ["a READY without its fields", encodeFrame(FrameType.READY, 0, jsonPayload({ tunnels: "many" }))],
  ["an OPEN for a stream with the agent's own parity", encodeFrame(FrameType.OPEN, 3, jsonPayload({}))],
];

for (const [name, reply] of cases) {
  test(`${name} from the server makes the agent exit 1 with PROTOCOL_ERROR, not a crash`, async () => {
    const { proc, output } = spawnAgent({ kind: "http", target: 3000, server: fakeServer(reply), token: "brw_test" });
    try {
      const code = await Promise.race([proc.exited, Bun.sleep(10_000).then(() => "timeout")]);
      expect(code).toBe(1);
      await output.closed();
      expect(output.text()).toContain("PROTOCOL_ERROR");
      expect(output.text()).not.toMatch(/^\s+at |TypeError|ValiError/m);
    } finally {
      proc.kill();
    }
  });
}
