/**
 * The certificate events made by the real action: the real server getting
 * certificates from a real ACME CA (Debian's Pebble, issuing 30-second
 * certificates) by HTTP-01 as tunnels' names go live, delivered to a
 * receiver that verifies each with `standardwebhooks`:
 *
 * - a tunnel's name certified: certificate.issued, and (a certificate that
 *   ends within 14 days) certificate.expiring;
 * - its renewal failing (the CA's lookups of the name failing):
 *   certificate.failed with the end of the certificate in use, and
 *   alert.certificate_renewal_failing;
 * - a name the CA refuses to certify (its blocklist): certificate.failed
 *   with ORDER_REFUSED and no certificate in use.
 */
import { afterAll, beforeAll, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { startAgent } from "../harness/agent.ts";
import { pebbleSkipReason, startPebble, type Pebble } from "../harness/pebble.ts";
import { freeRange } from "../harness/ports.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { waitUntil } from "../harness/wait.ts";
import { startReceiver, type WebhookReceiver } from "../harness/webhook-receiver.ts";

const DOMAIN = "burrow.test";
const VALIDITY_S = 30;
const skip = pebbleSkipReason();
if (skip) console.error(`certificate events skipped: ${skip}`);

const work = mkdtempSync(join(tmpdir(), "burrow-cert-events-"));
let pebble: Pebble;
let server: TestServer;
let api: AdminClient;
let receiver: WebhookReceiver;
let token: string;
const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("hello") });

beforeAll(async () => {
  if (skip) return;
  const httpPort = freeRange(1).first;
  pebble = await startPebble({ httpPort, certValiditySeconds: VALIDITY_S, blockedDomains: [`blocked.${DOMAIN}`] });
  const caFile = join(work, "pebble-ca.pem");
  writeFileSync(caFile, pebble.serverCa);
  server = await startServer({
    args: [
      ...["--domain", DOMAIN, "--acme-email", "ops@burrow.test", "--acme-directory", pebble.directoryUrl, "--acme-ca-root", caFile],
      ...["--http-port", String(httpPort), "--https-port", "0", "--dns-port", "off", "--acme-retry-min", "2"],
      ...["--webhook-allow-private", "on", "--webhook-backoff-max", "1"],
    ],
  });
  api = await signedIn(server);
  receiver = startReceiver();
  const made = await api.post("/api/webhooks", { url: receiver.url, events: ["certificate.*", "alert.*"] });
  receiver.secrets.push(made.body.secret);
  token = await api.createToken(await api.createUser("certified"));
}, 60_000);

afterAll(async () => {
  await server?.stop();
  await pebble?.[Symbol.asyncDispose]();
  await receiver?.stop();
  upstream.stop(true);
  rmSync(work, { recursive: true, force: true });
});

/** The deliveries of `type` about `name`, in arrival order. */
const about = (type: string, name: string) =>
  receiver.received.filter((r) => r.event.type === type && (r.event.data.names as string[]).includes(name)).map((r) => r.event.data as Record<string, any>);

test.skipIf(Boolean(skip))("a tunnel's name certified by the CA: certificate.issued and, ending within 14 days, certificate.expiring; its renewal failing: certificate.failed and the alert", async () => {
  const name = `live.${DOMAIN}`;
  await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${server.edgePort}`, token, args: ["--subdomain", "live", "--insecure"] });
  await waitUntil(() => about("certificate.issued", name).length >= 1, 40_000, "certificate.issued");
  const issued = about("certificate.issued", name)[0]!;
  expect(issued.names).toEqual([name]);
  const notAfter = Date.parse(issued.not_after);
  expect(notAfter - Date.now()).toBeLessThanOrEqual(VALIDITY_S * 1000);
  expect(notAfter - Date.now()).toBeGreaterThan(0);
  // what the certificates page shows for it is the same certificate
  const listed = (await api.get("/api/certificates")).body.certificates.find((c: any) => c.names.includes(name));
  expect(listed?.not_after).toBe(issued.not_after);
  await waitUntil(() => about("certificate.expiring", name).length >= 1, 10_000, "certificate.expiring");
  expect(about("certificate.expiring", name)[0]).toEqual({ names: [name], not_after: issued.not_after, days_left: 0 });

  // from now on the CA cannot look the name up: the renewal, two thirds into the certificate's life, fails
  await pebble.challtestsrv!.setServfail(name);
  await waitUntil(() => about("certificate.failed", name).length >= 1, 40_000, "certificate.failed");
  const failed = about("certificate.failed", name)[0]!;
  expect(failed.code).toBe("CHALLENGE_FAILED");
  expect(failed.message).toContain(name);
  // the certificate still in use is named by its end
  expect(about("certificate.issued", name).map((e) => e.not_after)).toContain(failed.not_after);
  await waitUntil(() => about("alert.certificate_renewal_failing", name).length >= 1, 10_000, "the alert");
  const alert = about("alert.certificate_renewal_failing", name)[0]!;
  expect(alert).toMatchObject({ severity: "critical", code: "CHALLENGE_FAILED", names: [name], node: "local" });
  expect(alert.message).toContain("its renewal failed: CHALLENGE_FAILED");
  expect(receiver.rejected).toEqual([]);
}, 120_000);

test.skipIf(Boolean(skip))("a name the CA refuses to certify: certificate.failed with ORDER_REFUSED and no certificate in use", async () => {
  const name = `blocked.${DOMAIN}`;
  await using _agent = await startAgent({ kind: "http", target: upstream.port!, server: `https://127.0.0.1:${server.edgePort}`, token, args: ["--subdomain", "blocked", "--insecure"] });
  await waitUntil(() => about("certificate.failed", name).length >= 1, 40_000, "certificate.failed");
  const failed = about("certificate.failed", name)[0]!;
  expect(failed).toMatchObject({ names: [name], code: "ORDER_REFUSED", not_after: null });
  expect(failed.message).toContain("blocked");
  expect(about("certificate.issued", name)).toEqual([]);
  // no certificate near its end: no alert for it
  expect(about("alert.certificate_renewal_failing", name)).toEqual([]);
}, 60_000);
