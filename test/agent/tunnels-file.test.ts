/**
 * burrow.yml as read by burrow start and burrow config check: what each
 * field becomes, and every mistake reported as FILE:LINE: FIELD: why.
 */
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { normaliseServerUrl, resolveCredentials, resolveProxy } from "../../src/agent/settings/server-and-token.ts";
import { findConfigFile, parseTunnelsFile, readTunnelsFile } from "../../src/agent/settings/tunnels-file.ts";
import { FILE, parseError } from "../harness/tunnels-file.ts";


describe("what a valid file gives", () => {
  test("every field of an http and a tcp tunnel, in the file's order", () => {
    const file = parseTunnelsFile(
      `# my tunnels
server: https://tunnels.example.com
token: brw_abc
proxy: socks5://127.0.0.1:1080
insecure: true
tunnels:
  web:
    proto: http
    addr: 3000
    subdomain: MyApp
    host_header: rewrite
    skip_warning: true
    inspect: false
    response_timeout: 120
  db:
    proto: tcp
    addr: "[::1]:5432"
    remote_port: 40000
  api: { proto: http, addr: "https://localhost:8443" }
`,
      FILE,
    );
    expect(file).toEqual({
      path: FILE,
      server: "https://tunnels.example.com",
      token: "brw_abc",
      proxy: "socks5://127.0.0.1:1080",
      insecure: true,
      tunnels: [
        {
          name: "web",
          request: { protocol: "http", subdomain: "myapp", skipWarning: true, responseTimeout: 120 },
          target: { host: "localhost", port: 3000, tls: false, hostHeader: "rewrite" },
          inspect: false,
        },
        { name: "db", request: { protocol: "tcp", port: 40000 }, target: { host: "::1", port: 5432, tls: false }, inspect: false },
        {
          name: "api",
          request: { protocol: "http", subdomain: undefined, skipWarning: false },
          target: { host: "localhost", port: 8443, tls: true, hostHeader: undefined },
          inspect: true,
        },
      ],
    });
  });

  test("proto: tls takes a subdomain, proxy_protocol and IP rules, and no http or tcp key", () => {
    const file = parseTunnelsFile("tunnels:\n  vault:\n    proto: tls\n    addr: 8443\n    subdomain: Vault\n    proxy_protocol: true\n    deny_cidr: 10.0.0.0/8\n", FILE);
    expect(file.tunnels).toEqual([
      { name: "vault", request: { protocol: "tls", subdomain: "vault", access: { denyCidrs: ["10.0.0.0/8"] } }, target: { host: "localhost", port: 8443, tls: false, proxyProtocol: true }, inspect: false },
    ]);
    expect(parseError("tunnels:\n  a:\n    proto: tls\n    addr: 8443\n    remote_port: 9000\n")).toBe(`${FILE}:5: tunnels.a.remote_port: is for tcp and udp tunnels; this one is tls`);
    expect(parseError("tunnels:\n  a:\n    proto: tls\n    addr: 8443\n    host_header: rewrite\n")).toBe(`${FILE}:5: tunnels.a.host_header: is for http tunnels; this one is tls`);
    expect(parseError("tunnels:\n  a: {proto: tls, addr: 8443, subdomain: x}\n  b: {proto: http, addr: 80, subdomain: x}\n")).toBe(`${FILE}:3: tunnels.b.subdomain: 'x' is also the subdomain of tunnel 'a'`);
  });

  test("proto: udp takes a remote_port and IP rules, in a port space apart from tcp's", () => {
    const file = parseTunnelsFile("tunnels:\n  dns:\n    proto: udp\n    addr: 127.0.0.1:53\n    remote_port: 2053\n    allow_cidr: 10.0.0.0/8\n  web: {proto: tcp, addr: 80, remote_port: 2053}\n", FILE);
    expect(file.tunnels[0]).toEqual({ name: "dns", request: { protocol: "udp", port: 2053, access: { allowCidrs: ["10.0.0.0/8"] } }, target: { host: "127.0.0.1", port: 53, tls: false }, inspect: false });
    expect(file.tunnels[1]!.request).toEqual({ protocol: "tcp", port: 2053 });
  });

  test("private: true with name and share makes a private tcp tunnel; the mistakes are named by their line", () => {
    const file = parseTunnelsFile("tunnels:\n  db:\n    proto: tcp\n    addr: 5432\n    private: true\n    name: DB\n    share: [bob, carol]\n  ssh: {proto: tcp, addr: 22, private: true, name: ssh, share: 'dave, erin'}\n", FILE);
    expect(file.tunnels[0]!.request).toEqual({ protocol: "tcp", private: { name: "db", share: ["bob", "carol"], localPort: 5432 } });
    expect(file.tunnels[1]!.request).toEqual({ protocol: "tcp", private: { name: "ssh", share: ["dave", "erin"], localPort: 22 } });
    expect(() => parseTunnelsFile("tunnels:\n  db: {proto: tcp, addr: 5432, private: true}\n", FILE)).toThrow("tunnels.db.name: missing");
    expect(() => parseTunnelsFile("tunnels:\n  db: {proto: tcp, addr: 5432, name: db}\n", FILE)).toThrow("tunnels.db.name: goes with private: true");
    expect(() => parseTunnelsFile("tunnels:\n  db: {proto: tcp, addr: 5432, private: true, name: 'no spaces'}\n", FILE)).toThrow("tunnels.db.name: must be 1-63 characters");
    expect(() => parseTunnelsFile("tunnels:\n  db: {proto: tcp, addr: 5432, private: true, name: db, remote_port: 20000}\n", FILE)).toThrow("a private tunnel is not public: remote_port does not go with it");
    expect(() => parseTunnelsFile("tunnels:\n  site: {proto: tls, addr: 443, private: true, name: site}\n", FILE)).toThrow("tunnels.site.private");
  });

  test("private http and udp tunnels: the http one keeps its local options and no public one", () => {
    const file = parseTunnelsFile("tunnels:\n  app: {proto: http, addr: 3000, private: true, name: app, share: [bob], host_header: rewrite}\n  dns: {proto: udp, addr: 53, private: true, name: dns}\n", FILE);
    expect(file.tunnels[0]).toMatchObject({ request: { protocol: "http", private: { name: "app", share: ["bob"], localPort: 3000 } }, target: { port: 3000, hostHeader: "rewrite" }, inspect: true });
    expect(file.tunnels[1]!.request).toEqual({ protocol: "udp", private: { name: "dns", localPort: 53 } });
    expect(() => parseTunnelsFile("tunnels:\n  app: {proto: http, addr: 3000, private: true, name: app, subdomain: app, basic_auth: 'u:secretsecret'}\n", FILE)).toThrow("a private tunnel is not public: subdomain, basic_auth do not go with it");
    expect(() => parseTunnelsFile("tunnels:\n  dns: {proto: udp, addr: 53, private: true, name: dns, remote_port: 2053}\n", FILE)).toThrow("a private tunnel is not public: remote_port does not go with it");
  });

  test("allow_upgrade: the switches besides websocket a tunnel's requests may ask for, public or private, asked of the server and kept by the agent", () => {
    const file = parseTunnelsFile("tunnels:\n  a: {proto: http, addr: 3000, allow_upgrade: [H2C, h2c, foo]}\n  b: {proto: http, addr: 3001, private: true, name: b, allow_upgrade: h2c}\n  c: {proto: http, addr: 3002}\n", FILE);
    expect(file.tunnels[0]!.request).toMatchObject({ allowUpgrade: ["h2c", "foo"] });
    expect(file.tunnels[0]!.target.allowUpgrade).toEqual(new Set(["h2c", "foo"]));
    expect(file.tunnels[1]!.request).toMatchObject({ private: { name: "b" }, allowUpgrade: ["h2c"] });
    expect(file.tunnels[2]!.request).not.toHaveProperty("allowUpgrade");
    expect(file.tunnels[2]!.target.allowUpgrade).toBeUndefined();
  });

  test("proxy_protocol: true asks a tcp tunnel's connections to start with a PROXY header; false and absent do not", () => {
    const file = parseTunnelsFile("tunnels:\n  a: {proto: tcp, addr: 443, proxy_protocol: true}\n  b: {proto: tcp, addr: 444, proxy_protocol: false}\n  c: {proto: tcp, addr: 445}\n", FILE);
    expect(file.tunnels.map((t) => t.target.proxyProtocol)).toEqual([true, undefined, undefined]);
  });

  test("server and token are optional; inspect defaults to on, skip_warning to off", () => {
    const file = parseTunnelsFile("tunnels:\n  a:\n    proto: http\n    addr: localhost:8080\n", FILE);
    expect(file.server).toBeUndefined();
    expect(file.token).toBeUndefined();
    expect(file.tunnels[0]!.inspect).toBe(true);
    expect(file.tunnels[0]!.request).toEqual({ protocol: "http", subdomain: undefined, skipWarning: false });
  });
});

