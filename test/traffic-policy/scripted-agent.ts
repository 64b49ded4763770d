/**
 * An agent scripted frame by frame, for the tests of what the edge sends
 * an agent of a policy's notes (passed-notes-wire, derived-notes-wire):
 * its HELLO as the test writes it, each request through its tunnel
 * answered by hand, and the notes the edge sent it read off the wire.
 */
import { expect } from "bun:test";
import { connect } from "node:net";
import { encodeFrame, jsonPayload } from "../../src/protocol/frames.ts";
import { FrameType, PROTOCOL_VERSION } from "../../src/protocol/wire.ts";
import { hostileWebSocket, type HostilePeer } from "../harness/fuzz.ts";

const WAIT_MS = 10_000;

export interface ScriptedAgent extends Disposable {
  peer: HostilePeer;
  /** The edge's port the agent and its visitors reach. */
  edgePort: number;
  /** The tunnel's Host, with the edge's port. */
  host: string;
  /** The tunnel's id. */
  tunnel: string;
  /** The tunnel as READY granted it. */
  granted: Record<string, unknown>;
}

/** An agent by hand, past its handshake, with `policy` as its one http tunnel's own; `says`: what else its HELLO says (policy_passed, derived_notes...). */
export async function scriptedAgent(edgePort: number, token: string, policy: string, says: Record<string, boolean> = {}): Promise<ScriptedAgent> {
  const peer = await hostileWebSocket(edgePort, WAIT_MS);
  peer.send(encodeFrame(FrameType.HELLO, 0, jsonPayload({ version: PROTOCOL_VERSION, token, tunnels: [{ protocol: "http", policy }], ...says })));
  const ready = () => peer.frames.find((f) => f.type === FrameType.READY || f.type === FrameType.ERROR);
  if (!(await peer.until(() => ready() !== undefined, WAIT_MS))) {
    peer.close();
    throw new Error("no READY for the scripted agent");
  }
  const said = JSON.parse(new TextDecoder().decode(ready()!.payload));
  if (ready()!.type !== FrameType.READY) {
    peer.close();
    throw new Error(`refused: ${JSON.stringify(said)}`);
  }
  const granted = said.tunnels[0];
  return { peer, edgePort, host: `${granted.subdomain}.localhost:${edgePort}`, tunnel: granted.id, granted, [Symbol.dispose]: () => peer.close() };
}

/**
 * `path` through the tunnel, answered "200 ok" by the scripted agent once
 * the request's head came; resolves with the visitor's answer, the stream
 * that carried it and the request's head as the agent got it.
 */
export async function scriptedVisit(agent: ScriptedAgent, path: string): Promise<{ answer: string; stream: number; head: string }> {
  const opens = () => agent.peer.frames.filter((f) => f.type === FrameType.OPEN);
  const opened = opens().length;
  const socket = connect(agent.edgePort, "127.0.0.1");
  try {
    let answer = "";
    const done = new Promise<void>((resolve) => {
      socket.on("data", (b: Buffer) => {
        answer += b.toString("latin1");
        if (answer.endsWith("ok")) resolve();
      });
      socket.on("close", () => resolve());
    });
    socket.on("error", () => {});
    socket.write(`GET ${path} HTTP/1.1\r\nHost: ${agent.host}\r\nConnection: close\r\n\r\n`);
    expect(await agent.peer.until(() => opens().length > opened, WAIT_MS)).toBe(true);
    const open = opens()[opened]!;
    const stream = open.stream;
    const head = () => new TextDecoder().decode(open.payload) + agent.peer.frames.filter((f) => f.type === FrameType.DATA && f.stream === stream).map((f) => new TextDecoder().decode(f.payload)).join("");
    expect(await agent.peer.until(() => head().includes("\r\n\r\n") || head().includes("\\r\\n\\r\\n"), WAIT_MS)).toBe(true);
    agent.peer.send(Buffer.concat([encodeFrame(FrameType.REPLY, stream, jsonPayload({})), encodeFrame(FrameType.DATA, stream, new TextEncoder().encode("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"), true)]));
    await done;
    return { answer, stream, head: head() };
  } finally {
    socket.destroy();
  }
}

/** A PING's PONG: everything the edge queued before it has been received. */
export async function roundTrip(peer: HostilePeer): Promise<void> {
  const pongs = () => peer.frames.filter((f) => f.type === FrameType.PONG).length;
  const before = pongs();
  peer.send(encodeFrame(FrameType.PING, 0, new Uint8Array([1, 2, 3, 4])));
  expect(await peer.until(() => pongs() > before, WAIT_MS)).toBe(true);
}

/** The POLICY_PASSED notes the edge sent the agent, in order. */
export const passedNotes = (peer: HostilePeer) => peer.frames.filter((f) => f.type === FrameType.POLICY_PASSED).map((f) => JSON.parse(new TextDecoder().decode(f.payload)));
