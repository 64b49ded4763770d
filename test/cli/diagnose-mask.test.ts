/**
 * What `burrow diagnose --bundle` masks in the agent's log and config
 * file: every secret of the shapes a log line or burrow.yml carries, in
 * text lines and JSON lines alike; the rest left readable.
 */
import { expect, test } from "bun:test";
import { parse } from "yaml";
import { maskConfig, maskText } from "../../src/cli/diagnose/mask.ts";

const TOKEN = "brw_AbCdEf0123456789AbCdEf0123456789AbCdEf01234";

test.each([
  ["a token anywhere", `connected with ${TOKEN} to the server`, TOKEN.slice(4)],
  ["a field named like a token", "token=s3cr3t-value tunnel=web", "s3cr3t-value"],
  ["a password field, quoted in JSON", '{"msg":"x","password":"hunter2","tunnel":"web"}', "hunter2"],
  ["a URL's password", "proxy http://ann:pr0xy@proxy.example:3128/ refused", "pr0xy"],
  ["a Cookie header, to the end of its line", "Cookie: session=abc123; theme=dark", "abc123"],
  ["a Set-Cookie header", "set-cookie: sid=xyz789; HttpOnly", "xyz789"],
  ["an Authorization header", "Authorization: Basic YW5uOmh1bnRlcjI=", "YW5uOmh1bnRlcjI="],
  ["a Proxy-Authorization header", "Proxy-Authorization: Digest username=ann, response=f00d", "f00d"],
  ["an OIDC client secret", "client_secret: 'shh-it-is-secret'", "shh-it-is-secret"],
  ["basic auth pairs", "basic_auth=ann:hunter2", "hunter2"],
  ["an admin key", "key brk_ZZZZyyyyXXXXwwww0123", "ZZZZyyyyXXXXwwww0123"],
])("masked: %s", (_what, line, secret) => {
  const masked = maskText(line);
  expect(masked).not.toContain(secret);
  expect(masked).toContain("[redacted]");
});

test("what is not a secret stays readable", () => {
  const line = "2026-01-01T00:00:00Z INFO forwarding https://myapp.tunnels.example.com -> http://localhost:3000 status=200 ms=12";
  expect(maskText(line)).toBe(line);
});

test("a config file: the token, basic_auth pairs and an OIDC client's secret masked, the rest as it was", () => {
  const masked = maskConfig(
    [
      "server: https://tunnels.example.com",
      `token: ${TOKEN}`,
      "proxy: http://ann:pr0xy@proxy:3128",
      "tunnels:",
      "  web:",
      "    proto: http",
      "    addr: 3000",
      "    subdomain: myapp",
      '    basic_auth: ["ann:hunter2", "bob:pa55"]',
      "    oidc: { issuer: https://id.example.com, client_id: burrow, client_secret: shh, allow_emails: [a@example.com] }",
      "",
    ].join("\n"),
  );
  for (const secret of [TOKEN.slice(4), "pr0xy", "hunter2", "pa55", "shh"]) expect(masked).not.toContain(secret);
  const doc = parse(masked);
  expect(doc.server).toBe("https://tunnels.example.com");
  expect(doc.tunnels.web).toMatchObject({ proto: "http", addr: 3000, subdomain: "myapp", basic_auth: "[redacted]" });
  expect(doc.tunnels.web.oidc).toMatchObject({ issuer: "https://id.example.com", client_id: "burrow", client_secret: "[redacted]" });
});
