/**
 * burrow.yml's access keys: what each becomes in the HELLO's `access`, and
 * every mistake as FILE:LINE: FIELD: why (never quoting a password).
 */
import { describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseTunnelsFile } from "../../src/agent/settings/tunnels-file.ts";
import type { AgentTunnel } from "../../src/agent/client.ts";
import { httpAccessFromFlags, tcpAccessFromFlags } from "../../src/cli/access-flags.ts";
import { checkHandshake } from "../../src/cli/agent.ts";
import { UsageError } from "../../src/usage-error.ts";
import { burrowCommand } from "../harness/server.ts";
import { FILE, parseError } from "../harness/tunnels-file.ts";


describe("what the keys give", () => {
  test("every access key of an http tunnel; a single value is a list of one", () => {
    const file = parseTunnelsFile(
      `tunnels:
  web:
    proto: http
    addr: 3000
    basic_auth: ["alice:pa:ss", "bob:pw"]
    allow_cidr: 10.0.0.0/8
    deny_cidr: ["10.1.0.0/16", "2001:db8::/32"]
    request_header_add: ["X-Team: blue"]
    request_header_remove: [Cookie]
    response_header_add: ["X-Frame-Options: DENY"]
  sso:
    proto: http
    addr: 3001
    oidc:
      issuer: https://accounts.example.com
      client_id: abc
      client_secret: shh
      allow_emails: ["@example.com", boss@else.org]
  db:
    proto: tcp
    addr: 5432
    allow_cidr: [192.168.0.0/16]
`,
      FILE,
    );
    expect(file.tunnels[0]!.request).toEqual({
      protocol: "http",
      subdomain: undefined,
      skipWarning: false,
      access: {
        basicAuth: [
          { user: "alice", password: "pa:ss" },
          { user: "bob", password: "pw" },
        ],
        allowCidrs: ["10.0.0.0/8"],
        denyCidrs: ["10.1.0.0/16", "2001:db8::/32"],
        requestHeaderAdd: [["X-Team", "blue"]],
        requestHeaderRemove: ["Cookie"],
        responseHeaderAdd: [["X-Frame-Options", "DENY"]],
      },
    });
    expect(file.tunnels[1]!.request).toMatchObject({
      access: { oidc: { issuer: "https://accounts.example.com", clientId: "abc", clientSecret: "shh", allowEmails: ["@example.com", "boss@else.org"] } },
    });
    expect(file.tunnels[2]!.request).toEqual({ protocol: "tcp", port: undefined, access: { allowCidrs: ["192.168.0.0/16"] } });
  });

  test("a tunnel without access keys has no access at all", () => {
    const file = parseTunnelsFile(`tunnels:\n  web:\n    proto: http\n    addr: 3000\n`, FILE);
    expect("access" in file.tunnels[0]!.request).toBe(false);
  });
});

