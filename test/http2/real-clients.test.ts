/**
 * The engine with real HTTP/2 peers, on a test server (test/harness/h2-echo.ts):
 * curl with prior knowledge and over TLS with ALPN, nghttp2's nghttp (a
 * request body, every frame checked by nghttp itself) and h2load (many
 * streams on several connections at once), and Chromium loading a page and
 * a hundred requests over one h2 connection. Each checks our framing, HPACK
 * and flow control against an implementation we did not write.
 */
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { selfSignedCertificate } from "../harness/certs.ts";
import { chromiumPath } from "../harness/chromium.ts";
import { startH2Echo, type H2EchoServer } from "../harness/h2-echo.ts";
import { H2LOAD, NGHTTP, nghttp2Available, run } from "../harness/nghttp2.ts";

setDefaultTimeout(120_000);

let plain: H2EchoServer;
let tls: H2EchoServer;
const dir = mkdtempSync(join(tmpdir(), "burrow-h2-"));
const upload = join(dir, "upload.bin");
const uploadBytes = new Uint8Array(3 * 1024 * 1024).map((_, i) => (i * 7919) % 251);
const md5 = (b: Uint8Array | string) => createHash("md5").update(b).digest("hex");

beforeAll(async () => {
  if (!nghttp2Available()) throw new Error("nghttp and h2load are not installed: install Debian's nghttp2-client package (.ci/run installs it)");
  writeFileSync(upload, uploadBytes);
  plain = await startH2Echo();
  const cert = await selfSignedCertificate({ names: ["localhost"], ips: ["127.0.0.1"] });
  tls = await startH2Echo({ tls: { cert: cert.certPem, key: cert.keyPem } });
});
afterAll(async () => {
  await plain?.stop();
  await tls?.stop();
  rmSync(dir, { recursive: true, force: true });
});

describe("curl", () => {
  test("--http2-prior-knowledge: HTTP/2, the answer whole", async () => {
    const r = await run(["curl", "-sS", "--http2-prior-knowledge", "-w", "\\n%{http_version} %{http_code}", `http://127.0.0.1:${plain.port}/hello?x=1`]);
    expect(r.stdout).toBe("GET /hello?x=1\n\n2 200");
  });

  test("over TLS, HTTP/2 chosen by ALPN", async () => {
    const r = await run(["curl", "-sSk", "--http2", "-w", "\\n%{http_version}", `https://127.0.0.1:${tls.port}/tls`]);
    expect(r.stdout).toBe("GET /tls\n\n2");
    expect(tls.alpn.at(-1)).toBe("h2");
  });

  test("a 3 MB upload echoed back, and a 5 MB download, byte for byte (flow control both ways)", async () => {
    const up = await run(["curl", "-sS", "--http2-prior-knowledge", "--data-binary", `@${upload}`, "-o", join(dir, "echo.bin"), `http://127.0.0.1:${plain.port}/echo`]);
    expect(up.code).toBe(0);
    expect(md5(new Uint8Array(await Bun.file(join(dir, "echo.bin")).arrayBuffer()))).toBe(md5(uploadBytes));
    const down = await run(["curl", "-sS", "--http2-prior-knowledge", `http://127.0.0.1:${plain.port}/bytes/5000000`]);
    expect(down.stdout).toBe("x".repeat(5_000_000));
  });

  test("cookies sent as crumbs reach the HTTP/1.1 head joined", async () => {
    const r = await run(["curl", "-sS", "--http2-prior-knowledge", "-H", "Cookie: a=1", "-H", "Cookie: b=2", `http://127.0.0.1:${plain.port}/http1`]);
    expect(r.stdout).toContain("\r\ncookie: a=1; b=2");
    expect(r.stdout).toStartWith(`GET /http1 HTTP/1.1\r\nhost: 127.0.0.1:${plain.port}\r\n`);
  });
});

describe("nghttp2", () => {
  test("nghttp -v with a request body: every frame read by nghttp, the body echoed", async () => {
    const small = join(dir, "small.txt");
    writeFileSync(small, "a request body, sent as DATA\n");
    const r = await run([NGHTTP, "-v", "-d", small, `http://127.0.0.1:${plain.port}/post`]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(":status: 200");
    expect(r.stdout).toContain("x-method: POST");
    expect(r.stdout).toContain("a request body, sent as DATA");
    expect(r.stdout).toContain("recv SETTINGS frame");
    expect(r.stdout).toMatch(/recv DATA frame <length=\d+, flags=0x01|END_STREAM/);
    expect(r.stdout).not.toContain("GOAWAY frame <length=8, flags=0x00, stream_id=0>\n          (last_stream_id=0, error_code=PROTOCOL_ERROR");
  });

  test("nghttp over TLS (ALPN h2), a 3 MB body echoed", async () => {
    const r = await run([NGHTTP, "-d", upload, `https://127.0.0.1:${tls.port}/echo`]);
    expect(r.code).toBe(0);
    expect(md5(r.bytes)).toBe(md5(uploadBytes));
  });

  test("h2load -n 2000 -c 10 -m 10: every request answered 2xx", async () => {
    const r = await run([H2LOAD, "-n", "2000", "-c", "10", "-m", "10", `http://127.0.0.1:${plain.port}/load`]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout");
    expect(r.stdout).toContain("status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx");
  });

  test("h2load over TLS with request bodies: every request answered 2xx", async () => {
    const body = join(dir, "body.txt");
    writeFileSync(body, "b".repeat(10_000));
    const r = await run([H2LOAD, "-n", "1000", "-c", "4", "-m", "10", "-d", body, `https://127.0.0.1:${tls.port}/load`]);
    expect(r.stdout).toContain("1000 succeeded, 0 failed");
    expect(r.stdout).toContain("status codes: 1000 2xx");
  });
});

describe("Chromium", () => {
  test("a page and a hundred requests over one h2 connection, each reported as h2", async () => {
    const executablePath = chromiumPath();
    if (!executablePath) throw new Error("no Chromium: install Debian's chromium package (.ci/run installs it)");
    const profile = mkdtempSync(join(tmpdir(), "burrow-h2-chromium-"));
    const before = tls.alpn.length;
    const earlier = new Set(tls.connections);
    const context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      ignoreHTTPSErrors: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run", "--ignore-certificate-errors"],
    });
    try {
      const page = context.pages()[0] ?? (await context.newPage());
      await page.goto(`https://127.0.0.1:${tls.port}/page`);
      // run in the page (a string: the page's DOM types are not this program's)
      const result = (await page.evaluate(`(async () => {
        const texts = await Promise.all(Array.from({ length: 100 }, (_, i) => fetch("/asset/" + i, { headers: { "x-n": String(i) } }).then((r) => r.text())));
        const entries = [...performance.getEntriesByType("navigation"), ...performance.getEntriesByType("resource")];
        return { texts, protocols: entries.map((e) => e.nextHopProtocol) };
      })()`)) as { texts: string[]; protocols: string[] };
      expect(result.texts).toEqual(Array.from({ length: 100 }, (_, i) => `GET /asset/${i}\n`));
      expect(new Set(result.protocols)).toEqual(new Set(["h2"]));
      for (const protocol of tls.alpn.slice(before)) expect(protocol).toBe("h2");
      // the page and its hundred requests (and a favicon) on one connection
      const serving = [...tls.connections].filter((c) => !earlier.has(c) && c.served > 0);
      expect(serving.length).toBe(1);
      expect(serving[0]!.served).toBeGreaterThanOrEqual(101);
    } finally {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    }
  });
});
