/**
 * HTTP ingress: a visitor's request becomes a stream to the tunnel's agent.
 * The request head travels in OPEN, bodies stream both ways with credit,
 * the response head comes back in REPLY. No body is ever held whole.
 */
import { readResponseHead, type OpenMeta, type RelayedMeta, type ResponseHead } from "../protocol/messages.ts";
import { INITIAL_WINDOW } from "../protocol/wire.ts";
import type { Stream } from "../protocol/mux.ts";
import { collect, pipeInto, readableFrom } from "../protocol/pipes.ts";
import { headerList, toHeaders } from "../http/header-list.ts";
import { log } from "../log.ts";
import { USER_EMAIL_HEADER } from "../validate/access.ts";
import type { Passed } from "./access/policy.ts";
import { badGatewayPage, slowServicePage } from "./pages.ts";
import { awaitReply, goneSinceReply, ResponseTimeout } from "./replies.ts";
import type { Tunnel } from "./registry.ts";

/** Request headers the edge sets itself. */
const EDGE_SET = new Set(["x-forwarded-proto", "x-forwarded-host", "x-burrow-skip-warning", USER_EMAIL_HEADER]);

export interface ForwardContext {
  remoteIp: string;
  remotePort: number;
  secure: boolean;
  host: string;
  responseTimeoutMs: number;
  /** The longest an agent may ask the edge to wait for its service (--max-response-timeout). */
  maxResponseTimeoutMs: number;
  /**
   * Called once the response is complete (its last byte handed to Bun): the
   * connection then becomes idle and the idle timeout applies again.
   */
  finished?: () => void;
  /** The visitor connection's key in the connection budget (its WebSocket, if it becomes one, ends it). */
  connKey?: string;
  /** Who the tunnel's access policy let through (the signed-in email); undefined without a policy. */
  passed?: Passed;
  /** The visitor's address as the edge judged it (a trusted proxy's client, or the peer): told to a relay's far node. */
  client?: string;
  /** Another node's tunnel: this visitor is due the browser warning, which that node shows after its access rules. */
  warn?: boolean;
}

export function requestMeta(req: Request, url: URL, tunnel: Tunnel, ctx: ForwardContext, kind: "http" | "ws"): OpenMeta {
  const headers = headerList(req.headers, EDGE_SET);
  const forwardedFor = req.headers.get("x-forwarded-for");
  const xff = forwardedFor ? `${forwardedFor}, ${ctx.remoteIp}` : ctx.remoteIp;
  const i = headers.findIndex(([n]) => n === "x-forwarded-for");
  if (i >= 0) headers.splice(i, 1);
  headers.push(["x-forwarded-for", xff], ["x-forwarded-proto", ctx.secure ? "https" : "http"], ["x-forwarded-host", ctx.host]);
  if (kind === "ws") {
    // the agent's own WebSocket client negotiates these with the local service
    for (const name of ["sec-websocket-key", "sec-websocket-version", "sec-websocket-extensions"]) {
      const j = headers.findIndex(([n]) => n === name);
      if (j >= 0) headers.splice(j, 1);
    }
  }
  tunnel.access?.rewriteRequest(headers, ctx.passed);
  const body = kind === "http" && req.body !== null;
  if (!body) dropLength(headers);
  const meta: OpenMeta = {
    tunnel: tunnel.id,
    kind,
    remote: `${ctx.remoteIp}:${ctx.remotePort}`,
    head: { method: req.method, path: url.pathname + url.search, headers },
    body,
  };
  // another node's tunnel: its access rules are applied there, on the visitor's address as judged here
  if (tunnel.relayed) {
    (meta as RelayedMeta).client = ctx.client;
    if (ctx.warn) (meta as RelayedMeta).warn = true;
  }
  return meta;
}

/**
 * Bun gives no body for a GET, HEAD or TRACE, whatever its Content-Length
 * says: a length other than 0 left in a bodyless head would make the local
 * service wait for bytes that never come, and take them from the next
 * request on the agent's kept-alive connection. (Transfer-Encoding is
 * hop-by-hop and never forwarded.)
 */
function dropLength(headers: [string, string][]): void {
  for (let i = headers.length - 1; i >= 0; i--) {
    const [name, value] = headers[i]!;
    if (name === "content-length" && value.trim() !== "0") headers.splice(i, 1);
  }
}

const NO_BODY_STATUS = new Set([101, 204, 205, 304]);
/**
 * Bun.serve drops a Content-Length set on a streamed body and sends it
 * chunked. A fixed-size body up to this size is collected first so the
 * visitor sees its length; the credit window lets this much be in flight
 * anyway, so no more memory is held than when streaming.
 */
const COLLECT_LIMIT = INITIAL_WINDOW;

function declaredLength(headers: [string, string][]): number | undefined {
  const values = headers.filter(([n]) => n === "content-length").map(([, v]) => v.trim());
  if (values.length !== 1 || !/^[0-9]{1,15}$/.test(values[0]!)) return undefined;
  return Number(values[0]);
}

