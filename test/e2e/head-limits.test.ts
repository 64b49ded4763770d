/**
 * The public port's limits on a visitor's request head, set by flag: a
 * head longer than --max-request-head, or with more fields than
 * --max-request-fields, gets 431 and a closed connection; one within them
 * is read as always. And a TLS visitor that sends no ClientHello is closed
 * after --tls-hello-timeout.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { rawHttp } from "../harness/raw-http.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let plain: TestServer;
let tls: TestServer;
let certDir: string;

beforeAll(async () => {
  plain = await startServer({ args: ["--max-request-head", "2048", "--max-request-fields", "20"] });
  certDir = mkdtempSync(join(tmpdir(), "burrow-limits-"));
  const cert = join(certDir, "cert.pem");
  const key = join(certDir, "key.pem");
  const made = Bun.spawnSync(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"], { stdout: "pipe", stderr: "pipe" });
  if (made.exitCode !== 0) throw new Error(`openssl failed: ${made.stderr.toString()}`);
  tls = await startServer({ args: ["--tls-cert", cert, "--tls-key", key, "--tls-hello-timeout", "12"] });
});

afterAll(async () => {
  await plain?.stop();
  await tls?.stop();
  if (certDir) rmSync(certDir, { recursive: true, force: true });
});

const head = (fields: string[]) => `GET / HTTP/1.1\r\nHost: localhost\r\n${fields.map((f) => `${f}\r\n`).join("")}\r\n`;

test("a head past --max-request-head gets 431; one within it is read", async () => {
  const long = await rawHttp(plain.edgePort, head([`X-Pad: ${"a".repeat(2100)}`]));
  expect(long.status).toBe(431);
  expect(long.closed).toBe(true);
  const fits = await rawHttp(plain.edgePort, head([`X-Pad: ${"a".repeat(1500)}`, "Connection: close"]));
  expect(fits.status).not.toBe(431);
  expect(fits.status).toBeLessThan(500);
});

test("more fields than --max-request-fields get 431 naming the limit; as many are read", async () => {
  const many = await rawHttp(plain.edgePort, head(Array.from({ length: 20 }, (_, i) => `X-F${i}: ${i}`)));
  expect(many.status).toBe(431);
  expect(many.body).toContain("More than 20 header fields");
  const fits = await rawHttp(plain.edgePort, head([...Array.from({ length: 18 }, (_, i) => `X-F${i}: ${i}`), "Connection: close"]));
  expect(fits.status).not.toBe(431);
});

test("a TLS visitor that sends no ClientHello is closed after --tls-hello-timeout, not the default 10 s", async () => {
  const started = performance.now();
  const closedAfter = await new Promise<number>((resolve, reject) => {
    const socket = connect(tls.edgePort, "127.0.0.1");
    socket.on("error", () => {});
    socket.on("close", () => resolve(performance.now() - started));
    // liveness only, far above the 12 s it is given
    setTimeout(() => (socket.destroy(), reject(new Error("still open after 120 s"))), 120_000);
  });
  // still open when the default would have closed it: the flag's 12 s is what counts
  expect(closedAfter).toBeGreaterThanOrEqual(11_500);
}, 150_000);
