/**
 * What the inspector tests share: a real server, a user's token, a local
 * service that records what it is sent, and the real agent (`burrow http`)
 * with its inspector on an ephemeral loopback port, read from the line it
 * prints. Everything is torn down by `await using`, failures included.
 */
import { gzipSync } from "node:zlib";
import { signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch, type TestAgent } from "../harness/agent.ts";
import { startServer, type TestServer } from "../harness/server.ts";

export interface Seen {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: Uint8Array;
}

/** 1x1 transparent PNG. */
export const PNG = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==", "base64");
/** /stream: 1.6 MiB in 200 pieces, about a second in all. */
export const STREAM_CHUNK = 8 * 1024;
export const STREAM_CHUNKS = 200;
export const BINARY = Uint8Array.from({ length: 64 }, (_, i) => (i * 37) & 0xff);

export interface Upstream extends Disposable {
  port: number;
  seen: Seen[];
  /** Chunks /stream has sent so far (one every 5 ms, STREAM_CHUNKS of STREAM_CHUNK bytes). */
  streamed: () => number;
}

/** A local service with a route per kind of body the tests look at. */
export function startUpstream(): Upstream {
  const seen: Seen[] = [];
  let streamed = 0;
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    websocket: {
      // an echo that also says hello first
      open: (ws) => void ws.send("hello from the service"),
      message: (ws, message) => void ws.send(typeof message === "string" ? `echo: ${message}` : message),
    },
    async fetch(req, srv) {
      const url = new URL(req.url);
      if (url.pathname === "/ws" && srv.upgrade(req, { data: undefined })) return undefined as unknown as Response;
      const body = new Uint8Array(await req.arrayBuffer());
      seen.push({ method: req.method, path: url.pathname + url.search, headers: Object.fromEntries(req.headers), body });
      switch (url.pathname) {
        case "/json":
          return Response.json({ hello: "world", list: [1, 2, 3] }, { headers: { "set-cookie": "session=secret-cookie" } });
        case "/binary":
          return new Response(BINARY, { headers: { "content-type": "application/octet-stream" } });
        case "/image":
          return new Response(PNG, { headers: { "content-type": "image/png" } });
        case "/gzip":
          return new Response(gzipSync(Buffer.from("a gzipped hello ".repeat(100))), { headers: { "content-type": "text/plain", "content-encoding": "gzip" } });
        case "/big":
          return new Response(new Uint8Array(1536 * 1024).fill(0x61), { headers: { "content-type": "text/plain" } });
        case "/stream": {
          const chunk = new Uint8Array(STREAM_CHUNK).fill(0x62);
          let n = 0;
          return new Response(
            new ReadableStream({
              async pull(c) {
                if (n++ >= STREAM_CHUNKS) return c.close();
                await Bun.sleep(5);
                streamed++;
                c.enqueue(chunk);
              },
            }),
            { headers: { "content-type": "application/octet-stream" } },
          );
        }
        case "/missing":
          return new Response("no such page", { status: 404, headers: { "content-type": "text/plain" } });
        case "/echo":
          return new Response(body, { status: 201, headers: { "content-type": req.headers.get("content-type") ?? "application/octet-stream", "x-echo": "1" } });
        default:
          return new Response(`hello from ${url.pathname}`, { headers: { "content-type": "text/plain" } });
      }
    },
  });
  return { port: server.port!, seen, streamed: () => streamed, [Symbol.dispose]: () => server.stop(true) };
}

export interface Rig extends AsyncDisposable {
  server: TestServer;
  token: string;
}

/** A server and a token for agents to use. */
export async function startRig(): Promise<Rig> {
  const server = await startServer();
  try {
    const admin = await signedIn(server);
    const token = await admin.createToken(await admin.createUser("inspector-user"));
    return { server, token, [Symbol.asyncDispose]: async () => void (await server.stop()) };
  } catch (err) {
    await server.stop();
    throw err;
  }
}

export interface InspectedAgent extends AsyncDisposable {
  agent: TestAgent;
  /** http://127.0.0.1:PORT, from the agent's "Inspector" line. */
  inspector: string;
  subdomain: string;
  /** A request through the tunnel, by the edge. */
  visit(path: string, init?: RequestInit): Promise<Response>;
  /** A request to the inspector's API, as a script sends it. */
  api(path: string, init?: RequestInit): Promise<Response>;
}

let subdomains = 0;

/** `upstream`: the local service's port on 127.0.0.1, or a target as burrow http takes it (https://127.0.0.1:PORT). */
export async function startInspectedAgent(rig: Rig, upstream: number | string, args: string[] = []): Promise<InspectedAgent> {
  const subdomain = `insp${process.pid}x${subdomains++}`;
  const agent = await startAgent({
    kind: "http",
    target: typeof upstream === "number" ? `127.0.0.1:${upstream}` : upstream,
    server: rig.server.edgeUrl,
    token: rig.token,
    args: ["--subdomain", subdomain, "--inspect-addr", "127.0.0.1:0", ...args],
  });
  try {
    const line = await agent.output.waitFor(/Inspector\s+(http:\/\/\S+)/, 5_000);
    const inspector = /Inspector\s+(http:\/\/\S+)/.exec(line)![1]!;
    return {
      agent,
      inspector,
      subdomain,
      visit: (path, init) => tunnelFetch(rig.server.edgePort, subdomain, path, init),
      api: (path, init) => fetch(inspector + path, init),
      [Symbol.asyncDispose]: async () => void (await agent.stop()),
    };
  } catch (err) {
    await agent.stop();
    throw err;
  }
}