/**
 * The body of a HEAD answer whose head gave no length. Bun writes
 * `Content-Length: 0` for a HEAD answer with no body, or one whose body is
 * done at once, which tells a client that sizes files by HEAD that they are
 * empty; a body that ends a moment later makes it send the head as the
 * service did, without a length (and, HEAD being HEAD, no body).
 */
function lengthlessHeadBody(): ReadableStream<Uint8Array> {
  return new ReadableStream({
    async pull(controller) {
      await new Promise((resolve) => setImmediate(resolve)); // after Bun has written the head
      controller.close();
    },
  });
}

/**
 * The answer to a WebSocket upgrade that its tunnel refused: a REPLY with a
 * status instead of a subprotocol, and a body of the length it declares.
 * Another node sends it when the tunnel's access rules there turn the
 * visitor away (cluster/relay.ts), so the visitor gets the 401 or 403 it
 * would get on that node, not a 502. Only a final status that is no success
 * is taken; anything else, or a body of no declared length past
 * COLLECT_LIMIT, is the tunnel's fault (the 502 page).
 */
export async function refusedUpgrade(stream: Stream, raw: unknown, tunnel: Tunnel, host: string): Promise<Response> {
  const head = readResponseHead(raw);
  const length = typeof head === "string" ? undefined : declaredLength(head.headers);
  if (typeof head === "string" || head.status < 300 || length === undefined || length > COLLECT_LIMIT) {
    stream.reset();
    return badGatewayPage(host, typeof head === "string" ? head : "its agent refused the WebSocket with an answer the edge cannot pass on");
  }
  try {
    const bytes = await collect(stream, length, (n) => tunnel.countOut(n));
    return new Response(bytes, { status: head.status, headers: toHeaders(head.headers) });
  } catch {
    return badGatewayPage(host, "the tunnel's connection closed");
  }
}

export async function forwardHttp(req: Request, url: URL, tunnel: Tunnel, ctx: ForwardContext): Promise<Response> {
  let streaming = false;
  try {
    const res = await respond(req, url, tunnel, ctx, () => (streaming = true));
    return res;
  } finally {
    if (!streaming) ctx.finished?.();
  }
}

async function respond(req: Request, url: URL, tunnel: Tunnel, ctx: ForwardContext, streams: () => void): Promise<Response> {
  const meta = requestMeta(req, url, tunnel, ctx, "http");
  // a request without a body is one OPEN frame that also half-closes the stream
  const stream = tunnel.agent?.openStream(meta, !req.body);
  if (!stream) return badGatewayPage(ctx.host, "its agent is reconnecting or busy");
  const openBytes = stream.metaBytes;
  tunnel.countIn(openBytes);
  if (req.body) void pipeInto(req.body, stream, (n) => tunnel.countIn(n));

  let head: ResponseHead;
  try {
    // the visitor leaving while it waits resets the stream; after the head, the body's cancel does
    const parsed = readResponseHead(await awaitReply(stream, tunnel.responseTimeoutMs ?? ctx.responseTimeoutMs, req));
    if (typeof parsed === "string") {
      stream.reset();
      return badGatewayPage(ctx.host, parsed);
    }
    head = tunnel.access ? { status: parsed.status, headers: tunnel.access.rewriteResponse(parsed.headers) } : parsed;
  } catch (err) {
    log.info("tunnel request failed", { tunnel: ctx.host, path: url.pathname, err: (err as Error).message });
    if (err instanceof ResponseTimeout) return slowServicePage(ctx.host, Math.round(err.timeoutMs / 1000), Math.round(ctx.maxResponseTimeoutMs / 1000));
    return badGatewayPage(ctx.host, (err as Error).message);
  }
  tunnel.countOut(stream.metaBytes - openBytes);
  // a reset in the same message as the REPLY: nothing of the response is coming, say so before the head
  const gone = goneSinceReply(stream);
  if (gone) return badGatewayPage(ctx.host, gone);
  const bodyless = req.method === "HEAD" || NO_BODY_STATUS.has(head.status);
  if (bodyless) {
    stream.onData = (chunk) => stream.consumed(chunk.byteLength);
    if (req.method === "HEAD" && !NO_BODY_STATUS.has(head.status) && declaredLength(head.headers) === undefined) {
      return new Response(lengthlessHeadBody(), { status: head.status, headers: toHeaders(head.headers) });
    }
    return new Response(null, { status: head.status, headers: toHeaders(head.headers) });
  }
  const length = declaredLength(head.headers);
  if (length !== undefined && length <= COLLECT_LIMIT) {
    try {
      const bytes = await collect(stream, length, (n) => tunnel.countOut(n));
      return new Response(bytes, { status: head.status, headers: toHeaders(head.headers) });
    } catch (err) {
      log.info("tunnel request failed", { tunnel: ctx.host, path: url.pathname, err: (err as Error).message });
      return badGatewayPage(ctx.host, "the tunnel's connection closed");
    }
  }
  streams();
  const body = readableFrom(stream, (n) => tunnel.countOut(n), "reset", ctx.finished);
  return new Response(body, { status: head.status, headers: toHeaders(head.headers) });
}

