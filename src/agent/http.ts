/**
 * The agent's side of an http stream: the request goes to the local service,
 * the response head returns in REPLY and the body streams back with credit.
 * Plain-http services get the agent's own HTTP/1.1 client over kept-alive
 * connections (local-http/); https ones get fetch.
 */
import { isFinalStatus, type OpenMeta } from "../protocol/messages.ts";
import type { Stream } from "../protocol/mux.ts";
import { pipeInto, readableFrom } from "../protocol/pipes.ts";
import { MAX_DATA_PAYLOAD, WireError } from "../protocol/wire.ts";
import { headerList, toHeaders } from "../http/header-list.ts";
import { forwardRequest } from "./local-http/exchange.ts";
import { tapReadable, type ExchangeTap } from "./inspector/tap.ts";
import { ConnectionPool } from "./local-http/pool.ts";
import { serialiseRequest } from "./local-http/request.ts";
import type { LocalTarget } from "./local-target.ts";

export type { LocalTarget };


export interface RequestLog {
  (line: { method: string; path: string; status: number | string; ms: number }): void;
}

export const localAuthority = (t: LocalTarget) => `${t.host.includes(":") ? `[${t.host}]` : t.host}:${t.port}`;

/** Connections to plain-http local services, shared by all streams of the agent. */
let sharedPool: ConnectionPool | undefined;

/**
 * `pool`: where connections come from; the agent's shared pool unless a test brings its own.
 * `tap`: the inspector's copy of this request, when it is captured.
 */
export async function serveHttpStream(stream: Stream, meta: OpenMeta, target: LocalTarget, logRequest: RequestLog, pool?: ConnectionPool, tap?: ExchangeTap): Promise<void> {
  const started = performance.now();
  const head = meta.head!;
  // every way a request ends short (no connection, a broken response, the visitor gone) resets the stream
  if (tap) stream.whenReset((code) => tap.failed(resetReason(code)));
  const log = (status: number | string) => logRequest({ method: head.method, path: head.path, status: shown(status), ms: performance.now() - started });
  const fail = (why: string | Error) => {
    const reason = typeof why === "string" ? why : describeLocalError(why);
    stream.reset(`${WireError.UPSTREAM_FAILED} ${reason}`);
    log(`502 (${reason})`);
  };
  // https to the local service needs TLS, which fetch brings; the agent's own client speaks plain
  // HTTP/1.1 only, at a fraction of fetch's cost per request
  if (target.tls) return serveWithFetch(stream, meta, target, log, fail, tap);
  const override = target.hostHeader === "rewrite" ? localAuthority(target) : target.hostHeader;
  const request = serialiseRequest(head, meta.body === true, { override, fallback: localAuthority(target) });
  if (typeof request === "string") return fail(request);
  await forwardRequest(stream, request, target, pool ?? (sharedPool ??= new ConnectionPool()), {
    responded: log,
    failed: fail,
    cancelled: () => log("cancelled"),
  }, tap);
}

/** Through fetch: no redirects followed, bodies not decompressed, self-signed certificates accepted. */
async function serveWithFetch(
  stream: Stream,
  meta: OpenMeta,
  target: LocalTarget,
  log: (status: number | string) => void,
  fail: (why: Error) => void,
  tap?: ExchangeTap,
): Promise<void> {
  const head = meta.head!;
  const headers = toHeaders(head.headers);
  if (target.hostHeader === "rewrite") headers.set("host", localAuthority(target));
  else if (target.hostHeader) headers.set("host", target.hostHeader);
  // fetch would add its own Accept-Encoding; the visitor asked for none, so none is what they get
  if (!headers.has("accept-encoding")) headers.set("accept-encoding", "identity");
  let body = meta.body ? readableFrom(stream, undefined, "discard") : null;
  if (body && tap) body = tapReadable(body, (chunk) => tap.requestChunk(chunk));
  if (!meta.body) stream.onData = (chunk) => stream.consumed(chunk.byteLength);
  const url = `https://${localAuthority(target)}${head.path}`;
  // the visitor left or the edge gave up waiting: drop the local request too, so it holds no connection
  const abort = new AbortController();
  stream.whenReset(() => abort.abort());
  let response: Response;
  try {
    const init: BunFetchRequestInit & { duplex: "half" } = {
      method: head.method,
      headers,
      body,
      redirect: "manual",
      decompress: false,
      proxy: false,
      tls: { rejectUnauthorized: false }, // the local service is the user's own; self-signed is normal there
      duplex: "half", // the request body streams while the response may already come
      signal: abort.signal,
    };
    response = await fetch(url, init);
  } catch (err) {
    if (abort.signal.aborted) return log("cancelled");
    return fail(err as Error);
  }
  const responseHead = { status: response.status, headers: headerList(response.headers) };
  log(response.status);
  tap?.response(responseHead.status, responseHead.headers);
  const length = Number(response.headers.get("content-length") ?? NaN);
  if (!response.body || length === 0) {
    stream.reply(responseHead, true); // one REPLY frame that also ends the stream
    tap?.done();
  } else if (length > 0 && length <= MAX_DATA_PAYLOAD) {
    // small and whole: REPLY, then one DATA frame that carries the FIN
    let bytes: Uint8Array;
    try {
      bytes = await response.bytes();
    } catch {
      return stream.reset(`${WireError.UPSTREAM_FAILED} the local service broke off its response`);
    }
    stream.cork(() => {
      stream.reply(responseHead);
      stream.end(bytes);
    });
    tap?.responseChunk(bytes);
    tap?.done();
  } else {
    stream.reply(responseHead);
    const source = tap ? tapReadable(response.body, (chunk) => tap.responseChunk(chunk), () => tap.done()) : response.body;
    await pipeInto(source, stream);
  }
}

/**
 * A status as the request log shows it: what the visitor gets. A status no
 * visitor can be given goes on in REPLY as it came, and the edge answers 502
 * naming it (the edge judges it, for every agent); the log says so here.
 */
function shown(status: number | string): number | string {
  return typeof status === "number" && !isFinalStatus(status) ? `502 (invalid status ${status})` : status;
}

/** A stream's reset code as the inspector shows why a request ended short. */
function resetReason(code: string): string {
  if (code.startsWith(WireError.UPSTREAM_FAILED)) return code.slice(WireError.UPSTREAM_FAILED.length).trim() || "the local service failed";
  if (code === WireError.CANCELLED) return "cancelled (the visitor left)";
  return code;
}

export function describeLocalError(err: unknown): string {
  const code = (err as { code?: string }).code;
  if (code === "ConnectionRefused" || code === "ECONNREFUSED") return "connection refused";
  if (code === "ETIMEDOUT" || code === "TimeoutError") return "timed out";
  return (err as Error).message?.split("\n")[0]?.slice(0, 120) || "request failed";
}
