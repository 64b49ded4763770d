/**
 * An h1 stream served by a function in this process instead of a local
 * port: the `handler` of burrow-agent's forward() (`(request: Request) =>
 * Response`, as Hono, Elysia or any fetch-style app has it). The visitor's
 * request becomes a Request (its body a stream, decoded from its framing,
 * taken from the tunnel as the handler reads it), and the Response goes
 * back as HTTP/1.1 bytes: its body streamed as it comes, with its length
 * when the handler gave one, chunked when not. One request a stream: the
 * agent ends its side after the response, so the edge opens a new stream
 * for the connection's next request (protocol/messages.ts OpenMeta).
 *
 * What a handler cannot do: switch protocols (a WebSocket upgrade is
 * answered 501). A handler that throws is answered 500, and the request
 * log says why.
 */
import { RequestBodyReader } from "../http/request-body.ts";
import { isRefusal, parseRequestHead } from "../http/request-head.ts";
import { bodilessStatus, responseHead } from "../http/response-bytes.ts";
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import type { HttpHooks } from "./http.ts";

export type FetchHandler = (request: Request) => Response | Promise<Response>;

/** Request body bytes held for a handler that has not read them yet; past this, the tunnel's credit waits for it. */
const BODY_BUFFER = 1024 * 1024;

export function serveHandlerStream(stream: Stream, headText: string, handler: FetchHandler, hooks: HttpHooks): void {
  const started = performance.now();
  const head = parseRequestHead(headText.slice(0, -4));
  if (isRefusal(head)) {
    hooks.opened?.("http", "?", "?");
    stream.reset(`${WireError.UPSTREAM_FAILED} the request head cannot be read: ${head.why}`);
    hooks.log({ method: "?", path: "?", status: `502 (${head.why})`, ms: performance.now() - started });
    return;
  }
  const { method, target } = head;
  hooks.opened?.("http", method, target);
  const log = (status: number | string) => hooks.log({ method, path: target, status, ms: performance.now() - started });
  if (head.upgrade !== undefined) {
    void respond(stream, new Response("burrow: a handler cannot switch protocols (WebSocket); forward a local port for that\n", { status: 501 }), method).then(() => log(501));
    return;
  }
  const headers = new Headers();
  for (const [name, value] of head.fields) headers.append(name, value);
  const url = `http://${head.host ?? "localhost"}${target === "*" ? "/" : target}`;
  const body = method === "GET" || method === "HEAD" || head.framing === "none" ? null : bodyOf(stream, new RequestBodyReader(head.framing, head.length));
  if (!body) stream.onData = (chunk) => stream.consumed(chunk.byteLength); // nothing is wanted of a body-less request's stream
  if (head.expectContinue) stream.write(Buffer.from("HTTP/1.1 100 Continue\r\n\r\n", "latin1"));
  let request: Request;
  try {
    request = new Request(url, { method, headers, ...(body ? { body, duplex: "half" } : {}) } as RequestInit);
  } catch (err) {
    void respond(stream, new Response(`burrow: the request cannot be given to the handler: ${(err as Error).message}\n`, { status: 400 }), method).then(() => log(400));
    return;
  }
  Promise.resolve()
    .then(() => handler(request))
    .then(
      (res) => {
        if (!(res instanceof Response)) throw new TypeError("the handler did not return a Response");
        return respond(stream, res, method).then(() => log(res.status));
      },
      (err) => {
        const why = String((err as Error)?.message ?? err).slice(0, 200);
        return respond(stream, new Response("burrow: the tunnel's handler failed\n", { status: 500 }), method).then(() => log(`500 (${why})`));
      },
    )
    .catch((err) => {
      const why = String((err as Error)?.message ?? err).slice(0, 100);
      stream.reset(`${WireError.UPSTREAM_FAILED} ${why}`);
      log(`502 (${why})`);
    });
}

