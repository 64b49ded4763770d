/**
 * `--upstream-protocol h2` to a service given as https://: HTTP/2 over TLS,
 * agreed on with ALPN (the agent offers h2 alone, and takes any
 * certificate, as it does for an https:// service over HTTP/1.1). The
 * services are real: the HTTP/2 engine of src/http2/ on a TLS listener that
 * offers h2, nghttpd with TLS, and an HTTPS server that speaks only
 * HTTP/1.1 (no h2 in ALPN), which is a 502 that says so.
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { selfSignedCertificate } from "../harness/certs.ts";
import { startH2Echo } from "../harness/h2-echo.ts";
import { NGHTTPD, nghttpdAvailable } from "../harness/nghttpd.ts";
import { LineReader } from "../harness/lines.ts";
import { freeRange } from "../harness/ports.ts";
import { cleanedUp, fetchThrough, requestHead } from "./raw-service.ts";

const { tunnel } = cleanedUp();
const cert = await selfSignedCertificate({ names: ["localhost"], ips: ["127.0.0.1"] });
const h2 = (port: number) => tunnel(port, { target: { upstreamProtocol: "h2", tls: true } });

describe("HTTP/2 over TLS to the service", () => {
  test("a TLS service that offers h2: requests and bodies as its streams", async () => {
    await using echo = await startH2Echo({ tls: { cert: cert.certPem, key: cert.keyPem } });
    const t = h2(echo.port);
    const res = await fetchThrough(t, { head: requestHead("GET", "/http1") });
    expect(res.status).toBe(200);
    // the engine's /http1 shows the request as it got it: the Host from :authority
    expect(res.text).toContain("GET /http1 HTTP/1.1\r\nhost: visitor.example");
    const upload = await fetchThrough(t, { head: requestHead("POST", "/echo", [["Host", "h"], ["Content-Length", "6"]]), body: ["secret"] });
    expect(upload.text).toEndWith("\r\n6\r\nsecret\r\n0\r\n\r\n");
    expect(echo.alpn).toEqual(["h2"]);
  });

  test("nghttpd with TLS", async () => {
    expect(nghttpdAvailable()).toBe(true);
    const dir = mkdtempSync(join(tmpdir(), "burrow-nghttpd-tls-"));
    const proc: { kill(): void; exited: Promise<number> }[] = [];
    try {
      writeFileSync(join(dir, "key.pem"), cert.keyPem);
      writeFileSync(join(dir, "cert.pem"), cert.certPem);
      writeFileSync(join(dir, "hello.txt"), "over h2 and TLS");
      const port = freeRange(1).first;
      const p = Bun.spawn([NGHTTPD, "-a", "127.0.0.1", "-v", "-d", dir, String(port), join(dir, "key.pem"), join(dir, "cert.pem")], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
      proc.push(p);
      await new LineReader(p).waitFor(new RegExp(`listen 127\\.0\\.0\\.1:${port}$`), 10_000);
      const res = await fetchThrough(h2(port), { head: requestHead("GET", "/hello.txt") });
      expect(res.status).toBe(200);
      expect(res.text).toEndWith("\r\n\r\nover h2 and TLS");
    } finally {
      for (const p of proc) {
        p.kill();
        await p.exited;
      }
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("an HTTPS service without h2 in its ALPN: the 502 says it did not agree to HTTP/2", async () => {
    const https = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: () => new Response("HTTP/1.1 only") });
    try {
      const res = await fetchThrough(h2(https.port!));
      expect(res.reset).toMatch(/UPSTREAM_FAILED the service did not agree to HTTP\/2 over TLS \(ALPN: (none|http\/1\.1)\)/);
    } finally {
      https.stop(true);
    }
  });
});
