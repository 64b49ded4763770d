/**
 * PING amplification: a PING carries PING_BYTES (4) bytes and its PONG the
 * same bytes; any other size is a PROTOCOL_ERROR that closes the
 * connection, on every entry path: before a HELLO (anyone can connect), held
 * beside a HELLO being checked, after READY, on the agents' WebSocket and on
 * the direct port, and on a relay link between nodes. A stranger never gets
 * an echo bigger than what the protocol says a PING is.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { nodeAuthorization } from "../../src/cluster/node-auth.ts";
import { FrameType, MAX_PAYLOAD, NODE_PATH, PING_BYTES, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { signedIn } from "../harness/admin.ts";
import { startPostgres, type TestPostgres } from "../harness/postgres.ts";
import { rawConnection, type RawConnection, type RawConnectionOptions } from "../harness/raw-agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

/** Liveness only: the edge answers a frame in milliseconds. */
const WAIT_MS = 10_000;
const SECRET = "cluster-secret-for-ping-tests-0123456789";

let server: TestServer;
let token: string;

beforeAll(async () => {
  server = await startServer();
  const api = await signedIn(server);
  token = await api.createToken(await api.createUser("pinger"));
});
afterAll(async () => {
  await server?.stop();
});

const ping = (size: number, fill = 7) => encodeFrame(FrameType.PING, 0, new Uint8Array(size).fill(fill));
const hello = () => encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http" }], agent: "ping-test" }));
const pongs = (c: RawConnection) => c.frames.filter((f) => f.type === FrameType.PONG);
const refusal = (c: RawConnection) => {
  const error = c.frames.find((f) => f.type === FrameType.ERROR);
  return error && (JSON.parse(error.payload.toString()) as { code: string; message: string });
};

/** Sends `frames` and waits for the close; the refusal is PROTOCOL_ERROR and no PONG came. */
async function refusedWithoutEcho(c: RawConnection, ...frames: Uint8Array[]): Promise<void> {
  try {
    c.send(...frames);
    expect(await c.until(() => c.closed, WAIT_MS)).toBe(true);
    expect(refusal(c)?.code).toBe("PROTOCOL_ERROR");
    expect(refusal(c)?.message).toContain(`must be ${PING_BYTES} bytes`);
    expect(pongs(c)).toEqual([]);
  } finally {
    c.close();
  }
}

for (const via of ["websocket", "direct"] as const) {
  const opts = (): RawConnectionOptions => ({ port: via === "direct" ? server.agentPort! : server.edgePort, via });

  describe(`PING amplification, on the agents' ${via === "direct" ? "direct port" : "WebSocket"}`, () => {
    test("a PING of PING_BYTES before any HELLO is answered with a PONG of the same bytes (keepalive works)", async () => {
      const c = await rawConnection(opts());
      try {
        c.send(ping(PING_BYTES, 9));
        expect(await c.until(() => pongs(c).length > 0, WAIT_MS)).toBe(true);
        expect([...pongs(c)[0]!.payload]).toEqual([9, 9, 9, 9]);
        expect(c.closed).toBe(false);
      } finally {
        c.close();
      }
    });

    test("a PING one byte over PING_BYTES before any HELLO: PROTOCOL_ERROR and the close, no PONG", async () => {
      await refusedWithoutEcho(await rawConnection(opts()), ping(PING_BYTES + 1));
    });

    test("a PING of MAX_PAYLOAD (256 KiB) before any HELLO: PROTOCOL_ERROR and the close, nothing echoed", async () => {
      await refusedWithoutEcho(await rawConnection(opts()), ping(MAX_PAYLOAD));
    });

    test("a PING shorter than PING_BYTES, and a PONG of another size, are PROTOCOL_ERRORs too", async () => {
      await refusedWithoutEcho(await rawConnection(opts()), ping(0));
      await refusedWithoutEcho(await rawConnection(opts()), encodeFrame(FrameType.PONG, 0, new Uint8Array(64)));
    });

    test("an oversized PING sent beside the HELLO (held while the HELLO is checked) is not echoed when released", async () => {
      const c = await rawConnection(opts());
      try {
        c.send(hello(), ping(1024));
        expect(await c.until(() => c.closed, WAIT_MS)).toBe(true);
        expect(c.frames.some((f) => f.type === FrameType.READY)).toBe(true);
        expect(refusal(c)?.code).toBe("PROTOCOL_ERROR");
        expect(pongs(c)).toEqual([]);
      } finally {
        c.close();
      }
    });

    test("after READY: a PING of PING_BYTES is answered, an oversized one ends the session", async () => {
      const c = await rawConnection(opts());
      try {
        c.send(hello());
        expect(await c.until(() => c.frames.some((f) => f.type === FrameType.READY), WAIT_MS)).toBe(true);
        c.send(ping(PING_BYTES, 3));
        expect(await c.until(() => pongs(c).length === 1, WAIT_MS)).toBe(true);
        c.send(ping(64 * 1024, 4));
        expect(await c.until(() => c.closed, WAIT_MS)).toBe(true);
        expect(refusal(c)?.code).toBe("PROTOCOL_ERROR");
        expect(pongs(c).map((p) => p.payload.length)).toEqual([PING_BYTES]);
      } finally {
        c.close();
      }
    });
  });
}

describe("PING amplification, on a relay link between nodes", () => {
  let pg: TestPostgres;
  let node: TestServer;
  beforeAll(async () => {
    pg = await startPostgres();
    node = await startServer({ args: ["--database", await pg.newDatabase(), "--node-id", "n1", "--cluster-secret", SECRET] });
  });
  afterAll(async () => {
    await node?.stop();
    await pg?.stop();
  });

  const link = () => rawConnection({ port: node.edgePort, via: "websocket", path: NODE_PATH, headers: { Authorization: nodeAuthorization(SECRET, "n9") } });

  test("a node's PING of PING_BYTES is answered; an oversized one is PROTOCOL_ERROR and the link closes, no PONG", async () => {
    const c = await link();
    try {
      c.send(ping(PING_BYTES, 5));
      expect(await c.until(() => pongs(c).length === 1, WAIT_MS)).toBe(true);
    } finally {
      c.close();
    }
    const bad = await link();
    try {
      bad.send(ping(MAX_PAYLOAD));
      expect(await bad.until(() => bad.closed, WAIT_MS)).toBe(true);
      expect(pongs(bad)).toEqual([]);
      expect(refusal(bad)?.code).toBe("PROTOCOL_ERROR");
    } finally {
      bad.close();
    }
  });
});