/** The request body as a stream the handler reads; the tunnel's credit goes back as it does (at most BODY_BUFFER held). */
function bodyOf(stream: Stream, reader: RequestBodyReader): ReadableStream<Uint8Array> {
  let owed = 0;
  let controller!: ReadableStreamDefaultController<Uint8Array>;
  const settle = () => {
    if (owed > 0 && (controller.desiredSize ?? 0) > 0) {
      stream.consumed(owed);
      owed = 0;
    }
  };
  return new ReadableStream<Uint8Array>(
    {
      start(c) {
        controller = c;
        stream.onData = (chunk) => {
          if (reader.done) return stream.consumed(chunk.byteLength);
          const error = reader.feed(chunk, (piece) => controller.enqueue(piece.slice()));
          if (error) {
            controller.error(new Error(`the request body is malformed: ${error}`));
            return stream.consumed(chunk.byteLength);
          }
          owed += chunk.byteLength;
          if (reader.done) controller.close();
          settle();
        };
        stream.onEnd = () => {
          if (!reader.done) controller.error(new Error("the request body ended early"));
        };
        if (reader.done) controller.close();
      },
      pull: settle,
      cancel: () => {
        stream.onData = (chunk) => stream.consumed(chunk.byteLength);
        if (owed > 0) stream.consumed(owed);
        owed = 0;
      },
    },
    { highWaterMark: BODY_BUFFER, size: (chunk) => chunk?.byteLength ?? 0 },
  );
}

/** Writes `res` as HTTP/1.1 into the stream, its body as it comes (waiting for the tunnel's credit), then ends the stream. */
async function respond(stream: Stream, res: Response, method: string): Promise<void> {
  const bodiless = bodilessStatus(res.status) || method === "HEAD";
  const reader = bodiless ? undefined : res.body?.getReader();
  // a body that is all there at once (Response.json, a string) goes with its length; one still coming, chunked
  const ready = reader ? await readyPart(reader) : { parts: [], done: true };
  const given = res.headers.get("content-length");
  const length = bodiless ? undefined : given !== null ? given : ready.done ? ready.parts.reduce((n, p) => n + p.byteLength, 0) : undefined;
  const chunked = !bodiless && length === undefined;
  if (stream.isClosed) return void reader?.cancel().catch(() => {});
  const write = credited(stream);
  stream.reply({});
  await write(responseHead(res, { ...(length !== undefined ? { length } : {}), chunked, close: true }));
  if (reader) {
    const send = (value: Uint8Array) => write(chunked ? Buffer.concat([Buffer.from(`${value.byteLength.toString(16)}\r\n`, "latin1"), value, CRLF]) : value);
    try {
      for (const part of ready.parts) await send(part);
      while (!ready.done) {
        const { done, value } = await reader.read();
        if (done) break;
        if (stream.isClosed) return void reader.cancel().catch(() => {});
        if (value.byteLength > 0) await send(value);
      }
    } catch (err) {
      // the body failed halfway: the visitor gets a cut response, as from a server that died
      stream.reset(`${WireError.UPSTREAM_FAILED} the handler's response body failed: ${String((err as Error)?.message ?? err).slice(0, 100)}`);
      return;
    }
    if (chunked) await write(LAST_CHUNK);
  } else await res.body?.cancel().catch(() => {});
  if (!stream.isClosed) stream.end();
}

/**
 * What of a body is there now: its parts read while each read resolves at
 * once (before a timer's turn), and whether that was all of it. Stops past
 * 1 MiB: that much goes chunked rather than held.
 */
async function readyPart(reader: { read(): Promise<{ done: true; value?: undefined } | { done: false; value: Uint8Array }> }): Promise<{ parts: Uint8Array[]; done: boolean }> {
  const parts: Uint8Array[] = [];
  let held = 0;
  for (;;) {
    const pending = reader.read();
    const now = await Promise.race([pending, new Promise<undefined>((resolve) => setTimeout(resolve, 0))]);
    // not there yet: this same read is awaited, and what follows it is streamed
    const result = now ?? (await pending);
    if (result.done) return { parts, done: true };
    if (result.value.byteLength > 0) parts.push(result.value);
    held += result.value.byteLength;
    if (now === undefined || held > 1024 * 1024) return { parts, done: false };
  }
}

const CRLF = Buffer.from("\r\n", "latin1");
const LAST_CHUNK = Buffer.from("0\r\n\r\n", "latin1");

/** Writes into the stream, each waiting for its drain when the stream is out of credit (or for its reset). */
function credited(stream: Stream): (bytes: Uint8Array) => Promise<void> {
  let wake: (() => void) | undefined;
  const waken = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  stream.onDrain = waken;
  stream.whenReset(waken);
  return (bytes) => {
    if (stream.isClosed || stream.write(bytes)) return Promise.resolve();
    return new Promise<void>((resolve) => (wake = resolve));
  };
}
