/**
 * What the agent's request paths tell the inspector, and nothing more: the
 * hooks http.ts, local-http/exchange.ts and websocket.ts call as a request
 * passes. They copy what they keep and return at once; they never hold a
 * chunk back or ask the stream to wait.
 */
import type { HeaderList, OpenMeta } from "../../protocol/messages.ts";
import type { TunnelView } from "../output.ts";

/** One request (or WebSocket) as it passes through the agent. */
export interface ExchangeTap {
  /** A piece of the visitor's request body, on its way to the local service. */
  requestChunk(chunk: Uint8Array): void;
  /** The local service's final response head, as the visitor gets it. */
  response(status: number, headers: HeaderList): void;
  /** A piece of the response body, on its way to the visitor. */
  responseChunk(chunk: Uint8Array): void;
  /** The response is complete (for a WebSocket: it closed). */
  done(): void;
  /** It ended without a complete response: why, as a short phrase. */
  failed(why: string): void;
  /** One whole WebSocket message, from the visitor or from the local service. */
  message(from: "visitor" | "service", data: string | Uint8Array): void;
}

/** Where the agent reports requests; absent when the inspector is off. */
export interface RequestTaps {
  /** A tap for this http or ws stream of this tunnel, or undefined when it is not to be captured. */
  begin(tunnel: TunnelView, meta: OpenMeta): ExchangeTap | undefined;
}

/**
 * `source` read through, each chunk shown to `onChunk` as it passes and
 * `onEnd` told when it is whole. Pull for pull: nothing is read ahead, so
 * the consumer's pace (and the stream's credit) is the source's, as before.
 */
export function tapReadable(source: ReadableStream<Uint8Array>, onChunk: (chunk: Uint8Array) => void, onEnd?: () => void): ReadableStream<Uint8Array> {
  const reader = source.getReader();
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        let next: Awaited<ReturnType<typeof reader.read>>;
        try {
          next = await reader.read();
        } catch (err) {
          return controller.error(err);
        }
        if (next.done) {
          onEnd?.();
          return controller.close();
        }
        onChunk(next.value);
        controller.enqueue(next.value);
      },
      cancel(reason) {
        return reader.cancel(reason);
      },
    },
    { highWaterMark: 0 },
  );
}
