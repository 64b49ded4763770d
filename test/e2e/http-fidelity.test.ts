/**
 * HTTP forwarding fidelity: what the visitor sends is what the local service
 * gets (method, path, query, headers, Host), and what the service answers is
 * what the visitor gets (status, repeated headers, compressed bytes, redirects).
 * The visitor side is a raw socket, so nothing decompresses or follows anything.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import net from "node:net";
import type { TestAgent } from "../harness/agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";

// -- a raw HTTP/1.1 visitor ------------------------------------------------------------------

interface RawResponse {
  status: number;
  /** Header lines in order, names lower-cased, repeated ones kept apart. */
  headers: [string, string][];
  /** The body as it came on the wire (de-chunked, never decompressed). */
  body: Buffer;
  chunked: boolean;
}

const header = (r: RawResponse, name: string) => r.headers.find(([n]) => n === name)?.[1];

function parseResponse(raw: Buffer, method = "GET"): RawResponse {
  const end = raw.indexOf("\r\n\r\n");
  if (end < 0) throw new Error(`no complete response head in ${JSON.stringify(raw.toString("latin1").slice(0, 200))}`);
  const [statusLine, ...lines] = raw.subarray(0, end).toString("latin1").split("\r\n");
  const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine!)?.[1]);
  const headers = lines.map((l): [string, string] => {
    const i = l.indexOf(":");
    return [l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim()];
  });
  let body = raw.subarray(end + 4);
  const chunked = headers.some(([n, v]) => n === "transfer-encoding" && /chunked/i.test(v));
  if (method === "HEAD") body = Buffer.alloc(0); // a HEAD answer has a head only, whatever it says of a body
  else if (chunked) {
    const parts: Buffer[] = [];
    let at = 0;
    for (;;) {
      const nl = body.indexOf("\r\n", at);
      const size = parseInt(body.subarray(at, nl).toString("latin1"), 16);
      if (!Number.isFinite(size) || nl < 0) throw new Error("malformed chunked body");
      if (size === 0) break;
      parts.push(body.subarray(nl + 2, nl + 2 + size));
      at = nl + 2 + size + 2;
    }
    body = Buffer.concat(parts);
  }
  return { status, headers, body, chunked };
}

