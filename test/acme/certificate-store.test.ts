/**
 * The certificate store without a CA: certificates made here with exact
 * names and dates, to check which one a TLS server name gets, what is
 * written, what a reload makes of damaged files, and what the admin API
 * will be shown.
 */
import { afterEach, describe, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { nameCovers, renewalTime } from "../../src/tls/certificate-info.ts";
import { CertificateStore, fileStem } from "../../src/acme/certificate-store.ts";
import type { Clock } from "../../src/core/clock.ts";
import { selfSignedCertificate } from "../harness/certs.ts";

const DAY = 24 * 60 * 60 * 1000;
const NOW = new Date("2030-01-15T12:00:00Z");
const clock: Clock = { now: () => NOW };
const dirs: string[] = [];

function newStore(): CertificateStore {
  const dir = mkdtempSync(join(tmpdir(), "burrow-certstore-"));
  dirs.push(dir);
  return new CertificateStore(dir, clock);
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

/** A certificate for `names`, valid from `fromDays` to `toDays` days around NOW. */
async function cert(names: string[], fromDays = -10, toDays = 80) {
  return selfSignedCertificate({ names, notBefore: new Date(NOW.getTime() + fromDays * DAY), notAfter: new Date(NOW.getTime() + toDays * DAY) });
}

async function put(store: CertificateStore, names: string[], fromDays?: number, toDays?: number) {
  const c = await cert(names, fromDays, toDays);
  const saved = store.save(names[0]!, c.certPem, c.keyPem);
  if (!saved.ok) throw new Error(saved.error.message);
  return saved.value;
}

describe("nameCovers", () => {
  test.each([
    ["a.example.com", "a.example.com", true],
    ["a.example.com", "A.Example.COM.", true],
    ["*.example.com", "a.example.com", true],
    ["*.example.com", "example.com", false],
    ["*.example.com", "a.b.example.com", false],
    ["*.example.com", ".example.com", false],
    ["*.example.com", "aexample.com", false],
    ["a.example.com", "b.example.com", false],
  ])("%s covers %s: %p", (certName, serverName, covered) => {
    expect(nameCovers(certName, serverName)).toBe(covered);
  });
});

describe("picking a certificate for a TLS server name", () => {
  test("an exact name wins over a wildcard, which covers exactly one label", async () => {
    const store = newStore();
    await put(store, ["*.tunnels.example.com", "tunnels.example.com"]);
    await put(store, ["demo.tunnels.example.com"]);
    expect(store.pick("demo.tunnels.example.com")?.id).toBe("demo.tunnels.example.com");
    expect(store.pick("other.tunnels.example.com")?.id).toBe("*.tunnels.example.com");
    expect(store.pick("tunnels.example.com")?.id).toBe("*.tunnels.example.com");
    expect(store.pick("a.b.tunnels.example.com")).toBeUndefined();
    expect(store.pick("example.com")).toBeUndefined();
  });

  test("server names are matched without regard to case or a trailing dot", async () => {
    const store = newStore();
    await put(store, ["demo.tunnels.example.com"]);
    expect(store.pick("DEMO.Tunnels.example.com.")?.id).toBe("demo.tunnels.example.com");
  });

  test("a valid wildcard wins over an expired exact name; among valid ones the longest-lasting", async () => {
    const store = newStore();
    await put(store, ["demo.tunnels.example.com"], -100, -10);
    await put(store, ["*.tunnels.example.com"], -10, 30);
    expect(store.pick("demo.tunnels.example.com")?.id).toBe("*.tunnels.example.com");

    const other = newStore();
    const short = await cert(["*.t.example.com"], -10, 5);
    const long = await cert(["*.t.example.com", "t.example.com"], -1, 89);
    other.save("*.t.example.com", short.certPem, short.keyPem);
    other.save("t.example.com", long.certPem, long.keyPem);
    expect(other.pick("x.t.example.com")?.id).toBe("t.example.com");
  });

  test("an expired certificate is still picked when it is the only one (a clearer browser error than none)", async () => {
    const store = newStore();
    await put(store, ["old.example.com"], -100, -1);
    expect(store.pick("old.example.com")?.id).toBe("old.example.com");
  });
});

describe("on disk", () => {
  test("a wildcard's files are named _wildcard.<domain>, both 0600 in a 0700 directory, and reload as they were", async () => {
    const store = newStore();
    const saved = await put(store, ["*.tunnels.example.com", "tunnels.example.com"]);
    expect(readdirSync(store.dir).sort()).toEqual(["_wildcard.tunnels.example.com.key", "_wildcard.tunnels.example.com.pem"]);
    expect(statSync(store.dir).mode & 0o777).toBe(0o700);
    for (const f of readdirSync(store.dir)) expect(statSync(join(store.dir, f)).mode & 0o777).toBe(0o600);

    const reloaded = new CertificateStore(join(store.dir, "..", ".."), clock);
    expect(reloaded.loadAll()).toEqual([]);
    const back = reloaded.get("*.tunnels.example.com");
    expect(back?.fingerprint).toBe(saved.fingerprint);
    expect(back?.names).toEqual(["*.tunnels.example.com", "tunnels.example.com"]);
    expect(back?.keyPem).toBe(saved.keyPem);
  });

  test("an existing certs directory with looser permissions is narrowed to 0700", async () => {
    const store = newStore();
    await put(store, ["a.example.com"]);
    chmodSync(store.dir, 0o755);
    new CertificateStore(join(store.dir, "..", ".."), clock).loadAll();
    expect(statSync(store.dir).mode & 0o777).toBe(0o700);
  });

  test("a damaged pair is skipped, reported, and shown as that certificate's last error; the others load", async () => {
    const store = newStore();
    await put(store, ["good.example.com"]);
    const a = await cert(["mismatch.example.com"]);
    const b = await cert(["mismatch.example.com"]);
    writeFileSync(join(store.dir, "mismatch.example.com.pem"), a.certPem);
    writeFileSync(join(store.dir, "mismatch.example.com.key"), b.keyPem);
    writeFileSync(join(store.dir, "nokey.example.com.pem"), a.certPem);
    writeFileSync(join(store.dir, "garbage.example.com.pem"), "not a certificate");
    writeFileSync(join(store.dir, "garbage.example.com.key"), "not a key");
    writeFileSync(join(store.dir, "README.txt"), "ignored");

    const reloaded = new CertificateStore(join(store.dir, "..", ".."), clock);
    const failures = reloaded.loadAll();
    expect(failures.map((f) => f.code)).toEqual(["INVALID_CERTIFICATE", "INVALID_CERTIFICATE", "INVALID_CERTIFICATE"]);
    expect(reloaded.all().map((c) => c.id)).toEqual(["good.example.com"]);
    const states = Object.fromEntries(reloaded.state().map((s) => [s.id, s]));
    expect(states["mismatch.example.com"]?.last_error?.message).toContain("not the certificate's");
    expect(states["nokey.example.com"]?.last_error?.message).toContain("missing");
    expect(states["garbage.example.com"]?.last_error?.code).toBe("INVALID_CERTIFICATE");
    expect(states["good.example.com"]?.last_error).toBeNull();
  });

  test("save refuses a key that is not the certificate's, and a name that could leave the directory", async () => {
    const store = newStore();
    const a = await cert(["a.example.com"]);
    const b = await cert(["a.example.com"]);
    const mismatched = store.save("a.example.com", a.certPem, b.keyPem);
    expect(!mismatched.ok && mismatched.error.code).toBe("INVALID_CERTIFICATE");
    for (const id of ["../a.example.com", "a/b", "", "*.*.example.com"]) {
      const saved = store.save(id, a.certPem, a.keyPem);
      expect(!saved.ok && saved.error.code).toBe("INVALID_CERTIFICATE");
    }
    expect(existsSync(store.dir) ? readdirSync(store.dir) : []).toEqual([]);
    expect(fileStem("*.a.example.com")).toBe("_wildcard.a.example.com");
  });
});

describe("state for the admin API, and listeners", () => {
  test("each certificate with names, issuer, validity, last error and next renewal; a name asked for but never issued too", async () => {
    const store = newStore();
    const saved = await put(store, ["a.example.com", "b.example.com"], -30, 60);
    store.setStatus("a.example.com", { nextRenewal: renewalTime(saved) });
    store.setStatus("never.example.com", { names: ["never.example.com"], lastError: { code: "CHALLENGE_FAILED", message: "no answer", at: NOW.toISOString() } });
    expect(store.state()).toEqual([
      {
        id: "a.example.com",
        names: ["a.example.com", "b.example.com"],
        issuer: "CN=a.example.com",
        not_before: new Date(NOW.getTime() - 30 * DAY).toISOString(),
        not_after: new Date(NOW.getTime() + 60 * DAY).toISOString(),
        last_error: null,
        next_renewal: new Date(NOW.getTime() + 30 * DAY).toISOString(),
      },
      {
        id: "never.example.com",
        names: ["never.example.com"],
        issuer: null,
        not_before: null,
        not_after: null,
        last_error: { code: "CHALLENGE_FAILED", message: "no answer", at: NOW.toISOString() },
        next_renewal: null,
      },
    ]);
  });

  test("listeners hear each saved certificate; one that throws stops neither the save nor the others", async () => {
    const store = newStore();
    const heard: string[] = [];
    store.onChange(() => {
      throw new Error("swap failed");
    });
    const off = store.onChange((c) => heard.push(c.id));
    const saved = await put(store, ["a.example.com"]);
    expect(saved.id).toBe("a.example.com");
    off();
    await put(store, ["b.example.com"]);
    expect(heard).toEqual(["a.example.com"]);
  });
});
