/**
 * A local service whose /slow answer is held half way: its head and first
 * bytes go out at once, the rest only once the test releases it. What a
 * request in flight on one tunnel looks like while another tunnel changes.
 */
import { expect } from "bun:test";
import { tunnelFetch } from "./agent.ts";
import { waitUntil } from "./wait.ts";

export interface SlowService {
  port: number;
  /** Requests to /slow held at the service now. */
  waiting(): number;
  /** Lets every held request finish. */
  release(): void;
  stop(): void;
}

/** /slow answers "first half," then, once released, "second half"; anything else `${label} here` at once. */
export function slowService(label: string): SlowService {
  const open: (() => void)[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    // the held request is not idle: the service waits for the test
    idleTimeout: 0,
    fetch(req) {
      if (new URL(req.url).pathname !== "/slow") return new Response(`${label} here`);
      const gate = new Promise<void>((resolve) => open.push(resolve));
      let part = 0;
      const body = new ReadableStream({
        async pull(c) {
          if (part++ === 0) return c.enqueue(new TextEncoder().encode("first half,"));
          await gate;
          c.enqueue(new TextEncoder().encode("second half"));
          c.close();
        },
      });
      return new Response(body, { headers: { "content-type": "text/plain" } });
    },
  });
  return {
    port: server.port!,
    waiting: () => open.length,
    release: () => {
      for (const o of open.splice(0)) o();
    },
    stop: () => server.stop(true),
  };
}

/**
 * A request to /slow through the edge that has its head and first bytes;
 * `rest` is the rest of its body, read in the background ("cut" when the
 * connection broke before its end).
 */
export async function slowRequestInFlight(edgePort: number, subdomain: string, svc: SlowService): Promise<{ rest: Promise<string> }> {
  const res = await tunnelFetch(edgePort, subdomain, "/slow");
  expect(res.status).toBe(200);
  const reader = res.body!.getReader();
  const first = await reader.read();
  expect(new TextDecoder().decode(first.value)).toBe("first half,");
  await waitUntil(() => svc.waiting() > 0, 10_000, "the slow request at the service");
  const rest = (async () => {
    let text = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return text;
      text += new TextDecoder().decode(value);
    }
  })().catch(() => "cut");
  // in an object: an async function's result that is a promise would be awaited with it
  return { rest };
}
