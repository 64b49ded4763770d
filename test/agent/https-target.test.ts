/**
 * An https local service (a target given as https://host:port) gets the
 * same h1 bytes over TLS connections of the agent's own: a self-signed
 * certificate is accepted, nothing is decompressed, and connections are
 * pooled as plain ones are.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Server } from "bun";
import { closeTunnel, fetchThrough, requestHead, tunnelTo, type TestTunnel } from "./raw-service.ts";

let certDir: string;
let upstream: Server<undefined>;
let t: TestTunnel;
const GZIPPED = Bun.gzipSync(Buffer.from("compressed stays compressed ".repeat(50)));

beforeAll(() => {
  certDir = mkdtempSync(join(tmpdir(), "burrow-agent-tls-"));
  const cert = join(certDir, "cert.pem");
  const key = join(certDir, "key.pem");
  const made = Bun.spawnSync(
    ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost"],
    { stdout: "pipe", stderr: "pipe" },
  );
  if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`);
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    tls: { cert: readFileSync(cert, "utf8"), key: readFileSync(key, "utf8") },
    fetch: (req) =>
      new URL(req.url).pathname === "/gzip"
        ? new Response(GZIPPED, { headers: { "content-encoding": "gzip" } })
        : new Response(`secure ${req.headers.get("host")}`),
  });
  t = tunnelTo(upstream.port!, { target: { tls: true, hostHeader: "rewrite" } });
});

afterAll(() => {
  if (t) closeTunnel(t);
  upstream?.stop(true);
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

test("an https local service with a self-signed certificate answers, over one pooled TLS connection", async () => {
  for (let i = 0; i < 3; i++) {
    const res = await fetchThrough(t, { head: requestHead("GET", "/hello") });
    expect(res.reset).toBeUndefined();
    expect(res.status).toBe(200);
    expect(res.text).toEndWith(`\r\n\r\nsecure 127.0.0.1:${upstream.port}`);
  }
  expect(t.pool.opened).toBe(1);
  expect(t.logs[0]).toMatchObject({ method: "GET", path: "/hello", status: 200 });
});

test("a gzip body from an https service arrives as the same compressed bytes", async () => {
  const res = await fetchThrough(t, { head: requestHead("GET", "/gzip", [["Host", "h"], ["Accept-Encoding", "gzip"]]) });
  expect(res.text.toLowerCase()).toContain("content-encoding: gzip\r\n");
  const body = res.bytes.subarray(res.bytes.indexOf("\r\n\r\n") + 4);
  expect(Buffer.from(body).equals(Buffer.from(GZIPPED))).toBe(true);
});
