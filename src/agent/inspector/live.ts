/**
 * GET /api/requests/stream: server-sent events as captures come and change.
 *
 *   event: request   data: a capture's summary, the first time it is told
 *   event: update    data: the same capture, changed (status, end, sizes)
 *   event: clear     data: {}   (DELETE /api/requests)
 *
 * The store batches what changed (STREAM_BATCH_MS), so a busy tunnel costs
 * one batch per window, not an event per request. Each client has its own
 * bounded queue; one that falls STREAM_CLIENT_MAX_BYTES behind is dropped
 * (it can reconnect and list again), never buffered without end.
 */
import type { RequestTimeouts } from "../../runtime/types.ts";
import { InspectorError } from "./errors.ts";
import { summaryJson } from "./json.ts";
import { MAX_STREAM_CLIENTS, STREAM_CLIENT_MAX_BYTES, STREAM_KEEPALIVE_MS } from "./limits.ts";
import type { CaptureStore, StoreNews } from "./store.ts";

const encoder = new TextEncoder();

export class LiveStreams {
  private readonly clients = new Set<LiveClient>();

  constructor(private readonly store: CaptureStore) {}

  get count(): number {
    return this.clients.size;
  }

  open(req: Request, server: RequestTimeouts, headers: Record<string, string>): Response {
    if (this.clients.size >= MAX_STREAM_CLIENTS) throw new InspectorError("TOO_MANY_STREAMS", `at most ${MAX_STREAM_CLIENTS} live streams at once`);
    server.timeout(req, 0); // a quiet stream is not an idle connection
    const client = new LiveClient(() => this.clients.delete(client));
    this.clients.add(client);
    const unsubscribe = this.store.subscribe((news) => client.send(render(news)));
    client.onClose = unsubscribe;
    req.signal.addEventListener("abort", () => client.close());
    client.send(": live\n\n");
    return new Response(client.body, {
      headers: { ...headers, "Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-store", "X-Accel-Buffering": "no" },
    });
  }

  closeAll(): void {
    for (const c of [...this.clients]) c.close();
  }
}

function render(news: StoreNews): string {
  if (news.kind === "cleared") return "event: clear\ndata: {}\n\n";
  let out = "";
  for (const c of news.captures) out += `event: ${c.announced ? "update" : "request"}\ndata: ${JSON.stringify(summaryJson(c))}\n\n`;
  return out;
}

/** One listener: a queue the response body pulls from, bounded in bytes. */
class LiveClient {
  private queue: string[] = [];
  private queued = 0;
  private closed = false;
  private wake: (() => void) | undefined;
  private readonly keepalive: ReturnType<typeof setInterval>;
  onClose: (() => void) | undefined;
  readonly body: ReadableStream<Uint8Array>;

  constructor(private readonly forget: () => void) {
    this.keepalive = setInterval(() => this.send(": keepalive\n\n"), STREAM_KEEPALIVE_MS);
    this.keepalive.unref?.();
    this.body = new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          while (this.queue.length === 0 && !this.closed) await new Promise<void>((resolve) => (this.wake = resolve));
          if (this.queue.length === 0) return controller.close();
          const text = this.queue.join("");
          this.queue = [];
          this.queued = 0;
          controller.enqueue(encoder.encode(text));
        },
        cancel: () => this.close(),
      },
      { highWaterMark: 0 },
    );
  }

  send(text: string): void {
    if (this.closed) return;
    if (this.queued + text.length > STREAM_CLIENT_MAX_BYTES) return this.close(); // too slow: dropped
    this.queue.push(text);
    this.queued += text.length;
    this.poke();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.queue = [];
    clearInterval(this.keepalive);
    this.onClose?.();
    this.forget();
    this.poke();
  }

  private poke(): void {
    const w = this.wake;
    this.wake = undefined;
    w?.();
  }
}