/** Sends one request on a fresh connection (Connection: close) and reads the whole answer. */
function rawRequest(
  port: number,
  opts: { method?: string; path: string; host: string; headers?: [string, string][]; body?: string | Buffer },
  timeoutMs = 10_000,
): Promise<RawResponse> {
  const body = opts.body === undefined ? undefined : Buffer.from(opts.body);
  const lines = [`${opts.method ?? "GET"} ${opts.path} HTTP/1.1`, `Host: ${opts.host}`, "Connection: close"];
  for (const [n, v] of opts.headers ?? []) lines.push(`${n}: ${v}`);
  if (body) lines.push(`Content-Length: ${body.byteLength}`);
  const head = Buffer.from(lines.join("\r\n") + "\r\n\r\n", "latin1");
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = net.connect(port, "127.0.0.1", () => socket.write(body ? Buffer.concat([head, body]) : head));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response within ${timeoutMs} ms for ${opts.method ?? "GET"} ${opts.path}`));
    }, timeoutMs);
    socket.on("data", (c: Buffer) => chunks.push(c));
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on("close", () => {
      clearTimeout(timer);
      try {
        resolve(parseResponse(Buffer.concat(chunks), opts.method));
      } catch (err) {
        reject(err);
      }
    });
  });
}

// -- the local service ------------------------------------------------------------------------

interface Seen {
  method: string;
  /** Path and query exactly as the service's URL has them. */
  target: string;
  headers: [string, string][];
  body: string;
}

/** Requests the service got, by the x-test-id header the tests send. */
const seen = new Map<string, Seen>();
const seenTargets: string[] = [];

const COOKIES = ["session=abc123; Path=/; HttpOnly", "theme=dark; Expires=Wed, 21 Oct 2037 07:28:00 GMT; Path=/", "lang=en-GB, fr; Path=/"];
const GZIP_SOURCE = Buffer.from("burrow keeps compressed bodies as they are. ".repeat(400));
const GZIPPED = Buffer.from(Bun.gzipSync(GZIP_SOURCE));
const FIXED_BODY = Buffer.alloc(12_345, "x");

const upstream = Bun.serve({
  hostname: "127.0.0.1",
  port: 0,
  async fetch(req) {
    const url = new URL(req.url);
    const target = url.pathname + url.search;
    const body = req.body ? await req.text() : "";
    const record: Seen = { method: req.method, target, headers: [...req.headers], body };
    seenTargets.push(target);
    const id = req.headers.get("x-test-id");
    if (id) seen.set(id, record);

    switch (url.pathname) {
      case "/cookies": {
        const h = new Headers();
        for (const c of COOKIES) h.append("set-cookie", c);
        return new Response("three cookies", { headers: h });
      }
      case "/fixed":
        return new Response(FIXED_BODY, { headers: { "content-length": String(FIXED_BODY.byteLength) } });
      case "/streamed":
        // produced in pieces over time, so no one can know its length up front
        return new Response(
          (async function* () {
            for (let i = 0; i < 10; i++) {
              yield new TextEncoder().encode(`part ${i};`);
              await Bun.sleep(2);
            }
          })(),
        );
      case "/gzip":
        return new Response(GZIPPED, { headers: { "content-encoding": "gzip", "content-type": "text/plain" } });
      case "/negotiate": {
        const accepts = (req.headers.get("accept-encoding") ?? "").includes("gzip");
        return accepts
          ? new Response(GZIPPED, { headers: { "content-encoding": "gzip", vary: "accept-encoding" } })
          : new Response(GZIP_SOURCE, { headers: { vary: "accept-encoding" } });
      }
      case "/redirect":
        return new Response(null, { status: 302, headers: { location: "/redirect-target?from=redirect" } });
      case "/status": {
        const code = Number(url.searchParams.get("code"));
        const bodyless = code === 204 || code === 304;
        return new Response(bodyless ? null : `status ${code}`, { status: code, headers: { etag: '"v1"' } });
      }
      default:
        return Response.json(record, { headers: { "x-echo-method": req.method } });
    }
  },
});

// -- server, user, agents ----------------------------------------------------------------------

let rig: Rig;
/** The agent of "fid", the tunnel that changes nothing. */
let plain: TestAgent;
const local = `127.0.0.1:${upstream.port}`;

beforeAll(async () => {
  rig = await withServer({ username: "fidelity" });
  const start = (subdomain: string, args: string[] = []) => rig.startAgent({ kind: "http", target: local, args: ["--subdomain", subdomain, ...args] });
  [plain] = await Promise.all([start("fid"), start("fid-rewrite", ["--host-header", "rewrite"]), start("fid-fixed", ["--host-header", "example.test"])]);
});

afterAll(async () => {
  await rig?.close();
  upstream.stop(true);
});

const hostOf = (sub: string) => `${sub}.localhost:${rig.server.edgePort}`;
const visit = (sub: string, opts: Omit<Parameters<typeof rawRequest>[1], "host">) => rawRequest(rig.server.edgePort, { ...opts, host: hostOf(sub) });
const seenHeader = (s: Seen | undefined, name: string) => s?.headers.find(([n]) => n === name)?.[1];
const seenHeaders = (s: Seen | undefined, name: string) => (s?.headers ?? []).filter(([n]) => n === name).map(([, v]) => v);
let nextId = 0;
const newId = () => `t${++nextId}-${crypto.randomUUID().slice(0, 8)}`;

// -- the tests ----------------------------------------------------------------------------------

describe("requests reach the local service unchanged", () => {
  for (const method of ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]) {
    test(`a ${method} request keeps its method, path, query and body`, async () => {
      const id = newId();
      const hasBody = ["POST", "PUT", "PATCH", "DELETE"].includes(method);
      const body = hasBody ? `payload of ${method} ${id}` : undefined;
      const res = await visit("fid", { method, path: `/items/42?method=${method}&id=${id}`, headers: [["x-test-id", id]], body });
      expect(res.status).toBe(200);
      expect(header(res, "x-echo-method")).toBe(method);
      const got = seen.get(id);
      expect(got?.method).toBe(method);
      expect(got?.target).toBe(`/items/42?method=${method}&id=${id}`);
      expect(got?.body).toBe(body ?? "");
      if (method === "HEAD") expect(res.body.byteLength).toBe(0);
      else expect(JSON.parse(res.body.toString()).target).toBe(`/items/42?method=${method}&id=${id}`);
    });
  }

  test("encoded characters, odd paths and a long query reach the local service byte for byte", async () => {
    const longQuery = Array.from({ length: 300 }, (_, i) => `k${i}=${"v".repeat(10)}%20${i}`).join("&");
    const targets = [
      "/a%20b/%E2%9C%93/%3F%23?q=a%26b&r=%2B+x&e=&&dup=1&dup=2%2F",
      "/p;param=1/~user/file.name:colon@at!$'()*,",
      "/unicode/%F0%9F%9A%80?emoji=%F0%9F%9A%80&plus=a+b",
      "/trailing/?",
      "/empty-query?",
      `/long?${longQuery}`,
    ];
    expect(targets.at(-1)!.length).toBeGreaterThan(6000);
    for (const target of targets) {
      const id = newId();
      const res = await visit("fid", { path: target, headers: [["x-test-id", id]] });
      expect(res.status).toBe(200);
      // a URL parser drops a bare "?"; compare with what the same parser makes of the original
      const u = new URL(target, "http://x");
      expect(seen.get(id)?.target).toBe(u.pathname + u.search);
      if (!target.endsWith("?")) expect(seen.get(id)?.target).toBe(target);
    }
  });

  test("a path not in its normal form reaches the local service made normal (routes.md), its query as sent", async () => {
    for (const [target, normal] of [
      ["/double//slashes//inside//", "/double/slashes/inside/"],
      ["/a/./b/../c?x=/../%2f", "/a/c?x=/../%2f"],
      ["/%7euser/%61%62c/caf%c3%a9", "/~user/abc/caf%C3%A9"],
    ]) {
      const id = newId();
      const res = await visit("fid", { path: target!, headers: [["x-test-id", id]] });
      expect(res.status).toBe(200);
      expect(seen.get(id)?.target).toBe(normal);
    }
  });

  test("a request header sent twice reaches the local service with both values", async () => {
    const id = newId();
    await visit("fid", { path: "/echo", headers: [["x-test-id", id], ["x-multi", "first"], ["x-multi", "second"]] });
    const values = seenHeaders(seen.get(id), "x-multi").flatMap((v) => v.split(",").map((s) => s.trim()));
    expect(values).toEqual(["first", "second"]);
  });

  test("custom request headers, cookies and authorization reach the local service", async () => {
    const id = newId();
    await visit("fid", {
      method: "POST",
      path: "/echo",
      headers: [
        ["x-test-id", id],
        ["authorization", "Bearer abc.def.ghi"],
        ["cookie", "a=1; b=2"],
        ["x-custom", "  spaced value  "],
        ["content-type", "application/json"],
      ],
      body: '{"k":1}',
    });
    const got = seen.get(id);
    expect(seenHeader(got, "authorization")).toBe("Bearer abc.def.ghi");
    expect(seenHeader(got, "cookie")).toBe("a=1; b=2");
    expect(seenHeader(got, "x-custom")).toBe("spaced value");
    expect(seenHeader(got, "content-type")).toBe("application/json");
    expect(got?.body).toBe('{"k":1}');
  });
});

describe("responses reach the visitor unchanged", () => {
  test("several Set-Cookie headers reach the visitor as separate header lines", async () => {
    const res = await visit("fid", { path: "/cookies" });
    expect(res.status).toBe(200);
    expect(res.headers.filter(([n]) => n === "set-cookie").map(([, v]) => v)).toEqual(COOKIES);
  });

  test("a fixed-size body keeps its Content-Length", async () => {
    const res = await visit("fid", { path: "/fixed" });
    expect(res.status).toBe(200);
    expect(header(res, "content-length")).toBe(String(FIXED_BODY.byteLength));
    expect(res.chunked).toBe(false);
    expect(res.body.equals(FIXED_BODY)).toBe(true);
  });

  test("a HEAD request gets the Content-Length of the fixed-size body, and no body", async () => {
    const res = await visit("fid", { method: "HEAD", path: "/fixed" });
    expect(res.status).toBe(200);
    expect(header(res, "content-length")).toBe(String(FIXED_BODY.byteLength));
    expect(res.body.byteLength).toBe(0);
  });

  test("a HEAD answer without a length gains none on the way (no Content-Length: 0 that would say the body is empty)", async () => {
    const direct = await rawRequest(upstream.port!, { method: "HEAD", path: "/streamed", host: "127.0.0.1" });
    expect(header(direct, "content-length")).toBeUndefined();
    const res = await visit("fid", { method: "HEAD", path: "/streamed" });
    expect(res.status).toBe(200);
    expect(header(res, "content-length")).toBeUndefined();
    expect(res.body.byteLength).toBe(0);
  });

  test("a streamed body without a length arrives chunked and whole", async () => {
    const res = await visit("fid", { path: "/streamed" });
    expect(res.status).toBe(200);
    expect(header(res, "content-length")).toBeUndefined();
    expect(res.chunked).toBe(true);
    expect(res.body.toString()).toBe(Array.from({ length: 10 }, (_, i) => `part ${i};`).join(""));
  });

  test("a gzip body reaches the visitor as the same compressed bytes", async () => {
    const res = await visit("fid", { path: "/gzip", headers: [["accept-encoding", "gzip"]] });
    expect(res.status).toBe(200);
    expect(header(res, "content-encoding")).toBe("gzip");
    expect(res.body.equals(GZIPPED)).toBe(true);
    expect(Buffer.from(Bun.gunzipSync(new Uint8Array(res.body))).equals(GZIP_SOURCE)).toBe(true);
  });

  test("a visitor that sends no Accept-Encoding gets an uncompressed body from a service that honours it", async () => {
    const id = newId();
    const res = await visit("fid", { path: "/negotiate", headers: [["x-test-id", id]] });
    expect(res.status).toBe(200);
    expect(header(res, "content-encoding")).toBeUndefined();
    expect(res.body.equals(GZIP_SOURCE)).toBe(true);
    expect(seenHeader(seen.get(id), "accept-encoding") ?? "identity").not.toContain("gzip");
  });

  test("a visitor that accepts gzip gets it from a service that honours Accept-Encoding", async () => {
    const res = await visit("fid", { path: "/negotiate", headers: [["accept-encoding", "gzip, deflate"]] });
    expect(header(res, "content-encoding")).toBe("gzip");
    expect(res.body.equals(GZIPPED)).toBe(true);
  });

  test("a 204 and a 304 reach the visitor with their headers and no body", async () => {
    for (const code of [204, 304]) {
      const res = await visit("fid", { path: `/status?code=${code}`, headers: [["if-none-match", '"v1"']] });
      expect(res.status).toBe(code);
      expect(header(res, "etag")).toBe('"v1"');
      expect(res.body.byteLength).toBe(0);
    }
  });

  test("a redirect reaches the visitor as a redirect and is not followed", async () => {
    const before = seenTargets.filter((t) => t.startsWith("/redirect-target")).length;
    const res = await visit("fid", { path: "/redirect" });
    expect(res.status).toBe(302);
    expect(header(res, "location")).toBe("/redirect-target?from=redirect");
    expect(seenTargets.filter((t) => t.startsWith("/redirect-target")).length).toBe(before);
  });

  test("error statuses and their bodies reach the visitor as the service sent them", async () => {
    for (const code of [404, 418, 500, 503]) {
      const res = await visit("fid", { path: `/status?code=${code}` });
      expect(res.status).toBe(code);
      expect(res.body.toString()).toBe(`status ${code}`);
    }
  });
});

describe("forwarding headers", () => {
  test("X-Forwarded-For carries the visitor's address, X-Forwarded-Proto http and X-Forwarded-Host the tunnel host", async () => {
    const id = newId();
    await visit("fid", { path: "/echo", headers: [["x-test-id", id]] });
    const got = seen.get(id);
    expect(seenHeader(got, "x-forwarded-for")).toBe("127.0.0.1");
    expect(seenHeader(got, "x-forwarded-proto")).toBe("http");
    expect(seenHeader(got, "x-forwarded-host")).toBe(hostOf("fid"));
  });

  test("an incoming X-Forwarded-For is appended to, and a spoofed proto or host is replaced", async () => {
    const id = newId();
    await visit("fid", {
      path: "/echo",
      headers: [
        ["x-test-id", id],
        ["x-forwarded-for", "203.0.113.7, 198.51.100.2"],
        ["x-forwarded-proto", "https"],
        ["x-forwarded-host", "evil.example"],
      ],
    });
    const got = seen.get(id);
    expect(seenHeaders(got, "x-forwarded-for")).toEqual(["203.0.113.7, 198.51.100.2, 127.0.0.1"]);
    expect(seenHeaders(got, "x-forwarded-proto")).toEqual(["http"]);
    expect(seenHeaders(got, "x-forwarded-host")).toEqual([hostOf("fid")]);
  });
});

describe("the Host header", () => {
  test("by default the visitor's Host reaches the local service", async () => {
    const id = newId();
    await visit("fid", { path: "/echo", headers: [["x-test-id", id]] });
    expect(seenHeader(seen.get(id), "host")).toBe(hostOf("fid"));
  });

  test("--host-header rewrite sends the local service's own address", async () => {
    const id = newId();
    const res = await visit("fid-rewrite", { path: "/echo", headers: [["x-test-id", id]] });
    expect(res.status).toBe(200);
    expect(seenHeader(seen.get(id), "host")).toBe(local);
    expect(seenHeader(seen.get(id), "x-forwarded-host")).toBe(hostOf("fid-rewrite"));
  });

  test("--host-header with a name sends that name", async () => {
    const id = newId();
    const res = await visit("fid-fixed", { path: "/echo", headers: [["x-test-id", id]] });
    expect(res.status).toBe(200);
    expect(seenHeader(seen.get(id), "host")).toBe("example.test");
  });
});

test("the agent prints one line per request with method, path, status and duration", async () => {
  const id = newId();
  const res = await visit("fid", { method: "POST", path: `/logged/${id}?code=1`, body: "x" });
  expect(res.status).toBe(200);
  const line = await plain.output.waitFor(new RegExp(`POST\\s+/logged/${id}\\?code=1\\s+200\\s+\\d+ ms`), 5_000);
  expect(line).toMatch(/^\d\d:\d\d:\d\d\s/);
  await visit("fid", { path: `/status?code=503&id=${id}` });
  await plain.output.waitFor(new RegExp(`GET\\s+/status\\?code=503&id=${id}\\s+503\\s+\\d+ ms`), 5_000);
  expect(plain.output.lines.filter((l) => l.includes(`/logged/${id}`))).toHaveLength(1);
});
