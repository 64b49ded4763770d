/**
 * compress-response: which coding a response gets (the visitor's
 * Accept-Encoding with q-values against the allowed list), when it gets
 * none (already encoded, a range, no body, no-transform), the head's
 * changes, and the streaming compressor read back by real curl
 * (`--compressed`, for each coding curl has) from a loopback server that
 * streams its body through it piece by piece.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { gunzipSync } from "node:zlib";
import { compressedHead, compressionFor, createCompressor, negotiate, type Coding } from "../../src/policy/compression.ts";
import { answered, policyOf, requestInput } from "./policy-harness.ts";

describe("negotiation", () => {
  const all: Coding[] = ["gzip", "deflate", "br", "zstd"];
  test("the highest q wins; ties go to the policy's order; q=0 and absent codings are never chosen; * stands for the rest", () => {
    expect(negotiate("gzip;q=1.0, br; q=0.5, *;q=0", all)).toBe("gzip");
    expect(negotiate("gzip;q=0.4, br", all)).toBe("br");
    expect(negotiate("gzip, br", ["br", "gzip"])).toBe("br");
    expect(negotiate("br;q=0, identity", all)).toBeUndefined();
    expect(negotiate("*", ["zstd"])).toBe("zstd");
    expect(negotiate("x-gzip", all)).toBe("gzip");
    expect(negotiate(undefined, all)).toBeUndefined();
    expect(negotiate("compress", all)).toBeUndefined();
  });

  const ask = (req: Record<string, string>, res: Record<string, string>, status = 200, method = "GET") =>
    compressionFor({ method, status, header: (of, name) => (of === "req" ? req : res)[name] }, all);

  test("never on an encoded body, a range, a body-less answer, or Cache-Control: no-transform", () => {
    const accepts = { "accept-encoding": "gzip" };
    expect(ask(accepts, { "content-type": "text/html" })).toEqual({ coding: "gzip" });
    expect(ask(accepts, { "content-encoding": "br" })).toMatchObject({ alreadyCompressed: true });
    expect(ask(accepts, {}, 206).coding).toBeUndefined();
    expect(ask({ ...accepts, range: "bytes=0-10" }, {}).coding).toBeUndefined();
    expect(ask(accepts, { "content-range": "bytes 0-10/100" }).coding).toBeUndefined();
    expect(ask(accepts, {}, 204).coding).toBeUndefined();
    expect(ask(accepts, {}, 304).coding).toBeUndefined();
    expect(ask(accepts, {}, 200, "HEAD").coding).toBeUndefined();
    expect(ask(accepts, { "cache-control": "public, no-transform" }).coding).toBeUndefined();
    expect(ask(accepts, { "content-length": "0" }).coding).toBeUndefined();
  });

  test("the head: no Content-Length, the coding, Vary: Accept-Encoding added or extended, a strong ETag made weak", () => {
    expect(compressedHead([["Content-Length", "10"], ["ETag", '"abc"'], ["Vary", "Origin"]], "br")).toEqual([
      ["ETag", 'W/"abc"'],
      ["Vary", "Origin, Accept-Encoding"],
      ["content-encoding", "br"],
    ]);
    expect(compressedHead([["etag", 'W/"x"']], "gzip")).toEqual([["etag", 'W/"x"'], ["content-encoding", "gzip"], ["vary", "Accept-Encoding"]]);
  });
});

describe("the action", () => {
  const p = policyOf(`
on_http_response:
  - expressions: ["res.content_type.startsWith('text/') || res.content_type == 'application/json'"]
    actions:
      - type: compress-response
        config: { algorithms: [br, gzip, compress] }
      - type: add-headers
        config: { headers: { x-coding: "\${actions.ngrok.compress.negotiated_algorithm}" } }
`);
  test("names the coding on the outcome and changes the head; an image or an encoded body is left alone", async () => {
    const out = await p.run("on_http_response", requestInput({ headers: [["Accept-Encoding", "gzip, br"]], response: { status: 200, headers: [["Content-Type", "text/html"], ["Content-Length", "5000"]] } }));
    expect(out.compression).toBe("br");
    expect(out.response!.headers).toEqual([["Content-Type", "text/html"], ["content-encoding", "br"], ["vary", "Accept-Encoding"], ["x-coding", "br"]]);
    const image = await p.run("on_http_response", requestInput({ headers: [["Accept-Encoding", "gzip"]], response: { status: 200, headers: [["Content-Type", "image/png"]] } }));
    expect(image.compression).toBeUndefined();
    const encoded = await p.run("on_http_response", requestInput({ headers: [["Accept-Encoding", "gzip"]], response: { status: 200, headers: [["Content-Type", "text/plain"], ["Content-Encoding", "gzip"]] } }));
    expect(encoded.compression).toBeUndefined();
    expect(answered(encoded)).toBeUndefined();
  });

  test("it runs in on_http_response only", async () => {
    const { errorsOf } = await import("./policy-harness.ts");
    expect(errorsOf("on_http_request:\n  - actions: [{ type: compress-response }]\n")[0]).toMatchObject({ code: "ACTION_PHASE", line: 2 });
  });
});

describe("the streaming compressor, read back by curl --compressed", () => {
  const text = Array.from({ length: 400 }, (_, i) => `line ${i}: the quick brown fox jumps over the lazy dog\n`).join("");
  let server: ReturnType<typeof Bun.serve>;

  beforeAll(() => {
    // a service whose body goes through the compressor in pieces, as the edge will stream it
    server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      fetch(req) {
        const verdict = compressionFor({ method: req.method, status: 200, header: (of, name) => (of === "req" ? (req.headers.get(name) ?? undefined) : name === "content-type" ? "text/plain" : undefined) }, ["zstd", "br", "gzip", "deflate"]);
        if (!verdict.coding) return new Response(text);
        const c = createCompressor(verdict.coding);
        const pieces = text.match(/[\s\S]{1,997}/g)!;
        const body = new ReadableStream<Uint8Array>({
          async start(controller) {
            for (const piece of pieces) controller.enqueue(await c.push(new TextEncoder().encode(piece)));
            controller.enqueue(await c.end());
            controller.close();
          },
        });
        return new Response(body, { headers: Object.fromEntries(compressedHead([["content-type", "text/plain"]], verdict.coding)) });
      },
    });
  });
  afterAll(() => server?.stop(true));

  for (const coding of ["gzip", "deflate", "br", "zstd"] as const) {
    test(`${coding}: curl decodes exactly the body, and was sent it encoded`, async () => {
      const url = `http://127.0.0.1:${server.port}/`;
      const proc = Bun.spawn(["curl", "-sS", "--max-time", "20", "--compressed", "-H", `Accept-Encoding: ${coding}`, "-D", "-", url], { stdout: "pipe", stderr: "pipe" });
      const [out, err, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited]);
      expect(err).toBe("");
      expect(code).toBe(0);
      const split = out.indexOf("\r\n\r\n");
      expect(out.slice(0, split).toLowerCase()).toContain(`content-encoding: ${coding}`);
      expect(out.slice(split + 4)).toBe(text);
    });
  }

  test("each piece is flushed: what a push gives back decodes to all the body so far", async () => {
    const c = createCompressor("gzip");
    const first = await c.push(new TextEncoder().encode("hello "));
    expect(first.length).toBeGreaterThan(0);
    const second = await c.push(new TextEncoder().encode("world"));
    const rest = await c.end();
    expect(gunzipSync(Buffer.concat([first, second, rest])).toString()).toBe("hello world");
  });
});
