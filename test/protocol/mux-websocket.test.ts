/**
 * The mux over a real WebSocket: Bun.serve on the edge side, wrapped the way
 * the edge wraps it (ws.send() -1 = wait for drain, 0 = dropped, fatal), and
 * Bun's client WebSocket on the agent side.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import type { Server, ServerWebSocket } from "bun";
import { parseJsonPayload } from "../../src/protocol/frames.ts";
import { Mux, type MuxOptions, type SendResult } from "../../src/protocol/mux.ts";
import { FrameType, HEADER_LENGTH, MAX_PAYLOAD, WireError } from "../../src/protocol/wire.ts";
import { agentHandlers, newStalled, runCoreScenario } from "./core-scenario.ts";
import { signal, within } from "./support.ts";

const WAIT_MS = 10_000;

interface EdgeSetup {
  options: Omit<MuxOptions, "send" | "role">;
  /** What ws.send() answered, by kind. */
  sends: { sent: number; backpressure: number; dropped: number };
  drains: number;
  mux: ReturnType<typeof signal<Mux>>;
  /** Set in open(), before any message can arrive. */
  edge?: Mux;
  closed: ReturnType<typeof signal<void>>;
  /** Messages the edge received. */
  got: ReturnType<typeof frameWatch>;
}

/** Resolves on the next message of a frame type seen by one end; `see` is called for every message. */
function frameWatch() {
  const waiters: { type: number; resolve(payload: Uint8Array): void }[] = [];
  return {
    see(message: Uint8Array) {
      const i = waiters.findIndex((w) => w.type === message[0]);
      if (i >= 0) waiters.splice(i, 1)[0]!.resolve(message.slice(HEADER_LENGTH));
    },
    next(type: number, what: string): Promise<Uint8Array> {
      return within(new Promise((resolve) => waiters.push({ type, resolve })), WAIT_MS, what);
    },
  };
}

const setups = new Map<string, EdgeSetup>();
let server: Server<{ id: string }>;

beforeAll(() => {
  server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, srv) {
      const id = new URL(req.url).searchParams.get("id") ?? "";
      if (setups.has(id) && srv.upgrade(req, { data: { id } })) return undefined;
      return new Response("not a test connection\n", { status: 400 });
    },
    websocket: {
      perMessageDeflate: false,
      maxPayloadLength: HEADER_LENGTH + MAX_PAYLOAD,
      // small, so a mux that kept sending after -1 would hit the limit and see messages dropped
      backpressureLimit: 256 * 1024,
      idleTimeout: 0,
      sendPings: false,
      open(ws: ServerWebSocket<{ id: string }>) {
        const setup = setups.get(ws.data.id)!;
        const mux = new Mux({
          ...setup.options,
          role: "edge",
          send(frame): SendResult {
            const r = ws.send(frame);
            if (r === -1) {
              setup.sends.backpressure++;
              return "backpressure";
            }
            if (r === 0) {
              setup.sends.dropped++;
              return "closed";
            }
            setup.sends.sent++;
            return "sent";
          },
          onClose(code, message) {
            setup.options.onClose?.(code, message);
            ws.close(1000, code);
          },
        });
        setup.edge = mux;
        setup.mux.resolve(mux);
      },
      message(ws, message) {
        const setup = setups.get(ws.data.id)!;
        if (typeof message === "string") throw new Error("text message on the agent socket");
        setup.got.see(message);
        setup.edge!.receive(message);
      },
      drain(ws) {
        const setup = setups.get(ws.data.id)!;
        setup.drains++;
        setup.edge!.drained();
      },
      close(ws) {
        const setup = setups.get(ws.data.id)!;
        setup.edge!.close(WireError.GOING_AWAY, "socket closed");
        setup.closed.resolve();
      },
    },
  });
});

afterAll(() => {
  server?.stop(true);
});

let nextId = 0;

