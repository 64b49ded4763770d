/**
 * Custom hostnames in the admin API: registered for a user (lowercased, IDNA
 * in ASCII, wildcards), never under the server's own domain, one user's
 * each; verified by an admin's word or by their TXT record, looked up
 * through a real DNS server (Debian's dnsmasq) given as --dns-resolver: the
 * right value verifies, a wrong one or none is refused with what was found.
 * Deleting the user deletes their hostnames; every write is audited.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { aptInstall } from "../harness/debian-packages.ts";
import { startServer, type TestServer } from "../harness/server.ts";
import { freeTcpAndUdpPort } from "../harness/udp.ts";
import { waitUntil } from "../harness/wait.ts";

function findDnsmasq(): string | undefined {
  const where = () => Bun.which("dnsmasq") ?? ["/usr/sbin/dnsmasq"].find((p) => existsSync(p));
  return where() ?? (aptInstall(["dnsmasq-base"], "hostname tests: no dnsmasq") ? where() : undefined);
}
const DNSMASQ = findDnsmasq();
if (!DNSMASQ) console.error("hostname tests: dnsmasq not found and not installable here: the verification cases are skipped");

let server: TestServer;
let api: AdminClient;
let userId: number;
let otherId: number;
let dnsPort: number;
let dnsmasq: ReturnType<typeof Bun.spawn> | undefined;
/** TXT records dnsmasq serves, name -> value; it is restarted with them when they change. */
const records = new Map<string, string>();

/** dnsmasq answering `records` (and nothing else) on 127.0.0.1:dnsPort. */
async function serveRecords(): Promise<void> {
  if (dnsmasq) {
    dnsmasq.kill();
    await dnsmasq.exited;
  }
  const txt = [...records].map(([name, value]) => `--txt-record=${name},${value}`);
  dnsmasq = Bun.spawn([DNSMASQ!, "--no-daemon", "--conf-file=/dev/null", "--pid-file=", "--no-resolv", "--no-hosts", "--bind-interfaces", "--listen-address=127.0.0.1", `--port=${dnsPort}`, "--local=/test/", ...txt], {
    stdin: "ignore",
    stdout: "ignore",
    stderr: "ignore",
  });
  // answering: a lookup of a name it has no record for comes back (NXDOMAIN) rather than timing out
  const { Resolver } = await import("node:dns/promises");
  const r = new Resolver({ timeout: 500, tries: 1 });
  r.setServers([`127.0.0.1:${dnsPort}`]);
  await waitUntil(async () => r.resolveTxt("probe.test").then(() => true, (e) => e.code === "ENOTFOUND" || e.code === "ENODATA"), 10_000, "dnsmasq answering");
}

beforeAll(async () => {
  dnsPort = await freeTcpAndUdpPort();
  if (DNSMASQ) await serveRecords();
  server = await startServer({ args: ["--domain", "tunnels.example.test", "--dns-resolver", `127.0.0.1:${dnsPort}`] });
  api = await signedIn(server);
  userId = await api.createUser("acme");
  otherId = await api.createUser("other");
});
afterAll(async () => {
  dnsmasq?.kill();
  await dnsmasq?.exited;
  await server?.stop();
});

