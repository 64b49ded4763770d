/**
 * on_http_response on HTTP/2 streams, through the real server, agent and a
 * local service, with real clients: curl with prior knowledge (h2c) and
 * over TLS-less nghttp on one connection. Each stream's response is judged
 * as an HTTP/1.1 one is, on the stream itself (no HTTP_1_1_REQUIRED):
 * headers added and removed, a body compressed (read back by curl
 * --compressed), a custom-response in the service's place (to a HEAD too),
 * bodiless answers (204, 304, HEAD), an operator's server-wide rule after
 * the tunnel's own, kept tunnel streams carrying one stream's request after
 * another, many concurrent streams on one connection each with its rule,
 * a gRPC service (grpc-status in trailers) behind a tunnel whose response
 * rule sets a header, and a visitor that stops reading a long judged
 * response (passed, and compressed): the service is held back by the
 * stream's window, nothing is reset, and it all comes once it reads.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { signedIn } from "../harness/admin.ts";
import { grpcCall, startGrpcH2c } from "../harness/grpc-h2c.ts";
import { H2LOAD, NGHTTP, nghttp2Available, run } from "../harness/nghttp2.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { rawH2 } from "../harness/h2-raw.ts";
import { FrameType, headers, Setting, settingsAck, windowUpdate } from "../harness/h2-frames.ts";
import { waitUntil } from "../harness/wait.ts";
import { policyFile } from "./rig.ts";

const BIG = "burrow compresses this line on an HTTP/2 stream. ".repeat(8_000);
/** The long response: one 64 KiB chunk of random bytes (gzip finds nothing to take out) again and again, each counted as the service makes it. */
const LONG_CHUNK = crypto.getRandomValues(new Uint8Array(64 * 1024));
const LONG_CHUNKS = 1024;
let madeChunks = 0;

const OWN = `
on_http_response:
  - name: stamp
    actions:
      - type: add-headers
        config: { headers: { x-stamped: "\${req.url.path}", x-layer: tunnel } }
      - type: remove-headers
        config: { headers: [x-drop] }
  - name: squeeze
    expressions: ["req.url.path == '/big' || req.url.path == '/long/squeezed'"]
    actions: [{ type: compress-response, config: { algorithms: [gzip] } }]
  - name: hide missing
    expressions: ["res.status_code == 404"]
    actions: [{ type: custom-response, config: { status_code: 410, body: gone, headers: { x-custom: "yes" } } }]
`;

/** The operator's server-wide rule: after the tunnel's own, it has the last word. */
const OPERATOR = `on_http_response: [{name: operator, expressions: ["req.url.path.startsWith('/operator')"], actions: [{type: remove-headers, config: {headers: [x-layer]}}, {type: add-headers, config: {headers: {x-layer: operator}}}]}]`;

const GRPC_POLICY = `
on_http_response:
  - actions: [{ type: add-headers, config: { headers: { x-grpc-stamped: "yes" } } }]
`;

let rig: Rig;
let edge: number;
const ownFile = policyFile(OWN);
const grpcFile = policyFile(GRPC_POLICY);
const cleanups: (() => unknown)[] = [];

beforeAll(async () => {
  if (!nghttp2Available()) throw new Error("nghttp is not installed: install Debian's nghttp2-client package (.ci/run installs it)");
  const upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req) {
      const path = new URL(req.url).pathname;
      const headers = { "x-drop": "secret", "x-from-service": "yes", "content-type": "text/plain" };
      if (path === "/big") return new Response(BIG, { headers });
      if (path === "/missing") return new Response("no such page", { status: 404, headers });
      if (path === "/empty") return new Response(null, { status: 204, headers });
      if (path === "/cached") return new Response(null, { status: 304, headers });
      if (path.startsWith("/long/")) {
        let n = 0;
        const body = new ReadableStream({
          pull(c) {
            if (n++ >= LONG_CHUNKS) return c.close();
            madeChunks++;
            c.enqueue(LONG_CHUNK);
          },
        });
        return new Response(body, { headers: { ...headers, "content-type": "application/octet-stream" } });
      }
      return new Response(`hello from ${path}`, { headers });
    },
  });
  cleanups.push(() => upstream.stop(true));
  rig = await withServer({ user: { skip_warning: true } });
  cleanups.push(() => rig.close());
  edge = rig.server.edgePort;
  await rig.startAgent({ kind: "http", target: upstream.port!, args: ["--subdomain", "judged", "--policy-file", ownFile.path] });
  const grpc = await startGrpcH2c();
  cleanups.push(() => grpc[Symbol.asyncDispose]());
  await rig.startAgent({ kind: "http", target: grpc.port, args: ["--subdomain", "grpcjudged", "--upstream-protocol", "h2c", "--policy-file", grpcFile.path] });
  const api = await signedIn(rig.server);
  const made = await api.post("/api/policies", { name: "operator's response rule", scope: "server", policy: OPERATOR });
  if (made.status !== 201) throw new Error(`policy not made: ${JSON.stringify(made.body)}`);
  // a change reaches live tunnels within 5 s: this waits for it, over HTTP/1.1
  await waitUntil(async () => (await fetch(url("/operator/probe"))).headers.get("x-layer") === "operator", 10_000, "the operator's policy on the tunnel", 100);
}, 60_000);
afterAll(async () => {
  for (const c of cleanups.reverse()) await c();
  ownFile[Symbol.dispose]();
  grpcFile[Symbol.dispose]();
});

