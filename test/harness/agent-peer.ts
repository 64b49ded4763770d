/**
 * A raw peer at the agents' WebSocket endpoint, for tests that play a
 * (hostile or hand-written) agent: it sends the messages given and collects
 * the frames the edge answers with until the edge closes, or until `waitMs`.
 */
import { decodeFrames, type Frame } from "../../src/protocol/frames.ts";
import { CONNECT_PATH, FrameType } from "../../src/protocol/wire.ts";
import { within } from "./wait.ts";

export async function agentWebSocketPeer(edgePort: number, messages: (string | Uint8Array)[], waitMs = 5_000): Promise<{ frames: Frame[]; closed: boolean }> {
  const ws = new WebSocket(`ws://127.0.0.1:${edgePort}${CONNECT_PATH}`);
  ws.binaryType = "arraybuffer";
  const frames: Frame[] = [];
  const closed = new Promise<boolean>((resolve) => {
    ws.onclose = () => resolve(true);
    setTimeout(() => resolve(false), waitMs);
  });
  ws.onmessage = (ev) => {
    if (typeof ev.data !== "string") decodeFrames(new Uint8Array(ev.data as ArrayBuffer).slice(), (f) => frames.push(f));
  };
  await within(
    new Promise((resolve, reject) => {
      ws.onopen = resolve;
      ws.onerror = reject;
    }),
    waitMs,
    "the WebSocket to open",
  );
  for (const m of messages) ws.send(m);
  const wasClosed = await closed;
  if (!wasClosed) ws.close();
  return { frames, closed: wasClosed };
}

/** The first ERROR frame's JSON ({code, message}) among `frames`, if the edge sent one. */
export function refusalIn(frames: Frame[]): { code: string; message: string; retry_after?: number } | undefined {
  const error = frames.find((f) => f.type === FrameType.ERROR);
  return error && JSON.parse(new TextDecoder().decode(error.payload));
}
