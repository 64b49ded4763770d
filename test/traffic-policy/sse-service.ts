/**
 * A real Server-Sent Events service for the sse-find-replace tests, on a
 * bare socket so that the test chooses the framing (chunked, or ended by
 * the connection's close) and where the bytes are cut: each path answers
 * one stream, some of its events split across writes, with pauses between
 * them. /gated holds its last event until the test opens the gate (the
 * test opens it only once the first event reached the client: the edge
 * streams, it does not buffer); /forever sends an event every 50 ms until
 * the visitor's side goes away. `?framing=close` ends a stream with the
 * service's close, `?framing=length` gives it a Content-Length. And curl
 * -N read as it comes.
 */
import { expect } from "bun:test";
import { createServer, type Server, type Socket } from "node:net";
import { waitUntil } from "../harness/wait.ts";

export interface SseService {
  port: number;
  /** Lets /gated send its last event. */
  open(): void;
  /** Streams of /forever still being written. */
  foreverOpen(): number;
  stop(): void;
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The rules both tests' tunnels have: keys redacted in data (a capture group kept), every retry made 9000. */
export const REDACT_RULES = `
      - type: sse-find-replace
        config:
          replacements:
            - from: 'sk-(\\d)\\d*'
              to: 'sk-$1***'
            - field: retry
              from: '\\d+'
              to: '9000'
`;

/** /stream through REDACT_RULES. */
export const REWRITTEN = ": connected\n\nevent: token\nid: 1\ndata: the key is sk-1*** ok\n\nretry: 9000\ndata: line one\r\ndata: sk-9*** on line two\r\n\r\ndata: done\n\n";

/** Each path's events, as the pieces the service writes (a pause between pieces). */
export const STREAMS: Record<string, string[]> = {
  "/stream": [": connected\n\n", "event: token\nid: 1\ndata: the key is sk-12345", "678 ok\n", "\n", "retry: 3000\ndata: line one\r\ndata: sk-999 on line two\r\n\r", "\n", "data: done\n\n"],
  "/big": [`data: sk-1 ${"x".repeat(3000)}\n\n`, "data: after sk-2\n\n"],
  "/grow": ["data: first sk-1\n\n", `data: ${"a".repeat(500)}\n\n`, "data: never sent sk-3\n\n"],
  "/layers": ["data: sk-1234\n\n"],
  "/exponential": [`data: ${"a".repeat(5000)}!\n\n`, "data: sk-1\n\n"],
};

export function sseService(): Promise<SseService> {
  // each /gated stream waits for the next open()
  const gates: (() => void)[] = [];
  let forever = 0;
  const sockets = new Set<Socket>();

  async function answer(sock: Socket, path: string, query: URLSearchParams) {
    const framing = query.get("framing");
    const close = framing === "close";
    // raw: the bytes as they are (ended by the close, or by a Content-Length); else chunked
    const raw = close || framing === "length";
    const length = framing === "length" ? Buffer.byteLength((STREAMS[path] ?? []).join("")) : undefined;
    const type = query.get("type") ?? "text/event-stream";
    const encoding = query.get("encoding");
    const head = `HTTP/1.1 200 OK\r\nContent-Type: ${type}\r\nCache-Control: no-cache\r\n${encoding ? `Content-Encoding: ${encoding}\r\n` : ""}${close ? "Connection: close\r\n" : length !== undefined ? `Content-Length: ${length}\r\n` : "Transfer-Encoding: chunked\r\n"}\r\n`;
    sock.write(head);
    const send = (text: string) => {
      if (sock.destroyed) return false;
      const bytes = Buffer.from(text);
      sock.write(raw ? bytes : Buffer.concat([Buffer.from(`${bytes.byteLength.toString(16)}\r\n`), bytes, Buffer.from("\r\n")]));
      return true;
    };
    if (path === "/forever") {
      forever++;
      try {
        for (let i = 0; i < 100_000 && send(`data: tick ${i} sk-${i}\n\n`); i++) await pause(50);
      } finally {
        forever--;
      }
      return;
    }
    if (path === "/gated") {
      send("data: first sk-1\n\n");
      await new Promise<void>((resolve) => gates.push(resolve));
      send("data: last sk-2\n\n");
    } else for (const piece of STREAMS[path] ?? []) {
      send(piece);
      await pause(30);
    }
    if (!raw) sock.write("0\r\n\r\n");
    sock.end();
  }

  const server: Server = createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    let head = "";
    sock.on("data", (chunk) => {
      if (head.includes("\r\n\r\n")) return;
      head += chunk.toString("latin1");
      if (!head.includes("\r\n\r\n")) return;
      const target = head.split(" ")[1] ?? "/";
      const url = new URL(target, "http://service");
      void answer(sock, url.pathname, url.searchParams);
    });
  });
  return new Promise((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      resolve({
        port,
        open: () => gates.splice(0).forEach((g) => g()),
        foreverOpen: () => forever,
        stop() {
          for (const s of sockets) s.destroy();
          server.close();
        },
      });
    });
  });
}

/** curl -N: what it printed so far, and its end; killed at `maxSeconds` at the latest. */
export interface CurlStream {
  text(): string;
  exited: Promise<number>;
  /** Resolves once what it printed contains `part` (at most `ms`). */
  saw(part: string, ms?: number): Promise<void>;
  kill(): void;
}

export function curlStream(url: string, args: string[] = [], maxSeconds = 10): CurlStream {
  const proc = Bun.spawn(["curl", "-sS", "-N", "--max-time", String(maxSeconds), ...args, url], { stdout: "pipe", stderr: "pipe", timeout: (maxSeconds + 5) * 1000 });
  let out = "";
  const decoder = new TextDecoder();
  const reading = (async () => {
    for await (const chunk of proc.stdout) out += decoder.decode(chunk, { stream: true });
  })();
  return {
    text: () => out,
    exited: reading.then(() => proc.exited),
    saw: (part, ms = 5_000) => waitUntil(() => out.includes(part), ms, `curl to print ${JSON.stringify(part)}`),
    kill: () => proc.kill(),
  };
}

/** /gated at `url`: its first event reaches curl, rewritten, while the service still holds the last; then the last. */
export async function expectStreamed(svc: SseService, url: string, args: readonly string[]): Promise<void> {
  const c = curlStream(url, [...args]);
  try {
    await c.saw("data: first sk-1***\n\n");
    expect(c.text()).not.toContain("last");
    svc.open();
    await c.saw("data: last sk-2***\n\n");
    expect(await c.exited).toBe(0);
  } finally {
    c.kill();
  }
}
