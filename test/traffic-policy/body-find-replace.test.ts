/**
 * request-body-find-replace and response-body-find-replace at the edge,
 * through a real server, a real agent and a real service (Bun.serve), with
 * curl: the request's body rewritten before the service gets it (groups,
 * deletion, rules in order, `${...}` in from and to), framed by its new
 * length whatever the visitor's framing, over HTTP/1.1 and HTTP/2; the
 * response's body rewritten before the visitor gets it, with a length,
 * then compressed when compress-response says so; what is left alone (an
 * encoded body, a HEAD, a body over the cap); and the bounds: a body over
 * --policy-body-limit (413), a pattern of quadratic cost on a crafted body
 * (500, at once), one of exponential cost for a backtracking engine (done
 * in linear time).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { runBurrow } from "../harness/run.ts";
import { echo, withPolicy, type Echoed, type PolicyTunnel } from "./rig.ts";

const BODY_LIMIT = 64 * 1024;
const RESPONSE_LIMIT = 96 * 1024;

const policy = `
on_http_request:
  - expressions: ["req.url.path == '/groups'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: 'user=(\\w+)&pass=(\\w+)', to: 'pass=$2&user=$1 ($$)' }] }
  - expressions: ["req.url.path == '/delete'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: '"secret":"[^"]*",?' }, { from: 'token=\\d+', to: "" }] }
  - expressions: ["req.url.path == '/order'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: 'cat', to: 'dog' }, { from: 'dog', to: 'wolf' }] }
  - expressions: ["req.url.path == '/interp'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: '\${req.headers["x-find"][0]}', to: '<\${req.method}:$1>' }] }
  - expressions: ["req.url.path == '/quadratic'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: '(a*c)?', to: 'x' }] }
  - expressions: ["req.url.path == '/exponential'"]
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: '(a+)+$', to: 'x' }] }
on_http_response:
  - expressions: ["req.url.path.startsWith('/page')"]
    actions:
      - type: response-body-find-replace
        config: { replacements: [{ from: 'http://localhost:3000(/\\w*)', to: 'https://\${req.host}$1' }, { from: 'INTERNAL', to: '' }] }
  - expressions: ["req.url.path.startsWith('/page/compressed')"]
    actions:
      - type: compress-response
        config: { algorithms: [gzip] }
`;

const PAGE = `<a href="http://localhost:3000/docs">docs</a> INTERNAL <a href="http://localhost:3000/">home</a>\n`;

/** The service: the echo, or a page by path (chunked when it streams, encoded, or large). */
async function service(req: Request): Promise<Response> {
  const path = new URL(req.url).pathname;
  if (path === "/page" || path === "/page/compressed") return new Response(PAGE, { headers: { "content-type": "text/html", etag: '"v1"' } });
  if (path === "/page/range") return new Response(PAGE.slice(0, 40), { status: 206, headers: { "content-type": "text/html", "content-range": `bytes 0-39/${PAGE.length}` } });
  if (path === "/page/chunked") {
    // in pieces that cut the patterns in two: the rewrite sees the body whole
    const bytes = new TextEncoder().encode(PAGE);
    const stream = new ReadableStream({
      start(c) {
        for (let i = 0; i < bytes.length; i += 13) c.enqueue(bytes.slice(i, i + 13));
        c.close();
      },
    });
    return new Response(stream, { headers: { "content-type": "text/html" } });
  }
  // labelled encoded but readable as text: only its Content-Encoding says it is not to be rewritten
  if (path === "/page/labelled") return new Response(PAGE, { headers: { "content-type": "text/html", "content-encoding": "x-custom" } });
  if (path === "/page/encoded") return new Response(Bun.gzipSync(PAGE), { headers: { "content-type": "text/html", "content-encoding": "gzip" } });
  if (path === "/page/large" || path === "/page/compressed-large") return new Response(PAGE.repeat(Math.ceil((RESPONSE_LIMIT * 2) / PAGE.length)), { headers: { "content-type": "text/html" } });
  return echo(req);
}

