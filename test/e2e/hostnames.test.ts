/**
 * Tunnels reached by custom hostnames (`burrow http PORT --hostname H`,
 * `burrow tls ... --hostname H`): a verified hostname of the user's, or one
 * name under a verified wildcard of theirs, routed by the full Host (and by
 * SNI for tls tunnels) beside the tunnel's subdomain. Anything else is
 * refused with HOSTNAME_NOT_ALLOWED; one hostname is one tunnel
 * (HOSTNAME_IN_USE); a hostname with no tunnel gets the unknown name's page.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { signedIn, type AdminClient } from "../harness/admin.ts";
import { refusal, startAgent } from "../harness/agent.ts";
import { selfSignedCertificate } from "../harness/certs.ts";
import { runBurrow } from "../harness/run.ts";
import { startServer, type TestServer } from "../harness/server.ts";

let server: TestServer;
let api: AdminClient;
let token: string;
let otherToken: string;
let dir: string;
let ca: string;
const web = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: (req) => new Response(`web for ${req.headers.get("host")} ${new URL(req.url).pathname}`) });
let secure: ReturnType<typeof Bun.serve>;

/** A request to the edge on 127.0.0.1 with `host` as its Host. */
const visit = (host: string, path = "/") => fetch(`http://127.0.0.1:${server.edgePort}${path}`, { headers: { host: `${host}:${server.edgePort}` }, redirect: "manual" });

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-hostnames-"));
  const cert = await selfSignedCertificate({ names: ["vault.acme.test"], ca: true, commonName: "the local service" });
  ca = join(dir, "ca.pem");
  writeFileSync(ca, cert.certPem);
  secure = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert: cert.certPem, key: cert.keyPem }, fetch: () => new Response("vault itself") });
  server = await startServer({ args: ["--tls-port", "0"] });
  api = await signedIn(server);
  const acme = await api.createUser("acme", { allowed_protocols: "http,tls", skip_warning: true });
  token = await api.createToken(acme);
  const other = await api.createUser("other", { skip_warning: true });
  otherToken = await api.createToken(other);
  for (const [hostname, owner, verified] of [
    ["demo.acme.test", acme, true],
    ["*.preview.acme.test", acme, true],
    ["vault.acme.test", acme, true],
    ["pending.acme.test", acme, false],
    ["theirs.acme.test", other, true],
  ] as const) {
    expect((await api.post("/api/hostnames", { hostname, user_id: owner, verified })).status).toBe(201);
  }
});
afterAll(async () => {
  await server?.stop();
  web.stop(true);
  secure?.stop(true);
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("an http tunnel with a custom hostname", () => {
  test("is reached by its hostname (the address it prints) and by the subdomain it asks; the active list has both", async () => {
    await using agent = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "Demo.Acme.test", "--subdomain", "demo-sub", "--skip-warning"] });
    expect(agent.publicUrl).toBe(`http://demo.acme.test:${server.edgePort}`);
    const byHost = await visit("demo.acme.test", "/hello");
    expect(byHost.status).toBe(200);
    expect(await byHost.text()).toBe(`web for demo.acme.test:${server.edgePort} /hello`);
    const row = ((await api.get("/api/tunnels/active")).body as { hostname?: string; subdomain?: string }[]).find((t) => t.hostname === "demo.acme.test");
    expect(row?.subdomain).toBe("demo-sub");
    const bySubdomain = await visit(`${row!.subdomain}.localhost`, "/x");
    expect(await bySubdomain.text()).toBe(`web for ${row!.subdomain}.localhost:${server.edgePort} /x`);
    await agent.output.waitFor(/GET\s+\/hello\s+200/, 5_000);
  });

  test("asked with --subdomain too, it is reached by both; asked alone, by the hostname only (no subdomain)", async () => {
    {
      await using both = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "demo.acme.test", "--subdomain", "demo-both", "--skip-warning"] });
      expect(both.publicUrl).toBe(`http://demo.acme.test:${server.edgePort}`);
      expect((await visit("demo-both.localhost")).status).toBe(200);
      expect((await visit("demo.acme.test")).status).toBe(200);
    }
    await using alone = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "demo.acme.test", "--skip-warning"] });
    expect((await visit("demo.acme.test")).status).toBe(200);
    const rows = ((await api.get("/api/tunnels/active")).body as { hostname?: string; subdomain?: string }[]).filter((t) => t.hostname === "demo.acme.test");
    expect(rows).toHaveLength(1);
    expect(rows[0]!.subdomain).toBeUndefined();
    expect(alone.publicUrl).toBe(`http://demo.acme.test:${server.edgePort}`);
  });

  test("one name under a verified wildcard is allowed; two labels under it are not", async () => {
    await using agent = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "pr-42.preview.acme.test", "--skip-warning"] });
    expect(await (await visit("pr-42.preview.acme.test")).text()).toStartWith("web for pr-42.preview.acme.test");
    expect(await refusal({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "a.b.preview.acme.test"] })).toMatch(
      /^burrow: refused by the server: HOSTNAME_NOT_ALLOWED: 'a\.b\.preview\.acme\.test' is not a verified hostname of user 'acme'/,
    );
  });

  test("HOSTNAME_NOT_ALLOWED for one not yet verified, and for another user's; a wildcard is a usage error", async () => {
    expect(await refusal({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "pending.acme.test"] })).toMatch(/HOSTNAME_NOT_ALLOWED/);
    expect(await refusal({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "theirs.acme.test"] })).toMatch(/HOSTNAME_NOT_ALLOWED/);
    expect(await refusal({ kind: "http", target: web.port!, server: server.edgeUrl, token: otherToken, args: ["--hostname", "demo.acme.test"] })).toMatch(/HOSTNAME_NOT_ALLOWED/);
    const wild = await runBurrow(["http", "3000", "--server", server.edgeUrl, "--token", token, "--hostname", "*.preview.acme.test"]);
    expect(wild.code).toBe(2);
    expect(wild.stderr).toContain("--hostname must be one name");
  });

  test("one hostname, one tunnel: a second agent asking for it is refused with HOSTNAME_IN_USE", async () => {
    await using _first = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "demo.acme.test"] });
    expect(await refusal({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "demo.acme.test"] })).toMatch(
      /^burrow: refused by the server: HOSTNAME_IN_USE: 'demo\.acme\.test' is in use by another tunnel/,
    );
  });

  test("a crashed agent's hostname stays its token's: a new agent of that token takes it at once, another user's would not", async () => {
    const first = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "demo.acme.test", "--skip-warning"] });
    await first.stop("SIGKILL");
    const gone = async () => !((await api.get("/api/tunnels/active")).body as { hostname?: string }[]).some((t) => t.hostname === "demo.acme.test");
    for (let i = 0; i < 100 && !(await gone()); i++) await Bun.sleep(50);
    await using again = await startAgent({ kind: "http", target: web.port!, server: server.edgeUrl, token, args: ["--hostname", "demo.acme.test", "--skip-warning"] });
    expect(again.publicUrl).toBe(`http://demo.acme.test:${server.edgePort}`);
    expect(await (await visit("demo.acme.test", "/back")).text()).toBe(`web for demo.acme.test:${server.edgePort} /back`);
  });

  test("a hostname with no live tunnel gets the unknown name's 404 page; the server's own names are as before", async () => {
    const res = await visit("nobody.acme.test");
    expect(res.status).toBe(404);
    expect(await res.text()).toContain(`There is no tunnel at <code>nobody.acme.test:${server.edgePort}</code>`);
    const unknownSub = await visit("nobody.localhost");
    expect(unknownSub.status).toBe(404);
    expect(await unknownSub.text()).toContain("No tunnel here");
    // an address keeps the server's own page, and the domain itself is the portal
    const own = await fetch(`http://127.0.0.1:${server.edgePort}/`, { headers: { host: `127.0.0.1:${server.edgePort}` } });
    expect(await own.text()).toContain("burrow tunnel server");
    const portal = await fetch(`http://localhost:${server.edgePort}/`);
    expect(await portal.text()).toContain('<div id="app">');
  });
});

describe("a tls tunnel with a custom hostname", () => {
  test("its visitors are passed through by SNI, undecrypted: curl verifies the local service's certificate for the hostname", async () => {
    await using agent = await startAgent({ kind: "tls", target: secure.port!, server: server.edgeUrl, token, args: ["--hostname", "vault.acme.test"] });
    expect(agent.publicUrl).toBe(`tls://vault.acme.test:${server.tlsPort}`);
    const p = Bun.spawn(["curl", "-sS", "--max-time", "10", "--resolve", `vault.acme.test:${server.tlsPort}:127.0.0.1`, "--cacert", ca, `https://vault.acme.test:${server.tlsPort}/`], { stdout: "pipe", stderr: "pipe", timeout: 20_000 });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    expect(err).toBe("");
    expect(code).toBe(0);
    expect(out).toBe("vault itself");
  });
});
