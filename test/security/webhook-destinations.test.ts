/**
 * Server-side request forgery through webhooks and the admission hook:
 * whoever may make a webhook (a user on the portal too) names a URL the
 * server POSTs to from inside the operator's network. Without
 * --webhook-allow-private no loopback, link-local, private, shared or
 * reserved address is reached, in any spelling (IPv4-mapped IPv6, a bare
 * 0, brackets, a trailing dot, a name that resolves to one); a redirect to
 * one is not followed; plain http goes to the address that was checked,
 * not to whatever the name says a moment later. Tried both when a URL is
 * given and at each attempt (the worker's own check, on a webhook made
 * while the server allowed it).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createCore, type Core } from "../../src/core/index.ts";
import { openDatabase, type OpenedDb } from "../../src/db/open.ts";
import { isPublicAddress, refusedAtOnce } from "../../src/validate/webhook-url.ts";
import { resolveDestination } from "../../src/webhooks/destination.ts";
import { postSigned } from "../../src/webhooks/post.ts";

const PRIVATE_SPELLINGS = [
  "http://127.0.0.1/x",
  "http://127.1/x",
  "http://0/x",
  "http://0.0.0.0/x",
  "http://2130706433/x",
  "http://0x7f000001/x",
  "http://[::1]/x",
  "http://[::ffff:127.0.0.1]/x",
  "http://[::ffff:7f00:1]/x",
  "http://[0:0:0:0:0:ffff:169.254.169.254]/x",
  "http://169.254.169.254/latest/meta-data",
  "http://10.1.2.3/x",
  "http://172.16.0.1/x",
  "http://192.168.1.1/x",
  "http://100.64.0.1/x",
  "http://[fc00::1]/x",
  "http://[fe80::1]/x",
  "http://224.0.0.1/x",
  "http://255.255.255.255/x",
  "http://localhost/x",
  "http://LOCALHOST./x",
  "http://anything.localhost/x",
];

describe("a webhook's URL, when given", () => {
  let dir: string;
  let database: OpenedDb;
  let core: Core;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "burrow-ssrf-"));
    database = openDatabase(dir);
    core = createCore({ store: database.store, systemSubdomains: [] });
  });
  afterAll(() => {
    database.close();
    rmSync(dir, { recursive: true, force: true });
  });

  for (const url of PRIVATE_SPELLINGS) {
    test(`${url} is refused (400)`, async () => {
      await expect(core.webhooks.create({ url, events: ["*"] })).rejects.toThrow("refused");
    });
  }

  test("a public address is taken", async () => {
    expect(refusedAtOnce(new URL("https://93.184.216.34/hook"), false)).toBeUndefined();
    expect(isPublicAddress("2606:2800:220:1::")).toBe(true);
    const { webhook } = await core.webhooks.create({ url: "https://hooks.example.com/x", events: ["*"] });
    expect(webhook.url).toBe("https://hooks.example.com/x");
  });

  test("a URL changed later is checked again", async () => {
    const { webhook } = await core.webhooks.create({ url: "https://hooks.example.com/y", events: ["*"] });
    await expect(core.webhooks.update(webhook.id, { url: "http://169.254.169.254/" }, undefined)).rejects.toThrow("refused");
  });
});

describe("at each attempt", () => {
  const reached: string[] = [];
  const inside = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => (reached.push(new URL(req.url).pathname), new Response("secret inside")) });
  afterAll(() => inside.stop(true));
  const LIMITS = { timeoutMs: 2_000, maxResponseBytes: 1024, allowPrivate: false };

  test("every private spelling is refused before any connection", async () => {
    for (const url of [...PRIVATE_SPELLINGS, `http://127.0.0.1:${inside.port}/x`, `http://localhost:${inside.port}/x`]) {
      const r = await postSigned(url, "{}", {}, LIMITS);
      expect({ url, ok: r.ok, refused: /refused|does not resolve/.test(r.error ?? "") }).toEqual({ url, ok: false, refused: true });
    }
    expect(reached).toEqual([]);
  });

  test("a name that resolves to loopback is refused by its address", async () => {
    const r = await resolveDestination(new URL("http://ip6-localhost/x"), false);
    // where /etc/hosts has no such name, the lookup fails: refused either way
    expect("problem" in r).toBe(true);
  });

  test("a redirect from a public-looking receiver to an inside one is not followed", async () => {
    // the redirecting receiver is on loopback too, so allowed here, but its Location must not be
    const redirecting = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(null, { status: 302, headers: { location: `http://127.0.0.1:${inside.port}/stolen` } }) });
    try {
      const r = await postSigned(`http://127.0.0.1:${redirecting.port}/hook`, "{}", {}, { ...LIMITS, allowPrivate: true });
      expect(r.ok).toBe(false);
      expect(r.error).toBe("redirect (302) not followed");
      expect(reached).toEqual([]);
    } finally {
      redirecting.stop(true);
    }
  });

  test("plain http goes to the address checked, with the name as Host", async () => {
    const seen: string[] = [];
    const receiver = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => (seen.push(req.headers.get("host") ?? ""), new Response(null, { status: 204 })) });
    try {
      const r = await postSigned(`http://localhost:${receiver.port}/hook`, "{}", {}, { ...LIMITS, allowPrivate: true });
      expect(r.ok).toBe(true);
      expect(seen).toEqual([`localhost:${receiver.port}`]);
    } finally {
      receiver.stop(true);
    }
  });
});