/** Connects an agent mux to a fresh edge mux through the server. */
async function connect(edge: EdgeSetup["options"], agentOptions: Omit<MuxOptions, "send" | "role">) {
  const id = `c${++nextId}`;
  const setup: EdgeSetup = {
    options: edge,
    sends: { sent: 0, backpressure: 0, dropped: 0 },
    drains: 0,
    mux: signal<Mux>(),
    closed: signal<void>(),
    got: frameWatch(),
  };
  setups.set(id, setup);
  const ws = new WebSocket(`ws://127.0.0.1:${server.port}/?id=${id}`);
  ws.binaryType = "arraybuffer";
  const agentGot = frameWatch();
  const agentSent: Uint8Array[] = [];
  const agentClosed = signal<void>();
  const agent = new Mux({
    ...agentOptions,
    role: "agent",
    send(frame) {
      if (ws.readyState !== WebSocket.OPEN) return "closed";
      if (frame[0] === FrameType.PING) agentSent.push(frame.slice());
      ws.send(frame);
      return "sent";
    },
  });
  ws.onmessage = (e) => {
    const message = new Uint8Array(e.data as ArrayBuffer);
    agentGot.see(message);
    agent.receive(message);
  };
  ws.onclose = () => {
    agent.close(WireError.GOING_AWAY, "socket closed");
    agentClosed.resolve();
  };
  const opened = signal<void>();
  ws.onopen = () => opened.resolve();
  await within(opened.promise, WAIT_MS, "the WebSocket to open");
  const edgeMux = await within(setup.mux.promise, WAIT_MS, "the edge to accept the WebSocket");
  return {
    edge: edgeMux,
    agent,
    ws,
    setup,
    agentGot,
    /** PING frames the agent sent. */
    agentSent,
    agentClosed: agentClosed.promise,
    async [Symbol.asyncDispose]() {
      if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) ws.close();
      await within(agentClosed.promise, WAIT_MS, "the client socket to close");
      await within(setup.closed.promise, WAIT_MS, "the server socket to close");
      setups.delete(id);
    },
  };
}

for (const variant of [
  { name: "the default window", initialWindow: undefined, mustPushBack: false },
  // the stalled stream alone sends a whole window in one burst: more than the kernel takes at once
  { name: "a 4 MiB window, far past the 256 KiB send limit", initialWindow: 4 * 1024 * 1024, mustPushBack: true },
]) {
  test(`the core scenario with ${variant.name}: a stalled stream, a 10 MiB transfer checked by SHA-256, an upload and echoes`, async () => {
    const stalled = newStalled();
    await using conn = await connect(
      { initialWindow: variant.initialWindow },
      { initialWindow: variant.initialWindow, onStream: agentHandlers(stalled) },
    );
    await runCoreScenario(conn.edge, conn.agent, stalled, {
      initialWindow: conn.edge.initialWindow,
      bigSize: 10 * 1024 * 1024,
      upSize: 2 * 1024 * 1024,
      echoStreams: 5,
      echoSize: 200_000,
      timeoutMs: 15_000,
    });
    // nothing was ever dropped: the edge stopped at -1 and went on at drain
    expect(conn.setup.sends.dropped).toBe(0);
    if (variant.mustPushBack) {
      expect(conn.setup.sends.backpressure).toBeGreaterThan(0);
      expect(conn.setup.drains).toBeGreaterThan(0);
    }
    expect(conn.edge.closed).toBe(false);
    expect(conn.agent.closed).toBe(false);
  }, 30_000);
}

test("a PING from either end comes back as a PONG with the same payload", async () => {
  await using conn = await connect({}, {});
  const pongAtAgent = conn.agentGot.next(FrameType.PONG, "the edge's PONG");
  conn.agent.ping();
  expect(await pongAtAgent).toEqual(conn.agentSent[0]!.subarray(HEADER_LENGTH));

  const pingAtAgent = conn.agentGot.next(FrameType.PING, "the edge's PING");
  const pongAtEdge = conn.setup.got.next(FrameType.PONG, "the agent's PONG");
  conn.edge.ping();
  expect(await pongAtEdge).toEqual(await pingAtAgent);
});

test("a malformed frame from the agent ends the session with PROTOCOL_ERROR at both ends", async () => {
  const edgeClose = signal<string>();
  const refusal = signal<unknown>();
  await using conn = await connect(
    { onClose: (code) => edgeClose.resolve(code) },
    {
      onStream: () => {},
      onControl: (type, payload) => type === FrameType.ERROR && refusal.resolve(parseJsonPayload(payload, "ERROR")),
    },
  );
  const stream = conn.edge.open({ kind: "tcp" });
  const reset = signal<string>();
  stream.onReset = (code) => reset.resolve(code);
  // a WINDOW with a 3-byte payload
  conn.ws.send(new Uint8Array([FrameType.WINDOW, 0, 0, 0, stream.id, 0, 1, 0]));
  expect(await within(edgeClose.promise, WAIT_MS, "the edge mux to close")).toBe(WireError.PROTOCOL_ERROR);
  expect(await within(reset.promise, WAIT_MS, "the edge's open stream to reset")).toBe(WireError.PROTOCOL_ERROR);
  const body = (await within(refusal.promise, WAIT_MS, "the ERROR frame at the agent")) as { code: string };
  expect(body.code).toBe(WireError.PROTOCOL_ERROR);
  await within(conn.agentClosed, WAIT_MS, "the edge to close the socket");
  expect(conn.agent.closed).toBe(true);
});