const url = (path: string, name = "judged") => `http://${name}.localhost:${edge}${path}`;

interface H2Reply {
  version: string;
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** curl with HTTP/2 prior knowledge: the response's version, status, headers (lower-cased names) and body (-I: a HEAD, its head written once). */
async function h2c(path: string, args: string[] = []): Promise<H2Reply> {
  const dump = args.includes("-I") ? [] : ["-D", "-"];
  const r = await run(["curl", "-sS", "--max-time", "20", "--http2-prior-knowledge", ...dump, "-w", "\n%{http_version} %{response_code}", ...args, url(path)], 30_000);
  if (r.code !== 0) throw new Error(`curl ${path} failed (${r.code}): ${r.stderr}`);
  const end = r.stdout.indexOf("\r\n\r\n");
  const lines = r.stdout.slice(0, end).split("\r\n");
  const headers: Record<string, string> = {};
  for (const line of lines.slice(1)) {
    const colon = line.indexOf(":");
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const rest = r.stdout.slice(end + 4);
  const tail = rest.lastIndexOf("\n");
  const [version, status] = rest.slice(tail + 1).split(" ");
  return { version: version!, status: Number(status), headers, body: rest.slice(0, tail) };
}

describe("a tunnel's response rules on an HTTP/2 stream", () => {
  test("headers added and removed, over h2", async () => {
    const r = await h2c("/plain");
    expect(r.version).toBe("2");
    expect(r.status).toBe(200);
    expect(r.body).toBe("hello from /plain");
    expect(r.headers["x-stamped"]).toBe("/plain");
    expect(r.headers["x-from-service"]).toBe("yes");
    expect(r.headers["x-drop"]).toBeUndefined();
  });

  test("compress-response: curl --compressed reads the body back, its length not kept wrong", async () => {
    const r = await h2c("/big", ["--compressed"]);
    expect(r.version).toBe("2");
    expect(r.status).toBe(200);
    expect(r.headers["content-encoding"]).toBe("gzip");
    expect(r.headers["content-length"]).toBeUndefined();
    expect(r.headers["transfer-encoding"]).toBeUndefined();
    expect(r.body).toBe(BIG);
    expect(r.headers["x-stamped"]).toBe("/big");
  });

  test("a response rule's custom-response replaces the service's answer; to a HEAD, without its body", async () => {
    const r = await h2c("/missing");
    expect(r.version).toBe("2");
    expect(r.status).toBe(410);
    expect(r.body).toBe("gone");
    expect(r.headers["x-custom"]).toBe("yes");
    expect(r.headers["x-from-service"]).toBeUndefined();
    const head = await h2c("/missing", ["-I"]);
    expect(head.status).toBe(410);
    expect(head.body).toBe("");
  });

  test("bodiless answers: 204, 304 and a HEAD, each with the rule's header", async () => {
    for (const [path, args, status] of [["/empty", [], 204], ["/cached", [], 304], ["/plain", ["-I"], 200]] as const) {
      const r = await h2c(path, [...args]);
      expect(r.version).toBe("2");
      expect(r.status).toBe(status);
      expect(r.body).toBe("");
      expect(r.headers["x-stamped"]).toBe(path);
    }
  });

  test("the operator's server-wide response rule runs after the tunnel's own, and has the last word", async () => {
    const r = await h2c("/operator/x");
    expect(r.version).toBe("2");
    expect(r.headers["x-layer"]).toBe("operator");
    expect(r.headers["x-stamped"]).toBe("/operator/x");
  });

  test("one connection's requests one after another (h2load -c 1 -m 1), on kept tunnel streams: passed, replaced, compressed and bodiless answers in turn, all through", async () => {
    // h2load resolves names itself: the edge's address, the tunnel's name as :authority; it takes the paths in turn
    const paths = ["/seq", "/missing", "/big", "/empty"].map((p) => `http://127.0.0.1:${edge}${p}`);
    const r = await run([H2LOAD, "-n", "200", "-c", "1", "-m", "1", "-H", `:authority: judged.localhost:${edge}`, "-H", "accept-encoding: gzip", ...paths], 60_000);
    // h2load counts a 4xx as failed: the 410s are the policy's custom-response in the service's 404's place
    expect(r.stdout).toContain("requests: 200 total, 200 started, 200 done, 150 succeeded, 50 failed, 0 errored, 0 timeout");
    expect(r.stdout).toContain("status codes: 150 2xx, 0 3xx, 50 4xx, 0 5xx");
  });

  test("many concurrent streams on one connection (nghttp): each stream gets its own rule applied", async () => {
    const count = 24;
    const paths = Array.from({ length: count }, (_, i) => `/many/${i}`);
    // nghttp resolves names itself: the edge's address, the tunnel's name as :authority
    const r = await run([NGHTTP, "-v", "-n", "-H", `:authority: judged.localhost:${edge}`, ...paths.map((p) => `http://127.0.0.1:${edge}${p}`)], 60_000);
    expect(r.code).toBe(0);
    // each stream's HEADERS: its own x-stamped, the removed field absent
    const stamped = [...r.stdout.matchAll(/recv \(stream_id=(\d+)\) x-stamped: (\S+)/g)].map((m) => [Number(m[1]), m[2]!] as const);
    expect(stamped.map(([, p]) => p).sort()).toEqual([...paths].sort());
    expect(new Set(stamped.map(([id]) => id)).size).toBe(count);
    expect(r.stdout).not.toContain("x-drop");
    // they were in flight together: a stream's HEADERS went out before an earlier stream's answer came
    const firstAnswer = r.stdout.search(/recv \(stream_id=\d+\) :status/);
    const lastRequest = r.stdout.lastIndexOf("send HEADERS frame");
    expect(lastRequest).toBeLessThan(firstAnswer);
  });

  test("gRPC behind a tunnel with a response rule: unary, streaming and refused calls keep their grpc-status trailers", async () => {
    const addr = `127.0.0.1:${edge}`;
    const authority = `grpcjudged.localhost:${edge}`;
    expect(await grpcCall("say", addr, authority, "hi")).toEqual(["echo: hi"]);
    expect(await grpcCall("chat", addr, authority, "3")).toEqual(["echo: message 0", "echo: message 1", "echo: message 2"]);
    expect(await grpcCall("fail", addr, authority, "nope")).toEqual(["error INVALID_ARGUMENT no: nope"]);
    // the rule held on the stream: nghttp shows the header, and the trailer after the body
    const r = await run([NGHTTP, "-v", "-H", `:authority: ${authority}`, "-H", "content-type: application/grpc", "-H", "te: trailers", "-d", "/dev/null", `http://${addr}/nothing.Here/Call`], 30_000);
    expect(r.stdout).toContain("x-grpc-stamped: yes");
    expect(r.stdout).toMatch(/grpc-status: \d+/);
  }, 60_000);
});

describe("a visitor that stops reading a judged response", () => {
  const cases: [string, [string, string][]][] = [["/long/passed", []], ["/long/squeezed", [["accept-encoding", "gzip"]]]];
  for (const [path, extra] of cases) {
    test(`${path}: the service is held back by the stream's window, nothing is reset, and the rest comes once the visitor reads`, async () => {
      await using c = await rawH2(edge, { settings: [[Setting.INITIAL_WINDOW_SIZE, 16_384]] });
      madeChunks = 0;
      const fields: [string, string][] = [[":method", "GET"], [":scheme", "http"], [":authority", `judged.localhost:${edge}`], [":path", path], ...extra];
      c.send(settingsAck(), headers(1, fields));
      await c.until(() => c.frames.heads.some((h) => h.stream === 1), 10_000, "the answer's head");
      expect(c.frames.heads.find((h) => h.stream === 1)!.fields).toContainEqual(["x-stamped", path]);
      // the visitor reads nothing more: what the service made stops growing, far short of its body
      let before = -1;
      await waitUntil(
        async () => {
          const now = madeChunks;
          if (now === before) return true;
          before = now;
          await Bun.sleep(300);
          return false;
        },
        20_000,
        "the service to be held back",
        10,
      );
      // the tunnel stream's credit and the sockets' buffers on the way, not the body's 64 MiB
      expect(madeChunks).toBeLessThan(LONG_CHUNKS / 4);
      expect(c.frames.resets().has(1)).toBe(false);
      // the visitor reads: all of it comes, to its end
      c.send(windowUpdate(1, 2 ** 31 - 1 - 16_384), windowUpdate(0, 2 ** 31 - 1 - 65_535));
      const ended = () => c.frames.frames.some((f) => f.stream === 1 && f.type === FrameType.DATA && (f.flags & 1) === 1);
      await c.until(ended, 60_000, "the body's end");
      expect(madeChunks).toBe(LONG_CHUNKS);
      expect(c.frames.resets().has(1)).toBe(false);
      if (extra.length === 0) {
        const length = c.frames.frames.filter((f) => f.stream === 1 && f.type === FrameType.DATA).reduce((n, f) => n + f.payload.byteLength, 0);
        expect(length).toBe(LONG_CHUNK.byteLength * LONG_CHUNKS);
      } else expect(c.frames.heads.find((h) => h.stream === 1)!.fields).toContainEqual(["content-encoding", "gzip"]);
    }, 90_000);
  }
});
