/**
 * A portal session cookie planted by a tunnel: every subdomain of the
 * server's domain is someone else's page, and a page may set a cookie for
 * the parent domain ("cookie tossing"). Whenever the portal is served over
 * HTTPS (the edge's own TLS, or a proxy's with an https --public-url) its
 * session cookie is `__Host-burrow_portal`: Secure, Path=/, no Domain, a
 * name no subdomain can set; a cookie of the plain name is no session there.
 * Over plain HTTP, a request carrying two session cookies, or one that is
 * no session of the server's, is signed out (401 with nothing in it) and
 * the cookie cleared, the domain's too. What plain HTTP cannot tell apart
 * (a planted cookie holding someone's real session, alone) is why the
 * server warns at start when its portal is on plain HTTP off loopback.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { portalAs } from "../harness/portal.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { startServer, type TestServer } from "../harness/server.ts";

/** A portal request as bytes (so any Cookie header goes exactly as written); its status, Set-Cookie fields and body. */
async function portalGet(port: number, path: string, cookie: string | undefined, extra = ""): Promise<{ status: number; setCookies: string[]; body: string }> {
  const reply = await rawHttp(port, `GET ${path} HTTP/1.1\r\nHost: localhost:${port}\r\n${cookie === undefined ? "" : `Cookie: ${cookie}\r\n`}${extra}Connection: close\r\n\r\n`);
  const setCookies = reply.head.split("\r\n").filter((l) => /^set-cookie:/i.test(l)).map((l) => l.slice(l.indexOf(":") + 1).trim());
  return { status: reply.status, setCookies, body: reply.body };
}

/** A raw POST /_burrow/api/login; the Set-Cookie it answers with. */
async function signInRaw(port: number, username: string): Promise<string> {
  const body = JSON.stringify({ username, password: "password-123" });
  const reply = await rawHttp(port, `POST /_burrow/api/login HTTP/1.1\r\nHost: localhost:${port}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n${body}`);
  expect(reply.status).toBe(200);
  return reply.head.split("\r\n").find((l) => /^set-cookie:/i.test(l))!.replace(/^set-cookie:\s*/i, "");
}

describe("portal cookie planted by a tunnel: served over HTTPS through a proxy (--public-url https://...)", () => {
  let server: TestServer;
  let admin: AdminClient;
  beforeAll(async () => {
    server = await startServer({ args: ["--public-url", "https://localhost"] });
    admin = await signedIn(server);
    await admin.createUser("alice");
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("portal cookie planted by a tunnel: over HTTPS the session cookie is __Host-burrow_portal, Secure, Path=/, without Domain; a plain-named cookie with a real session in it is no session", async () => {
    const setCookie = await signInRaw(server.edgePort, "alice");
    expect(setCookie).toMatch(/^__Host-burrow_portal=[A-Za-z0-9_-]{40,}; /);
    const attributes = setCookie.split(";").map((a) => a.trim().toLowerCase());
    expect(attributes).toContain("secure");
    expect(attributes).toContain("path=/");
    expect(attributes).toContain("httponly");
    expect(attributes.some((a) => a.startsWith("domain="))).toBe(false);
    const key = setCookie.split(";")[0]!.split("=")[1]!;

    expect((await portalGet(server.edgePort, "/_burrow/api/me", `__Host-burrow_portal=${key}`)).status).toBe(200);
    // what a tunnel's page can set for the parent domain: the plain name, which is nothing here
    const planted = await portalGet(server.edgePort, "/_burrow/api/me", `burrow_portal=${key}`);
    expect(planted.status).toBe(401);
    expect(planted.body).not.toContain("alice");
  });
});

describe("portal cookie planted by a tunnel: served over plain HTTP on loopback", () => {
  let server: TestServer;
  let admin: AdminClient;
  beforeAll(async () => {
    server = await startServer();
    admin = await signedIn(server);
    await admin.createUser("alice");
    await admin.createUser("bob");
  });
  afterAll(async () => {
    await server?.stop();
  });

  test("portal cookie planted by a tunnel: a second session cookie of the name signs the request out and clears both, whichever comes first", async () => {
    const alice = (await portalAs(server.edgePort, "alice")).cookie!;
    const bob = (await portalAs(server.edgePort, "bob")).cookie!;
    for (const both of [`${bob}; ${alice}`, `${alice}; ${bob}`, `${alice}; x=1; ${alice}`]) {
      const res = await portalGet(server.edgePort, "/_burrow/api/me", both);
      expect(res.status).toBe(401);
      expect(res.body).not.toMatch(/alice|bob/);
      expect(res.setCookies).toHaveLength(2);
      expect(res.setCookies.every((c) => c.startsWith("burrow_portal=;") && c.includes("Max-Age=0"))).toBe(true);
      expect(res.setCookies.some((c) => c.includes("Domain=localhost"))).toBe(true);
    }
  });

  test("portal cookie planted by a tunnel: a session cookie no session was issued for (made up, or ended) is signed out and cleared, the domain's too, saying nothing", async () => {
    const madeUp = await portalGet(server.edgePort, "/_burrow/api/me", `burrow_portal=${"A".repeat(43)}`);
    expect(madeUp.status).toBe(401);
    expect(JSON.parse(madeUp.body)).toEqual({ error: "session expired or invalid" });
    expect(madeUp.setCookies).toHaveLength(2);
    expect(madeUp.setCookies.every((c) => c.startsWith("burrow_portal=;") && c.includes("Max-Age=0"))).toBe(true);
    expect(madeUp.setCookies.some((c) => c.includes("Domain=localhost"))).toBe(true);

    const portal = await portalAs(server.edgePort, "alice");
    expect((await portal.post("/_burrow/api/logout")).status).toBe(200);
    const ended = await portalGet(server.edgePort, "/_burrow/api/me", portal.cookie);
    expect(ended.status).toBe(401);
    expect(ended.setCookies.some((c) => c.includes("Domain=localhost"))).toBe(true);

    // a write with such a cookie does nothing and says nothing either
    const write = await rawHttp(
      server.edgePort,
      `POST /_burrow/api/me/tokens HTTP/1.1\r\nHost: localhost:${server.edgePort}\r\nCookie: burrow_portal=${"B".repeat(43)}\r\nContent-Type: application/json\r\nContent-Length: 22\r\nConnection: close\r\n\r\n{"device_name":"evil"}`,
    );
    expect(write.status).toBe(401);
  });

  test("portal cookie planted by a tunnel: no cookie at all is only signed out (nothing to clear)", async () => {
    const none = await portalGet(server.edgePort, "/_burrow/api/me", undefined);
    expect(none.status).toBe(401);
    expect(none.setCookies).toEqual([]);
  });
});

describe("portal cookie planted by a tunnel: plain HTTP off loopback", () => {
  test("portal cookie planted by a tunnel: a portal on plain HTTP for a domain that is not loopback is warned about at start; on loopback or over HTTPS it is not", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "burrow-portal-plain-"));
    try {
      await using plain = await startServer({ args: ["--domain", "tunnels.example.test"], dataDir });
      await plain.output.waitFor(/the portal is served over plain HTTP: any tunnel's page can plant a session cookie/, 5_000);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
    await using https = await startServer({ args: ["--domain", "tunnels.example.test", "--public-url", "https://tunnels.example.test"] });
    await using loopback = await startServer();
    for (const s of [https, loopback]) expect(s.output.text()).not.toContain("the portal is served over plain HTTP");
  }, 60_000);
});
