/**
 * Replay: a captured request sent again to its tunnel's local service,
 * as it was or edited, by the very code that serves visitors
 * (serveStream), over a pair of muxes joined in memory instead of the
 * edge. So the tunnel's Host rule, its https target and the agent's own
 * HTTP client all apply as they do to a visitor, and the replay is
 * captured like one, as a new capture that names its original.
 */
import { settles } from "../../runtime/settles.ts";
import { isRefusal, parseRequestHead } from "../../http/request-head.ts";
import type { HeaderList, OpenMeta } from "../../protocol/messages.ts";
import { Mux, type Stream } from "../../protocol/mux.ts";
import { readOpenMeta } from "../../protocol/messages.ts";
import type { AgentOutput, TunnelView } from "../output.ts";
import { serveStream } from "../serve-stream.ts";
import type { Capture } from "./capture.ts";
import { badRequest, InspectorError } from "./errors.ts";
import { MAX_BODY_BYTES, REPLAY_HEAD_TIMEOUT_MS } from "./limits.ts";
import type { CaptureStore } from "./store.ts";
import type { RequestTaps } from "./tap.ts";

export interface ReplayEdits {
  method?: string;
  path?: string;
  /** A list replaces the captured headers; an object sets the names it gives (null removes one). */
  headers?: HeaderList | Record<string, string | null>;
  body?: Uint8Array;
}

/** How long a replay's API call waits, after the response head, for the body to finish. */
const BODY_GRACE_MS = 2_000;

/** A replay's requests are not the visitors': nothing of them goes to the agent's printed log. */
const QUIET: AgentOutput = { ready() {}, request() {}, connection() {}, reconnecting() {}, refused() {} };

/**
 * Fields the replay sets itself: the body goes whole, with its length as it
 * now is (a captured chunked body was kept decoded), and nobody waits to
 * decide whether to send it (Expect).
 */
const OWN_FIELDS = new Set(["content-length", "transfer-encoding", "expect"]);
/** Methods whose requests go without a Content-Length when their body is empty, as clients send them. */
const BODILESS = new Set(["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"]);

/** The request a replay sends: the original's head with the edits applied, as head text, and its body. */
export function replayRequest(original: Capture, edits: ReplayEdits): { head: string; body: Uint8Array } {
  if (original.kind === "ws") throw new InspectorError("NOT_REPLAYABLE", "a WebSocket cannot be replayed");
  // the server's traffic policies answered it: its headers and body never came here
  if (original.answeredAtEdge) throw new InspectorError("NOT_REPLAYABLE", "the server's traffic policy answered this request: it never reached this agent, so its headers and body are not known");
  if (edits.body === undefined && original.requestBody.truncated) {
    throw new InspectorError("NOT_REPLAYABLE", `the request body was captured only up to ${MAX_BODY_BYTES} bytes; send a body with the replay to replace it`);
  }
  const body = edits.body ?? original.requestBody.bytes();
  let headers: HeaderList;
  if (Array.isArray(edits.headers)) headers = edits.headers.map(([n, v]) => [n, v]);
  else {
    headers = original.head.headers.map(([n, v]) => [n, v]);
    for (const [name, value] of Object.entries(edits.headers ?? {})) {
      const lower = name.toLowerCase();
      // an edited field keeps its place (the first of its name); a new one goes last
      const at = headers.findIndex(([n]) => n.toLowerCase() === lower);
      headers = headers.filter(([n]) => n.toLowerCase() !== lower);
      if (value !== null) headers.splice(at < 0 ? headers.length : at, 0, [name, value]);
    }
  }
  headers = headers.filter(([n]) => !OWN_FIELDS.has(n.toLowerCase()));
  const method = edits.method ?? original.head.method;
  if (body.byteLength > 0 || !BODILESS.has(method)) headers.push(["Content-Length", String(body.byteLength)]);
  let head = `${method} ${edits.path ?? original.head.path} HTTP/1.1\r\n`;
  for (const [name, value] of headers) head += `${name}: ${value}\r\n`;
  // what the agent could not send (edits that took the Host away, say) is the caller's to fix, said now
  const refused = parseRequestHead(head.slice(0, -2));
  if (isRefusal(refused)) throw badRequest(`the replayed request cannot be sent: ${refused.why}`);
  return { head: `${head}\r\n`, body };
}

