/**
 * Asks the edge where its direct port is (a GET of CONNECT_PATH, wire.ts),
 * before an agent's first connection: with an answer, the agent goes
 * straight there instead of opening a WebSocket only to be sent on by MOVE.
 * Any failure is "no answer" (an older edge, a proxy in the way, a slow
 * network): the agent then opens the WebSocket, which still works and still
 * says MOVE when it should.
 */
import * as v from "valibot";
import { DirectPortAnswer } from "../protocol/messages.ts";

/** How long the question may take; past it the agent opens the WebSocket. */
const ASK_TIMEOUT_MS = 3_000;
/** The answer is a few bytes: anything longer is not one. */
const MAX_ANSWER_BYTES = 1024;

/** The direct port, or undefined when the edge has none or gave no usable answer. `wsUrl`: the agents' WebSocket URL (ws: or wss:). */
export async function askDirectPort(wsUrl: URL, insecure: boolean | undefined): Promise<number | undefined> {
  const url = new URL(wsUrl);
  url.protocol = url.protocol === "wss:" ? "https:" : "http:";
  try {
    const res = await fetch(url, {
      redirect: "manual",
      signal: AbortSignal.timeout(ASK_TIMEOUT_MS),
      tls: { rejectUnauthorized: !insecure },
      headers: { accept: "application/json" },
    });
    if (res.status !== 200 || !res.headers.get("content-type")?.startsWith("application/json")) {
      await res.body?.cancel();
      return undefined;
    }
    const text = await boundedText(res);
    if (text === undefined) return undefined;
    const parsed = v.safeParse(DirectPortAnswer, JSON.parse(text));
    return parsed.success ? (parsed.output.direct_port ?? undefined) : undefined;
  } catch {
    return undefined;
  }
}

/** The body as text, or undefined past MAX_ANSWER_BYTES (read no further). */
async function boundedText(res: Response): Promise<string | undefined> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > MAX_ANSWER_BYTES) {
      await reader.cancel();
      return undefined;
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks).toString("utf8");
}