describe("mistakes, by line", () => {
  test("a bad CIDR names its list item and line", () => {
    expect(parseError(`tunnels:\n  web:\n    proto: http\n    addr: 3000\n    allow_cidr:\n      - 10.0.0.0/8\n      - 10.0.0.0/40\n`)).toBe(
      `${FILE}:7: tunnels.web.allow_cidr[1]: '10.0.0.0/40' is not an IPv4 or IPv6 address or CIDR (such as 10.0.0.0/8 or 2001:db8::/32)`,
    );
  });

  test("an empty password is named by its user, and the line, never echoed", () => {
    const message = parseError(`tunnels:\n  web:\n    proto: http\n    addr: 3000\n    basic_auth: "alice:"\n`);
    expect(message).toBe(`${FILE}:5: tunnels.web.basic_auth: the basic-auth password of 'alice' is empty`);
    const noColon = parseError(`tunnels:\n  web:\n    proto: http\n    addr: 3000\n    basic_auth: ["alicesecretpw"]\n`);
    expect(noColon).toBe(`${FILE}:5: tunnels.web.basic_auth[0]: must be USER:PASS`);
    expect(noColon).not.toContain("alicesecretpw");
  });

  test("http-only keys on a tcp tunnel", () => {
    expect(parseError(`tunnels:\n  db:\n    proto: tcp\n    addr: 5432\n    basic_auth: [a:b]\n`)).toBe(`${FILE}:5: tunnels.db.basic_auth: is for http tunnels; this one is tcp`);
  });

  test("header rules the edge owns, and values that would split a head", () => {
    expect(parseError(`tunnels:\n  web:\n    proto: http\n    addr: 3000\n    request_header_remove: [Host]\n`)).toBe(
      `${FILE}:5: tunnels.web.request_header_remove[0]: the header Host is set by the edge and cannot be changed by a rule`,
    );
    expect(parseError(`tunnels:\n  web:\n    proto: http\n    addr: 3000\n    response_header_add: ["no colon"]\n`)).toBe(
      `${FILE}:5: tunnels.web.response_header_add[0]: must be 'Name: value'`,
    );
  });

  test("oidc: unknown keys, a missing secret, a plain-http issuer off loopback, both basic_auth and oidc", () => {
    const head = `tunnels:\n  web:\n    proto: http\n    addr: 3000\n`;
    expect(parseError(`${head}    oidc:\n      issuer: https://id.example.com\n      secret: x\n`)).toBe(
      `${FILE}:7: tunnels.web.oidc.secret: unknown key (allowed: issuer, client_id, client_secret, allow_emails)`,
    );
    expect(parseError(`${head}    oidc:\n      issuer: https://id.example.com\n      client_id: abc\n`)).toBe(`${FILE}:6: tunnels.web.oidc: issuer needs client_secret`);
    expect(parseError(`${head}    oidc:\n      issuer: http://id.example.com\n      client_id: a\n      client_secret: b\n`)).toBe(
      `${FILE}:6: tunnels.web.oidc.issuer: the issuer 'http://id.example.com' must be https (plain http only on loopback)`,
    );
    expect(parseError(`${head}    oidc:\n      issuer: https://id.example.com\n      client_id: a\n      client_secret: b\n      allow_emails: [nobody]\n`)).toBe(
      `${FILE}:9: tunnels.web.oidc.allow_emails[0]: 'nobody' is neither an email address nor @domain`,
    );
    expect(parseError(`${head}    basic_auth: [a:b]\n    oidc:\n      issuer: https://id.example.com\n      client_id: a\n      client_secret: b\n`)).toBe(
      `${FILE}:6: tunnels.web.oidc: a tunnel takes basic_auth or oidc, not both`,
    );
  });
});