/**
 * Sends the request to `tunnel`'s local service and returns its capture once
 * the response is complete, or BODY_GRACE_MS after its head (a long stream
 * goes on being captured), or when it failed.
 */
export async function replay(store: CaptureStore, original: Capture, tunnel: TunnelView, edits: ReplayEdits = {}): Promise<Capture> {
  const { head, body } = replayRequest(original, edits);
  let capture: Capture | undefined;
  // captured even when the tunnel itself has inspect off: the user asked for this one
  const taps: RequestTaps = { begin: (t, request) => (capture = store.begin({ ...t, inspect: true }, request, original.id)) };
  const pair = memoryPair((stream) => serveStream(stream, readOpenMeta(stream.meta)!, tunnel, QUIET, taps));
  const meta: OpenMeta = { tunnel: tunnel.id, kind: "h1", remote: "replay", head };
  const stream = pair.edge.open(meta, body.byteLength === 0);
  if (body.byteLength > 0) stream.end(body);
  // a response longer than its capture is read no further: the capture is complete as far as it goes
  const { answered, over } = drive(stream, () => capture?.done());
  void over.then(() => queueMicrotask(pair.close));
  await answered;
  if (!capture) throw new Error("the replay was not captured");
  return capture;
}

/**
 * Reads the replay's response as the edge would (taking its bytes, returning
 * credit). `answered`: the response is complete, or BODY_GRACE_MS passed
 * after its head, or it failed; `over`: the stream is done.
 */
/** Bytes of head and chunk framing a response's first MAX_BODY_BYTES of body may come with, and more. */
const FRAMING_SLACK = 256 * 1024;

function drive(stream: Stream, onFull: () => void): { answered: Promise<void>; over: Promise<void> } {
  const answered = settles<void>();
  const over = settles<void>();
  let received = 0;
  const headTimer = setTimeout(() => stream.reset(), REPLAY_HEAD_TIMEOUT_MS);
  let graceTimer: ReturnType<typeof setTimeout> | undefined;
  const finish = () => {
    clearTimeout(headTimer);
    clearTimeout(graceTimer);
    answered.resolve();
    over.resolve();
  };
  stream.onReply = () => {
    clearTimeout(headTimer);
    graceTimer = setTimeout(answered.resolve, BODY_GRACE_MS);
  };
  stream.onData = (chunk) => {
    received += chunk.byteLength;
    stream.consumed(chunk.byteLength);
    // its capture is full: an endless stream (server-sent events, say) would otherwise be read for ever;
    // the bytes are the response's as sent (head and chunk sizes too), so a little past the cap
    // is sure to be past it in body bytes, which the capture then marks truncated
    if (received > MAX_BODY_BYTES + FRAMING_SLACK) {
      onFull();
      stream.reset();
    }
  };
  stream.onEnd = finish;
  stream.whenReset(finish);
  return { answered: answered.promise, over: over.promise };
}

/**
 * An edge mux and an agent mux joined in memory. Messages are copied (a mux
 * reuses its send buffer) and delivered on a later microtask, as a socket
 * would, never inside the sender's call.
 */
function memoryPair(onStream: (stream: Stream) => void): { edge: Mux; close: () => void } {
  const deliver = (to: () => Mux, message: Uint8Array) => {
    const copy = message.slice();
    queueMicrotask(() => to().receive(copy));
    return "sent" as const;
  };
  const agent: Mux = new Mux({ role: "agent", send: (m) => deliver(() => edge, m), onStream });
  const edge: Mux = new Mux({ role: "edge", send: (m) => deliver(() => agent, m) });
  return {
    edge,
    close: () => {
      edge.close();
      agent.close();
    },
  };
}