let t: PolicyTunnel;
let dir: string;
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-find-replace-"));
  t = await withPolicy(policy, { upstream: service, server: { args: ["--policy-body-limit", String(BODY_LIMIT), "--policy-response-body-limit", String(RESPONSE_LIMIT)] } });
}, 30_000);
afterAll(async () => {
  await t?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

let files = 0;
function file(body: string | Uint8Array): string {
  const path = join(dir, `body-${files++}`);
  writeFileSync(path, body);
  return path;
}
const CHUNKED = ["-H", "Transfer-Encoding: chunked"];
const H2 = ["--http2-prior-knowledge"];

async function post(path: string, body: string | Uint8Array, extra: string[] = []) {
  const r = await t.curl(path, ["--data-binary", `@${file(body)}`, "-H", "Content-Type: text/plain", ...extra]);
  return { ...r, seen: r.status === 200 ? (JSON.parse(r.body) as Echoed) : undefined };
}

describe("request-body-find-replace", () => {
  for (const [carrier, extra] of [
    ["HTTP/1.1 with a Content-Length", []],
    ["HTTP/1.1 chunked", CHUNKED],
    ["HTTP/2", H2],
    ["HTTP/2 without a length", [...H2, ...CHUNKED]],
  ] as const) {
    test(`${carrier}: groups in the replacement; the service gets the new body with its new Content-Length and no Transfer-Encoding`, async () => {
      const r = await post("/groups", "a=1&user=ann&pass=s3cret&b=2", [...extra]);
      expect(r.status).toBe(200);
      const want = "a=1&pass=s3cret&user=ann ($)&b=2";
      expect(r.seen!.body).toBe(want);
      expect(r.seen!.headers["content-length"]).toBe(String(Buffer.byteLength(want)));
      expect(r.seen!.headers["transfer-encoding"]).toBeUndefined();
    });
  }

  test("an omitted or empty `to` deletes every match", async () => {
    const r = await post("/delete", `{"secret":"abc","name":"x"} token=123 and token=456`, CHUNKED);
    expect(r.seen!.body).toBe(`{"name":"x"}  and `);
    expect(r.seen!.headers["content-length"]).toBe(String(Buffer.byteLength(r.seen!.body)));
  });

  test("rules run in order, each on what the one before left", async () => {
    const r = await post("/order", "cat and dog");
    expect(r.seen!.body).toBe("wolf and wolf");
  });

  test("`${...}` in from and to: the pattern from a header, the method in the replacement; one that makes no pattern fails the action (500)", async () => {
    const r = await post("/interp", "one nine ten", ["-H", "X-Find: \\b(n\\w+)"]);
    expect(r.seen!.body).toBe("one <POST:nine> ten");
    const bad = await post("/interp", "one nine ten", ["-H", "X-Find: (unclosed"]);
    expect(bad.status).toBe(500);
    expect(bad.body).toContain("could not be evaluated");
  });

  test("a kept-alive connection: the second request after a rewritten one is read from where the first's body ended", async () => {
    const path = file("user=bob&pass=pw1");
    const args = ["-sS", "--max-time", "20", "-w", "\\n%{http_code} %{num_connects}\\n", "--data-binary", `@${path}`, ...CHUNKED];
    const proc = Bun.spawn(["curl", ...args, t.url("/groups"), "--next", ...args, t.url("/order")], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
    const out = await new Response(proc.stdout).text();
    expect(await proc.exited).toBe(0);
    expect(out).toContain(`"body":"pass=pw1&user=bob ($)"`);
    expect(out).toContain(`"body":"user=bob&pass=pw1"`);
    expect(out.match(/^200 \d$/gm)).toEqual(["200 1", "200 0"]);
  });

  test("a body that is not UTF-8 goes on unchanged", async () => {
    const bytes = new Uint8Array([0xff, 0xfe, 0x63, 0x61, 0x74, 0x00, 0x80]);
    const r = await t.curl("/order", ["--data-binary", `@${file(bytes)}`, "-o", join(dir, "out.bin")]);
    expect(r.status).toBe(200);
    const seen = JSON.parse(await Bun.file(join(dir, "out.bin")).text()) as Echoed;
    expect(seen.headers["content-length"]).toBe("7");
  });

  test("a body over --policy-body-limit is answered 413, chunked or not", async () => {
    const big = "cat ".repeat(BODY_LIMIT / 2);
    expect((await post("/order", big)).status).toBe(413);
    expect((await post("/order", big, CHUNKED)).status).toBe(413);
  });

  test("a pattern of quadratic cost under replace-all on a crafted body stops at its steps: 500, at once", async () => {
    const started = performance.now();
    const r = await post("/quadratic", "a".repeat(60_000));
    expect(r.status).toBe(500);
    // liveness only: unbounded, this is about 1.8e9 steps (minutes)
    expect(performance.now() - started).toBeLessThan(10_000);
  });

  test("a pattern of exponential cost for a backtracking engine runs in linear time", async () => {
    const started = performance.now();
    const r = await post("/exponential", `${"a".repeat(50_000)}b`);
    expect(r.status).toBe(200);
    expect(r.seen!.body.length).toBe(50_001);
    expect(performance.now() - started).toBeLessThan(10_000);
  });
});

describe("response-body-find-replace", () => {
  /** PAGE as the rules leave it, for a visitor that reached the tunnel at `host`. */
  const rewrittenPage = (host: string) => `<a href="https://${host}/docs">docs</a>  <a href="https://${host}/">home</a>\n`;
  const host = () => new URL(t.url("/")).host;

  for (const [what, path, extra] of [
    ["HTTP/1.1, a body of a length", "/page", []],
    ["HTTP/1.1, a chunked body", "/page/chunked", []],
    ["HTTP/2, a body of a length", "/page", H2],
    ["HTTP/2, a chunked body", "/page/chunked", H2],
    ["HTTP/1.0, a chunked body", "/page/chunked", ["--http1.0"]],
  ] as const) {
    test(`${what}: rewritten (groups, \${req.host}, a deletion), with a Content-Length of the new body`, async () => {
      const r = await t.curl(path, [...extra]);
      expect(r.status).toBe(200);
      expect(r.body).toBe(rewrittenPage(host()));
      expect(r.headers["content-length"]).toBe(String(Buffer.byteLength(r.body)));
      expect(r.headers["transfer-encoding"]).toBeUndefined();
    });
  }

  test("then compressed by compress-response (rewritten first): curl --compressed reads the rewritten page", async () => {
    const r = await t.curl("/page/compressed", ["--compressed"]);
    expect(r.status).toBe(200);
    expect(r.headers["content-encoding"]).toBe("gzip");
    expect(r.body).toBe(rewrittenPage(host()));
    const out = join(dir, "compressed.gz");
    const raw = await t.curl("/page/compressed", ["-H", "Accept-Encoding: gzip", "-o", out, ...H2]);
    expect(raw.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(await Bun.file(out).bytes()).toString()).toBe(rewrittenPage(host()));
  });

  test("a body the service encoded passes as it came", async () => {
    const out = join(dir, "encoded.gz");
    const r = await t.curl("/page/encoded", ["-H", "Accept-Encoding: gzip", "-o", out]);
    expect(r.status).toBe(200);
    expect(r.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(await Bun.file(out).bytes()).toString()).toBe(PAGE);
    const labelled = await t.curl("/page/labelled");
    expect(labelled.headers["content-encoding"]).toBe("x-custom");
    expect(labelled.body).toBe(PAGE);
  });

  test("the rewritten page's strong ETag is made weak (another body than the service's); a range (206) is left alone", async () => {
    const r = await t.curl("/page");
    expect(r.headers.etag).toBe('W/"v1"');
    const range = await t.curl("/page/range");
    expect(range.status).toBe(206);
    expect(range.body).toBe(PAGE.slice(0, 40));
  });

  test("a HEAD's answer is left alone: the service's own length, no body", async () => {
    const r = await t.curl("/page", ["-I"]);
    expect(r.status).toBe(200);
    // (-I and -D both print the head: its fields come twice)
    expect(new Set(r.headers["content-length"]!.split(", "))).toEqual(new Set([String(Buffer.byteLength(PAGE))]));
    expect(r.body.trim()).toBe("");
  });

  for (const [what, extra] of [
    ["HTTP/1.1", []],
    ["HTTP/2", H2],
  ] as const) {
    test(`${what}: a body over --policy-response-body-limit passes unchanged, whole`, async () => {
      const r = await t.curl("/page/large", [...extra]);
      expect(r.status).toBe(200);
      const want = PAGE.repeat(Math.ceil((RESPONSE_LIMIT * 2) / PAGE.length));
      expect(r.body.length).toBe(want.length);
      expect(r.body).toBe(want);
    });
  }

  test("a body over the cap that compress-response compresses: unrewritten, compressed as it comes", async () => {
    const r = await t.curl("/page/compressed-large", ["--compressed"]);
    expect(r.status).toBe(200);
    expect(r.headers["content-encoding"]).toBe("gzip");
    expect(r.body).toBe(PAGE.repeat(Math.ceil((RESPONSE_LIMIT * 2) / PAGE.length)));
  });
});

describe("the CLI", () => {
  test("`burrow policy test`: the body the service would get, and that the response's would be rewritten", async () => {
    const path = file(`on_http_request:
  - actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: 'pass=\\w+', to: 'pass=***' }] }
on_http_response:
  - actions:
      - type: response-body-find-replace
        config: { replacements: [{ from: 'a', to: 'b' }] }
`);
    const out = await runBurrow(["policy", "test", path, "--request", "POST /login", "--body", "user=ann&pass=hunter2", "--status", "200"]);
    expect(out.code).toBe(0);
    expect(out.stdout).toContain("   Content-Length: 17\n   | user=ann&pass=***\n");
    expect(out.stdout).toContain("=> the edge would send the service's 200, its body rewritten by 1 replacement\n");
  });

  test("`burrow policy check`: a `from` that is no RE2 pattern is refused with its path; an empty list, and an unknown field, too", async () => {
    const path = file(`on_http_request:
  - name: scrub
    actions:
      - type: request-body-find-replace
        config: { replacements: [{ from: 'ok', to: 'fine' }, { from: '(?<=lookbehind)x' }] }
on_http_response:
  - actions:
      - type: response-body-find-replace
        config: { replacements: [] }
      - type: response-body-find-replace
        config: { replacements: [{ from: 'a', with: 'b' }] }
`);
    const out = await runBurrow(["policy", "check", "--json", path]);
    expect(out.code).toBe(1);
    const errors = (JSON.parse(out.stdout) as { errors: { code: string; message: string; line: number; column: number }[] }).errors;
    expect(errors.map((e) => [e.code, e.line])).toEqual([
      ["ACTION_CONFIG", 5],
      ["ACTION_CONFIG", 9],
      ["ACTION_CONFIG", 11],
    ]);
    // the second rule's `from`, where it is in the file
    expect(errors[0]!.column).toBe("        config: { replacements: [{ from: 'ok', to: 'fine' }, { from: ".length + 1);
    expect(errors[0]!.message).toContain("not an RE2 regular expression");
  });
});

describe("a response body larger than the tunnel stream's window (512 KiB), under the default cap (4 MiB)", () => {
  test("is held whole (its credit goes back as it is held) and rewritten, over HTTP/1.1 and HTTP/2", async () => {
    const line = "see http://localhost:3000/x INTERNAL\n";
    const big = line.repeat(Math.ceil((1536 * 1024) / line.length));
    // a server of its own: the default caps
    await using wide = await withPolicy(policy, { upstream: () => new Response(big) });
    const want = big.replaceAll("http://localhost:3000/x", `https://${new URL(wide.url("/")).host}/x`).replaceAll("INTERNAL", "");
    for (const extra of [[], H2]) {
      const r = await wide.curl("/page", [...extra]);
      expect(r.status).toBe(200);
      expect(r.headers["content-length"]).toBe(String(want.length));
      expect(r.body).toBe(want);
    }
  });
});