test("burrow config check names each tunnel's rules, never a password, a secret or a header's value", async () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow-check-"));
  try {
    writeFileSync(
      join(dir, "burrow.yml"),
      `tunnels:
  web:
    proto: http
    addr: 3000
    basic_auth: ["alice:pw-secret-1", "bob:pw-secret-2"]
    deny_cidr: 10.0.0.0/8
    request_header_add: ["X-Api-Key: key-secret-3"]
  sso:
    proto: http
    addr: 3001
    oidc: { issuer: "https://id.example.com", client_id: abc, client_secret: oidc-secret-4, allow_emails: ["@example.com"] }
  db:
    proto: tcp
    addr: 5432
    allow_cidr: ["::1", 127.0.0.1]
`,
    );
    const proc = Bun.spawn([...burrowCommand(), "config", "check"], { cwd: dir, stdout: "pipe", stderr: "pipe", env: { ...process.env, XDG_CONFIG_HOME: dir } });
    const [out, code] = [await new Response(proc.stdout).text(), await proc.exited];
    expect(code).toBe(0);
    expect(out).toContain("(basic auth (2 users), deny 10.0.0.0/8, header rules)");
    expect(out).toContain("(OIDC https://id.example.com for @example.com)");
    expect(out).toContain("(allow ::1 127.0.0.1)");
    expect(out).not.toMatch(/secret-\d/);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

describe("what one handshake carries", () => {
  const cidrs = (n: number) => Array.from({ length: n }, (_, i) => `10.${i >> 8}.${i & 255}.0/24`);

  test("a list longer than the protocol takes is a mistake of its line in burrow.yml, and of its flag", () => {
    const head = `tunnels:\n  web:\n    proto: http\n    addr: 3000\n`;
    expect(parseError(`${head}    allow_cidr: [${cidrs(257).join(", ")}]\n`)).toBe(`${FILE}:5: tunnels.web.allow_cidr: at most 256 entries (got 257)`);
    expect(parseTunnelsFile(`${head}    allow_cidr: [${cidrs(256).join(", ")}]\n`, FILE).tunnels[0]!.request.access?.allowCidrs).toHaveLength(256);
    const users = Array.from({ length: 65 }, (_, i) => `"u${i}:pw-secret"`).join(", ");
    const message = parseError(`${head}    basic_auth: [${users}]\n`);
    expect(message).toBe(`${FILE}:5: tunnels.web.basic_auth: at most 64 entries (got 65)`);
    const emails = Array.from({ length: 257 }, (_, i) => `"u${i}@example.com"`).join(", ");
    expect(parseError(`${head}    oidc: { issuer: "https://id.example.com", client_id: a, client_secret: b, allow_emails: [${emails}] }\n`)).toBe(
      `${FILE}:5: tunnels.web.oidc.allow_emails: at most 256 entries (got 257)`,
    );
    expect(() => httpAccessFromFlags({ "deny-cidr": cidrs(257) })).toThrow("--deny-cidr: at most 256 entries (got 257)");
    expect(() => httpAccessFromFlags({ "request-header-add": Array.from({ length: 65 }, (_, i) => `X-H${i}: v`) })).toThrow(
      "--request-header-add: at most 64 entries (got 65)",
    );
    expect(() => tcpAccessFromFlags({ "allow-cidr": cidrs(257) })).toThrow("--allow-cidr: at most 256 entries (got 257)");
  });

  test("a value longer than the protocol takes, or settings too large for one HELLO, stop the agent before it connects, without quoting the value", () => {
    const tunnel = (name: string, access: object): AgentTunnel => ({
      name,
      request: { protocol: "http", access },
      target: { host: "localhost", port: 3000, tls: false },
    });
    expect(() => checkHandshake([tunnel("web", { allowCidrs: cidrs(256) })])).not.toThrow();
    const long = "v".repeat(9000);
    let message = "";
    try {
      checkHandshake([tunnel("web", { requestHeaderAdd: [["X-Key", long]] })]);
    } catch (err) {
      expect(err).toBeInstanceOf(UsageError);
      message = (err as Error).message;
    }
    expect(message).toStartWith("tunnel 'web': access.requestHeaderAdd.0.1: ");
    expect(message).not.toContain(long);
    const v6 = Array.from({ length: 256 }, (_, i) => `2001:db8:${i.toString(16)}:ffff:ffff:ffff:ffff:0/112`);
    const many = Array.from({ length: 16 }, (_, i) => tunnel(`t${i}`, { allowCidrs: v6, denyCidrs: v6 }));
    expect(() => checkHandshake(many)).toThrow(/^the tunnels' settings take \d+ KiB, more than one handshake carries \(252 KiB\)/);
  });

  test("burrow start with such a file exits 2 with one line, not a stack trace", async () => {
    const dir = mkdtempSync(join(tmpdir(), "burrow-hello-size-"));
    try {
      const v6 = Array.from({ length: 256 }, (_, i) => `"2001:db8:${i.toString(16)}:ffff:ffff:ffff:ffff:0/112"`).join(", ");
      const tunnels = Array.from({ length: 16 }, (_, i) => `  t${i}:\n    proto: http\n    addr: ${3000 + i}\n    allow_cidr: [${v6}]\n    deny_cidr: [${v6}]\n`).join("");
      writeFileSync(join(dir, "burrow.yml"), `server: http://127.0.0.1:1\ntoken: brw_test\ntunnels:\n${tunnels}`);
      const proc = Bun.spawn([...burrowCommand(), "start", "--all", "--no-inspect", "--log", "text"], {
        cwd: dir,
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, XDG_CONFIG_HOME: dir },
      });
      const [err, code] = [await new Response(proc.stderr).text(), await proc.exited];
      expect(code).toBe(2);
      expect(err).toMatch(/^burrow: the tunnels' settings take \d+ KiB, more than one handshake carries \(252 KiB\): fewer or shorter access rules\n$/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