describe("every mistake: one line naming the file, the line and the field", () => {
  const cases: [string, string, string][] = [
    ["an unknown key in a tunnel", "tunnels:\n  web:\n    proto: http\n    addr: 3000\n    subdomian: x\n", `${FILE}:5: tunnels.web.subdomian: unknown key`],
    ["an unknown key at the top", "tunels:\n  web: {proto: http, addr: 3000}\n", `${FILE}:1: tunels: unknown key`],
    ["a tunnel name used twice", "tunnels:\n  web:\n    proto: http\n    addr: 3000\n  web:\n    proto: tcp\n    addr: 22\n", `${FILE}:5: tunnels.web: the tunnel name 'web' is used twice`],
    [
      "two tunnels on the same subdomain (case aside)",
      "tunnels:\n  a: {proto: http, addr: 3000, subdomain: shop}\n  b:\n    proto: http\n    addr: 3001\n    subdomain: SHOP\n",
      `${FILE}:6: tunnels.b.subdomain: 'shop' is also the subdomain of tunnel 'a'`,
    ],
    [
      "two tunnels on the same remote port",
      "tunnels:\n  a: {proto: tcp, addr: 22, remote_port: 2222}\n  b: {proto: tcp, addr: 23, remote_port: 2222}\n",
      `${FILE}:3: tunnels.b.remote_port: 2222 is also the remote_port of tcp tunnel 'a'`,
    ],
    [
      "two udp tunnels on the same remote port",
      "tunnels:\n  a: {proto: udp, addr: 53, remote_port: 2053}\n  b: {proto: udp, addr: 54, remote_port: 2053}\n",
      `${FILE}:3: tunnels.b.remote_port: 2053 is also the remote_port of udp tunnel 'a'`,
    ],
    ["a wrong type: a number where true/false goes", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    inspect: 1\n", `${FILE}:5: tunnels.a.inspect: must be true or false`],
    ["a wrong type: a list where a port goes", "tunnels:\n  a:\n    proto: http\n    addr: [3000]\n", `${FILE}:4: tunnels.a.addr: must be a single value`],
    ["a wrong type: token as a number", "token: 12345\ntunnels:\n  a: {proto: http, addr: 1}\n", `${FILE}:1: token: must be a string`],
    ["an unknown proto", "tunnels:\n  a:\n    proto: quic\n    addr: 53\n", `${FILE}:3: tunnels.a.proto: must be http, tcp, tls or udp (got 'quic')`],
    ["a subdomain on a udp tunnel", "tunnels:\n  a:\n    proto: udp\n    addr: 53\n    subdomain: dns\n", `${FILE}:5: tunnels.a.subdomain: is for http and tls tunnels; this one is udp`],
    ["the PROXY protocol on a udp tunnel", "tunnels:\n  a:\n    proto: udp\n    addr: 53\n    proxy_protocol: true\n", `${FILE}:5: tunnels.a.proxy_protocol: is for tcp and tls tunnels; this one is udp`],
    ["no proto", "tunnels:\n  a:\n    addr: 53\n", `${FILE}:3: tunnels.a.proto: missing`],
    ["no addr", "tunnels:\n  a:\n    proto: http\n", `${FILE}:3: tunnels.a.addr: missing`],
    ["a port out of range", "tunnels:\n  a:\n    proto: tcp\n    addr: 99999\n", `${FILE}:4: tunnels.a.addr: '99999' is not PORT or HOST:PORT`],
    ["a URL for a tcp tunnel", "tunnels:\n  a:\n    proto: tcp\n    addr: http://localhost:22\n", `${FILE}:4: tunnels.a.addr: 'http://localhost:22' is not PORT or HOST:PORT`],
    ["an http field on a tcp tunnel", "tunnels:\n  a:\n    proto: tcp\n    addr: 22\n    subdomain: x\n", `${FILE}:5: tunnels.a.subdomain: is for http and tls tunnels; this one is tcp`],
    ["a tcp field on an http tunnel", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    remote_port: 8080\n", `${FILE}:5: tunnels.a.remote_port: is for tcp and udp tunnels; this one is http`],
    ["the PROXY protocol on an http tunnel", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    proxy_protocol: true\n", `${FILE}:5: tunnels.a.proxy_protocol: is for tcp and tls tunnels; this one is http`],
    ["proxy_protocol that is not true or false", "tunnels:\n  a:\n    proto: tcp\n    addr: 80\n    proxy_protocol: v2\n", `${FILE}:5: tunnels.a.proxy_protocol: must be true or false`],
    ["a subdomain that is no DNS label", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    subdomain: -bad-\n", `${FILE}:5: tunnels.a.subdomain: must be one DNS label`],
    ["a remote port of 0", "tunnels:\n  a:\n    proto: tcp\n    addr: 22\n    remote_port: 0\n", `${FILE}:5: tunnels.a.remote_port: must be a port number from 1 to 65535`],
    ["a response timeout too long", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    response_timeout: 100000\n", `${FILE}:5: tunnels.a.response_timeout: must be a number of seconds from 0.1 to 86400`],
    ["an Upgrade token with a version", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    allow_upgrade: [h2c/1]\n", `${FILE}:5: tunnels.a.allow_upgrade[0]: must be a protocol name as Upgrade says it, such as h2c (got 'h2c/1')`],
    ["allow_upgrade on a tcp tunnel", "tunnels:\n  a:\n    proto: tcp\n    addr: 80\n    allow_upgrade: h2c\n", `${FILE}:5: tunnels.a.allow_upgrade: is for http tunnels; this one is tcp`],
    ["an empty host header", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    host_header: ' '\n", `${FILE}:5: tunnels.a.host_header: needs 'rewrite' or a host name`],
    [
      "a host header with a line break, which would add a header line of its own",
      'tunnels:\n  a:\n    proto: http\n    addr: 80\n    host_header: "evil.example\\r\\nX-Injected: 1"\n',
      `${FILE}:5: tunnels.a.host_header: needs 'rewrite' or a host name such as example.com or example.com:8080 (got 'evil.example??X-Injected: 1')`,
    ],
    ["a host header with a space", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    host_header: a b\n", `${FILE}:5: tunnels.a.host_header: needs 'rewrite' or a host name such as`],
    ["a host header that is not ASCII", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    host_header: café.example\n", `${FILE}:5: tunnels.a.host_header: needs 'rewrite' or a host name such as`],
    ["a key given twice in a tunnel", "tunnels:\n  a:\n    proto: http\n    addr: 80\n    addr: 81\n", `${FILE}:5: tunnels.a.addr: is given twice`],
    ["a tunnel with nothing in it", "tunnels:\n  a:\n  b: {proto: http, addr: 1}\n", `${FILE}:2: tunnels.a: must be a map`],
    ["a bad tunnel name", "tunnels:\n  'my web':\n    proto: http\n    addr: 80\n", `${FILE}:2: tunnels.my web: a tunnel name is 1-64 letters`],
    ["no tunnels key", "server: https://x\n", `${FILE}:1: tunnels: missing`],
    ["tunnels as a list", "tunnels:\n  - proto: http\n", `${FILE}:2: tunnels: must be a map of named tunnels`],
    ["no tunnels at all", "tunnels: {}\n", `${FILE}:1: tunnels: no tunnels`],
    ["an empty file", "", `${FILE}:1: the file is empty`],
    ["a file that is a list", "- a\n- b\n", `${FILE}:1: must be a map`],
    ["not YAML", "tunnels:\n  a:\n    proto: http\n   addr: 3000\n", `${FILE}:4: not valid YAML`],
  ];
  test.each(cases)("%s", (_name, text, expected) => {
    const message = parseError(text);
    expect(message.startsWith(expected)).toBe(true);
    expect(message).not.toContain("\n");
  });

  test("a server: or proxy: that is no usable URL is a mistake of its line, like any other, and its password is not shown", () => {
    const tunnels = "tunnels:\n  a: {proto: http, addr: 1}\n";
    const server = parseError(`server: ftp://me:s3cret-pass@tunnels.example.com\n${tunnels}`);
    expect(server).toBe(`${FILE}:1: server: 'ftp://me:***@tunnels.example.com' must be an http:// or https:// URL`);
    const proxy = parseError(`token: brw_x\nproxy: ftp://me:s3cret-pass@proxy:3128\n${tunnels}`);
    expect(proxy).toBe(`${FILE}:2: proxy: 'ftp://me:***@proxy:3128' must be http://, https:// or socks5://`);
    expect(parseError(`proxy: "http://me:s3cret-pass@[bad"\n${tunnels}`)).toBe(
      `${FILE}:1: proxy: 'http://me:***@[bad' is not a URL such as http://proxy:3128 or socks5://proxy:1080`,
    );
    // the flags' own messages keep the flag's name and hide the password too
    expect(() => normaliseServerUrl("ftp://me:s3cret-pass@host")).toThrow("--server: 'ftp://me:***@host' must be an http:// or https:// URL");
    expect(() => resolveProxy("ftp://me:s3cret-pass@host", {})).toThrow("--proxy: 'ftp://me:***@host' must be http://, https:// or socks5://");
    expect(() => resolveProxy("ftp://me:s3cret@pass@host:21/x", {})).toThrow("--proxy: 'ftp://me:***@host:21/x' must be http://, https:// or socks5://");
    // what is right still reads as before
    expect(parseTunnelsFile(`server: tunnels.example.com\nproxy: http://me:pw@proxy:3128\n${tunnels}`, FILE)).toMatchObject({
      server: "tunnels.example.com",
      proxy: "http://me:pw@proxy:3128",
    });
  });

  test("host_header takes a host name, an address and a port", () => {
    for (const host of ["example.com", "example.com:8080", "127.0.0.1:3000", "[::1]:8443", "my_host.internal", "rewrite"]) {
      const file = parseTunnelsFile(`tunnels:\n  a:\n    proto: http\n    addr: 80\n    host_header: "${host}"\n`, FILE);
      expect(file.tunnels[0]!.target.hostHeader).toBe(host);
    }
  });

  test("more tunnels than one agent runs (16)", () => {
    const text = "tunnels:\n" + Array.from({ length: 17 }, (_, i) => `  t${i}: {proto: http, addr: ${3000 + i}}\n`).join("");
    expect(parseError(text)).toStartWith(`${FILE}:2: tunnels: 17 tunnels; one agent runs at most 16`);
  });
});

describe("which file, and which server and token", () => {
  const dir = mkdtempSync(join(tmpdir(), "burrow tunnels file "));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const cwd = join(dir, "project");
  const xdg = join(dir, "xdg");
  mkdirSync(cwd);
  mkdirSync(join(xdg, "burrow"), { recursive: true });
  const env = { XDG_CONFIG_HOME: xdg, HOME: dir };

  test("--config, else ./burrow.yml, else the config directory's burrow.yml, else none", () => {
    expect(findConfigFile(undefined, env, cwd)).toBeUndefined();
    writeFileSync(join(xdg, "burrow", "burrow.yml"), "tunnels: {a: {proto: http, addr: 1}}\n");
    expect(findConfigFile(undefined, env, cwd)).toBe(join(xdg, "burrow", "burrow.yml"));
    writeFileSync(join(cwd, "burrow.yml"), "tunnels: {b: {proto: http, addr: 2}}\n");
    expect(findConfigFile(undefined, env, cwd)).toBe(join(cwd, "burrow.yml"));
    writeFileSync(join(dir, "other.yml"), "tunnels: {c: {proto: http, addr: 3}}\n");
    expect(findConfigFile("../other.yml", env, cwd)).toBe(join(dir, "other.yml"));
    expect(() => findConfigFile("missing.yml", env, cwd)).toThrow("--config: missing.yml does not exist");
    expect(readTunnelsFile(join(dir, "other.yml")).tunnels[0]!.name).toBe("c");
  });

  test("a file over 1 MiB is refused before it is parsed", () => {
    const big = join(dir, "big.yml");
    writeFileSync(big, "#".repeat(1024 * 1024 + 1));
    expect(() => readTunnelsFile(big)).toThrow("larger than 1 MiB");
  });

  test("flags, then BURROW_SERVER / BURROW_TOKEN, then the file, then burrow login's", () => {
    writeFileSync(join(xdg, "burrow", "config.json"), JSON.stringify({ server: "https://login.example", token: "brw_login" }));
    const file = { server: "https://file.example", token: "brw_file" };
    const envs = { ...env, BURROW_SERVER: "https://env.example", BURROW_TOKEN: "brw_env" };
    expect(resolveCredentials({ server: "https://flag.example", token: "brw_flag" }, envs, file)).toEqual({ server: "https://flag.example", token: "brw_flag" });
    expect(resolveCredentials({}, envs, file)).toEqual({ server: "https://env.example", token: "brw_env" });
    expect(resolveCredentials({}, env, file)).toEqual({ server: "https://file.example", token: "brw_file" });
    expect(resolveCredentials({}, env, { server: "https://file.example" })).toEqual({ server: "https://file.example", token: "brw_login" });
    expect(resolveCredentials({}, env, {})).toEqual({ server: "https://login.example", token: "brw_login" });
  });
});
