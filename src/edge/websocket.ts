/**
 * WebSocket passthrough: the visitor's upgrade becomes a "ws" stream; the
 * agent opens its own WebSocket to the local service and both sides relay
 * whole messages (text and binary) as records on the stream.
 */
import type { Server, ServerWebSocket } from "bun";
import * as v from "valibot";
import { WsReply } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { encodeCloseRecord, encodeRecord, MAX_WS_MESSAGE, RecordDecoder } from "../protocol/ws-records.ts";
import { refusedUpgrade, requestMeta, type ForwardContext } from "./http.ts";
import { badGatewayPage } from "./pages.ts";
import { awaitReply, goneSinceReply } from "./replies.ts";
import type { Tunnel } from "./registry.ts";

/** A visitor that sends faster than the tunnel carries is cut off past this much queued (one largest message and then some). */
const MAX_QUEUED_BYTES = MAX_WS_MESSAGE + 4 * 1024 * 1024;

export interface VisitorSocketData {
  kind: "visitor";
  /** The connection's key in the connection budget, released when the WebSocket closes. */
  connKey?: string;
  stream: Stream;
  tunnel: Tunnel;
  early: (string | Uint8Array)[];
  ended: boolean;
  /** Credit withheld while the visitor's socket is backed up. */
  owed: number;
  backedUp: boolean;
  /** How the local service closed, to close the visitor the same way. */
  closeFromAgent?: { code: number; reason: string };
  ws?: ServerWebSocket<VisitorSocketData>;
}

/** RFC 6455 §4.1: a subprotocol is a token, one of the visitor's Sec-WebSocket-Protocol list. */
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

/**
 * Whether `chosen` is a subprotocol the visitor offered. Anything else would
 * fail the visitor's handshake anyway, and a value that is no token (a
 * character past U+00FF, NUL, CR, LF) makes server.upgrade throw.
 */
function offered(req: Request, chosen: string): boolean {
  if (!TOKEN.test(chosen)) return false;
  const list = req.headers.get("sec-websocket-protocol");
  return list !== null && list.split(",").some((p) => p.trim() === chosen);
}

function closeVisitor(data: VisitorSocketData): void {
  const c = data.closeFromAgent;
  data.ws?.close(c?.code ?? 1000, c?.reason ?? "");
}

export async function upgradeWebSocket(
  req: Request,
  url: URL,
  server: Server<VisitorSocketData>,
  tunnel: Tunnel,
  ctx: ForwardContext,
): Promise<Response | undefined> {
  const meta = requestMeta(req, url, tunnel, ctx, "ws");
  const stream = tunnel.agent?.openStream(meta);
  if (!stream) return badGatewayPage(ctx.host, "its agent is reconnecting or busy");
  let protocol: string | undefined;
  try {
    const raw = await awaitReply(stream, tunnel.responseTimeoutMs ?? ctx.responseTimeoutMs, req);
    if (typeof raw === "object" && raw !== null && "status" in raw) return refusedUpgrade(stream, raw, tunnel, ctx.host);
    const reply = v.safeParse(WsReply, raw);
    protocol = reply.success ? reply.output.protocol : undefined;
  } catch (err) {
    return badGatewayPage(ctx.host, (err as Error).message);
  }
  if (protocol && !offered(req, protocol)) {
    stream.reset();
    return badGatewayPage(ctx.host, "its local service chose a subprotocol the visitor did not offer");
  }
  const data: VisitorSocketData = { kind: "visitor", connKey: ctx.connKey, stream, tunnel, early: [], ended: false, owed: 0, backedUp: false };
  const decoder = new RecordDecoder();
  stream.onData = (chunk) => {
    tunnel.countOut(chunk.byteLength);
    try {
      decoder.push(
        chunk,
        (message) => {
          if (!data.ws) return void data.early.push(message);
          if (data.ws.send(message) === -1) data.backedUp = true;
        },
        (code, reason) => (data.closeFromAgent = { code, reason }),
      );
    } catch {
      stream.reset();
      data.ws?.close(1009, "message too big");
      return;
    }
    // credit returns only while the visitor keeps up; a backed-up visitor holds it until drain
    if (data.backedUp) data.owed += chunk.byteLength;
    else stream.consumed(chunk.byteLength);
  };
  stream.onEnd = () => {
    data.ended = true;
    closeVisitor(data);
  };
  stream.whenReset(() => data.ws?.close(1011, "tunnel closed"));
  // reset with the REPLY, or by the edge for early data that is no valid record: no upgrade then
  const gone = goneSinceReply(stream);
  if (gone) return badGatewayPage(ctx.host, gone);
  const ok = server.upgrade(req, { data, headers: protocol ? { "Sec-WebSocket-Protocol": protocol } : {} });
  if (!ok) {
    stream.reset();
    return new Response("WebSocket upgrade failed", { status: 400 });
  }
  return undefined;
}

export const visitorSocket = {
  open(ws: ServerWebSocket<VisitorSocketData>) {
    ws.data.ws = ws;
    for (const m of ws.data.early) ws.send(m);
    ws.data.early = [];
    if (ws.data.ended) closeVisitor(ws.data);
    // reset between the upgrade and now, when its listener had no socket to close
    else if (ws.data.stream.resetCode !== undefined) ws.close(1011, "tunnel closed");
  },
  drain(ws: ServerWebSocket<VisitorSocketData>) {
    const d = ws.data;
    d.backedUp = false;
    d.stream.consumed(d.owed);
    d.owed = 0;
  },
  message(ws: ServerWebSocket<VisitorSocketData>, message: string | Buffer) {
    const { stream, tunnel } = ws.data;
    const record = encodeRecord(typeof message === "string" ? message : new Uint8Array(message));
    tunnel.countIn(record.byteLength);
    stream.write(record);
    if (stream.pendingBytes > MAX_QUEUED_BYTES) ws.close(1013, "tunnel is too slow for this sender");
  },
  close(ws: ServerWebSocket<VisitorSocketData>, code: number, reason: string) {
    const { stream } = ws.data;
    if (stream.isClosed) return;
    // the agent closes the local WebSocket with the same code, then ends its side
    stream.write(encodeCloseRecord(code, reason));
    stream.end();
  },
};
