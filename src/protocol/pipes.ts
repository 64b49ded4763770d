/**
 * Web streams on top of mux streams, with credit tied to real consumption:
 * bytes are acknowledged only when the reader pulls them, and a writer
 * waits for onDrain instead of queueing without bound.
 */
import type { Stream } from "./mux.ts";

/**
 * Incoming bytes of a stream as a ReadableStream; credit returns as the
 * reader pulls. If the reader cancels, `onCancel` decides: "reset" aborts
 * the whole stream (the reader was the only reason for it), "discard" keeps
 * the other direction alive and throws away what still arrives. `onEnd`
 * runs when the last byte has been handed to the reader, or it failed.
 *
 * A reset fails the ReadableStream with no reason (reads reject with
 * undefined; whoever needs the code has whenReset). Bun prints any error
 * that ends a response body it is sending, source excerpt and stack
 * included, as if nobody had handled it: an agent leaving mid-body, which
 * is normal, would write that to the server's stderr for every visitor cut
 * off. Without a reason it cuts the visitor's connection just the same,
 * quietly (and fetch, reading a request body, fails with an AbortError).
 */
export function readableFrom(
  stream: Stream,
  onChunk?: (n: number) => void,
  onCancel: "reset" | "discard" = "reset",
  onEnd?: () => void,
): ReadableStream<Uint8Array> {
  const queue: Uint8Array[] = [];
  let ended = false;
  let failed: string | undefined;
  let wake: (() => void) | undefined;
  const notify = () => {
    const w = wake;
    wake = undefined;
    w?.();
  };
  stream.onData = (chunk) => {
    queue.push(chunk);
    notify();
  };
  stream.onEnd = () => {
    ended = true;
    notify();
  };
  stream.whenReset((code) => {
    failed = code;
    notify();
  });
  return new ReadableStream<Uint8Array>(
    {
      async pull(controller) {
        while (queue.length === 0 && !ended && failed === undefined) {
          await new Promise<void>((resolve) => (wake = resolve));
        }
        const chunk = queue.shift();
        if (chunk) {
          controller.enqueue(chunk);
          stream.consumed(chunk.byteLength);
          onChunk?.(chunk.byteLength);
        } else if (ended) {
          // the FIN came before any reset: every byte is here, the reset takes none of them away
          onEnd?.();
          controller.close();
        } else {
          onEnd?.();
          controller.error();
        }
      },
      cancel() {
        onEnd?.();
        if (onCancel === "reset") return stream.reset();
        for (const chunk of queue.splice(0)) stream.consumed(chunk.byteLength);
        stream.onData = (chunk) => stream.consumed(chunk.byteLength);
      },
    },
    { highWaterMark: 0 },
  );
}

/**
 * Copies a ReadableStream into a mux stream and half-closes it at the end.
 * Resets the stream when the source fails. Resolves with the bytes copied.
 */
export async function pipeInto(
  source: ReadableStream<Uint8Array>,
  stream: Stream,
  onChunk?: (n: number) => void,
): Promise<number> {
  const reader = source.getReader();
  let total = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (stream.isClosed) {
        await reader.cancel();
        return total;
      }
      total += value.byteLength;
      onChunk?.(value.byteLength);
      if (!stream.write(value) && !(await stream.whenDrained())) {
        await reader.cancel();
        return total;
      }
    }
    stream.end();
  } catch {
    stream.reset();
  } finally {
    reader.releaseLock();
  }
  return total;
}

/**
 * The rest of a stream's incoming bytes as one buffer, for bodies known to
 * be small (at most `limit` bytes). Credit returns as bytes arrive. Rejects
 * if the stream is reset or sends more than `limit`.
 */
export function collect(stream: Stream, limit: number, onChunk?: (n: number) => void): Promise<Uint8Array> {
  return new Promise((resolve, reject) => {
    const chunks: Uint8Array[] = [];
    let size = 0;
    stream.onData = (chunk) => {
      size += chunk.byteLength;
      onChunk?.(chunk.byteLength);
      stream.consumed(chunk.byteLength);
      if (size > limit) {
        stream.reset();
        return reject(new Error(`body larger than the ${limit} bytes announced`));
      }
      chunks.push(chunk);
    };
    stream.onEnd = () => resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks));
    stream.whenReset((code) => reject(new Error(`stream reset: ${code}`)));
  });
}