describe("registering a hostname", () => {
  test("201 with its verification record; lowercased, IDNA in ASCII, a trailing dot dropped; listed, and by user", async () => {
    const made = await api.post("/api/hostnames", { hostname: "Demo.Acme.test.", user_id: userId });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ hostname: "demo.acme.test", user_id: userId, username: "acme", verified: false, verified_at: null });
    expect(made.body.verification).toEqual({ type: "TXT", name: "_burrow-challenge.demo.acme.test", value: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(new Date(made.body.created_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
    const idn = await api.post("/api/hostnames", { hostname: "Bücher.acme.test", user_id: userId });
    expect(idn.status).toBe(201);
    expect(idn.body.hostname).toBe("xn--bcher-kva.acme.test");
    const wild = await api.post("/api/hostnames", { hostname: "*.dev.acme.test", user_id: otherId });
    expect(wild.status).toBe(201);
    expect(wild.body.verification.name).toBe("_burrow-challenge.dev.acme.test");
    const all = (await api.get("/api/hostnames")).body as { hostname: string }[];
    expect(all.map((h) => h.hostname)).toEqual(expect.arrayContaining(["demo.acme.test", "xn--bcher-kva.acme.test", "*.dev.acme.test"]));
    const mine = (await api.get(`/api/hostnames?user_id=${otherId}`)).body as { hostname: string }[];
    expect(mine.map((h) => h.hostname)).toEqual(["*.dev.acme.test"]);
  });

  test("one user's each: the same hostname again, by anyone, is 409 HOSTNAME_TAKEN", async () => {
    const first = await api.post("/api/hostnames", { hostname: "taken.acme.test", user_id: userId });
    expect(first.status).toBe(201);
    for (const who of [userId, otherId]) {
      const again = await api.post("/api/hostnames", { hostname: "TAKEN.acme.test", user_id: who });
      expect(again.status).toBe(409);
      expect(again.body).toEqual({ error: "hostname 'taken.acme.test' is registered already" });
    }
  });

  test("an admin's word verifies it at once", async () => {
    const made = await api.post("/api/hostnames", { hostname: "trusted.acme.test", user_id: userId, verified: true });
    expect(made.status).toBe(201);
    expect(made.body.verified).toBe(true);
    expect(made.body.verified_at).toBe(made.body.created_at);
  });

  const bad: [string, unknown, string][] = [
    ["under the server's own domain", { hostname: "x.tunnels.example.test", user_id: 1 }, "own domain"],
    ["the server's own domain itself", { hostname: "tunnels.example.test", user_id: 1 }, "own domain"],
    ["a wildcard over the server's domain", { hostname: "*.tunnels.example.test", user_id: 1 }, "own domain"],
    ["one label", { hostname: "localhost", user_id: 1 }, "at least two labels"],
    ["an IP address", { hostname: "192.0.2.7", user_id: 1 }, "not an IP address"],
    ["a space", { hostname: "a b.example", user_id: 1 }, "must be a DNS name"],
    ["a wildcard in the middle", { hostname: "a.*.example", user_id: 1 }, "wildcard"],
    ["a label of 64", { hostname: `${"a".repeat(64)}.example`, user_id: 1 }, "must be a DNS name"],
    ["a leading hyphen", { hostname: "-a.example", user_id: 1 }, "must be a DNS name"],
    ["empty", { hostname: "", user_id: 1 }, "must be a DNS name"],
    ["not a string", { hostname: 7, user_id: 1 }, "hostname"],
    ["no user", { hostname: "a.example" }, "user_id"],
    ["verified not a boolean", { hostname: "a.example", user_id: 1, verified: "yes" }, "verified"],
  ];
  test.each(bad)("400 for %s, naming the field", async (_name, body, says) => {
    const res = await api.post("/api/hostnames", body);
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain(says);
  });

  test("404 for a user that does not exist; 400 for a bad user_id in the list's query", async () => {
    expect((await api.post("/api/hostnames", { hostname: "nobody.example", user_id: 999_999 })).status).toBe(404);
    expect((await api.get("/api/hostnames?user_id=abc")).status).toBe(400);
  });
});

describe.skipIf(!DNSMASQ)("verifying by the TXT record, through --dns-resolver", () => {
  test("the right value verifies; a wrong one, or none, is 409 saying what was found", async () => {
    const made = (await api.post("/api/hostnames", { hostname: "proved.acme.test", user_id: userId })).body;
    const none = await api.post(`/api/hostnames/${made.id}/verify`);
    expect(none.status).toBe(409);
    expect(none.body.error).toContain("_burrow-challenge.proved.acme.test has no TXT record");
    records.set("_burrow-challenge.proved.acme.test", "not-the-value");
    await serveRecords();
    const wrong = await api.post(`/api/hostnames/${made.id}/verify`);
    expect(wrong.status).toBe(409);
    expect(wrong.body.error).toContain('TXT "not-the-value"');
    expect((await api.get(`/api/hostnames?user_id=${userId}`)).body.find((h: any) => h.id === made.id).verified).toBe(false);
    records.set("_burrow-challenge.proved.acme.test", made.verification.value);
    await serveRecords();
    const right = await api.post(`/api/hostnames/${made.id}/verify`);
    expect(right.status).toBe(200);
    expect(right.body).toMatchObject({ id: made.id, hostname: "proved.acme.test", verified: true });
    expect(right.body.verified_at).toBeString();
    // verified stays verified, without asking DNS again
    records.delete("_burrow-challenge.proved.acme.test");
    await serveRecords();
    expect((await api.post(`/api/hostnames/${made.id}/verify`)).body.verified).toBe(true);
  });

  test("a wildcard is proved at its base's name", async () => {
    const made = (await api.post("/api/hostnames", { hostname: "*.preview.acme.test", user_id: otherId })).body;
    records.set("_burrow-challenge.preview.acme.test", made.verification.value);
    await serveRecords();
    const right = await api.post(`/api/hostnames/${made.id}/verify`);
    expect(right.status).toBe(200);
    expect(right.body.verified).toBe(true);
  });
});

describe("deleting", () => {
  test("DELETE removes it (then 404); deleting a user removes theirs; every write is in the audit log", async () => {
    const made = (await api.post("/api/hostnames", { hostname: "gone.acme.test", user_id: userId })).body;
    expect((await api.delete(`/api/hostnames/${made.id}`)).body).toEqual({ status: "removed" });
    expect((await api.delete(`/api/hostnames/${made.id}`)).status).toBe(404);
    expect((await api.post(`/api/hostnames/${made.id}/verify`)).status).toBe(404);
    const leaving = await api.createUser("leaving");
    await api.post("/api/hostnames", { hostname: "leaving.acme.test", user_id: leaving });
    expect((await api.delete(`/api/users/${leaving}`)).status).toBe(200);
    expect(((await api.get("/api/hostnames")).body as { hostname: string }[]).some((h) => h.hostname === "leaving.acme.test")).toBe(false);
    // the name is free again
    expect((await api.post("/api/hostnames", { hostname: "leaving.acme.test", user_id: userId })).status).toBe(201);
    const audit = (await api.get("/api/audit?action=hostname.create")).body;
    const entries = (audit.items ?? audit) as { action: string; target: string | null; details: Record<string, unknown> }[];
    expect(entries.some((e) => e.details?.hostname === "gone.acme.test")).toBe(true);
    const deleted = (await api.get("/api/audit?action=hostname.delete")).body;
    expect(((deleted.items ?? deleted) as { target: string }[]).some((e) => e.target === `hostname:${made.id}`)).toBe(true);
  });
});
