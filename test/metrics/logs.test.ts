/**
 * --log-format text|json and the logger's redaction net: every line of a
 * real server in JSON parses as one object with time, level and msg and the
 * fields the text line has; and no secret used against the server (the admin
 * password, a wrong one, a session cookie, a token made through the API, a
 * wrong token, the metrics token in an Authorization header) shows up in
 * any line of its output, in either format.
 */
import { describe, expect, test } from "bun:test";
import { parseServerConfig } from "../../src/config/server.ts";
import { formatLine } from "../../src/log.ts";
import { isSecretName, redactField, redactText, REDACTED } from "../../src/log-redact.ts";
import { AdminClient, signedIn } from "../harness/admin.ts";
import { startAgent, tunnelFetch } from "../harness/agent.ts";
import { sayHello } from "../harness/raw-agent.ts";
import { ADMIN_PASSWORD, burrowCommand, startServer } from "../harness/server.ts";

const METRICS_TOKEN = "log-test-metrics-token-7f3a9c";

describe("the redaction net", () => {
  test("fields named like a secret lose their text; ids and counts pass", () => {
    for (const name of ["token", "password", "cookie", "authorization", "secret", "metricsToken", "metrics_token", "api_key", "apiKey", "Set-Cookie", "new_password"]) {
      expect(isSecretName(name)).toBe(true);
      expect(redactField(name, "s3cr3t-value")).toBe(REDACTED);
    }
    expect(redactField("token", 5)).toBe(5);
    expect(redactField("password_set", true)).toBe(true);
    for (const name of ["session", "user", "tunnels", "remote", "monkey", "tokenize_count"]) expect(redactField(name, "plain")).toBe("plain");
  });

  test("secrets in any text are cut out by their shape", () => {
    const t = "brw_" + "A1b2C3".repeat(7) + "x";
    expect(redactText(`bad token ${t} given`)).toBe(`bad token brw_${REDACTED} given`);
    expect(redactText("key brk_abcdefABCDEF0123")).toBe(`key brk_${REDACTED}`);
    expect(redactText("secret whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2Lb+/8= here")).toBe(`secret whsec_${REDACTED} here`);
    expect(redactText("Authorization: Bearer abc.def-ghi")).toBe(`Authorization: Bearer ${REDACTED}`);
    expect(redactText("basic dXNlcjpwYXNz, then")).toBe(`basic ${REDACTED}, then`);
    // the words of a refusal are not a credential
    const words = "user 'alice' must protect every tunnel with basic auth or OIDC";
    expect(redactText(words)).toBe(words);
    expect(redactText("Basic auth, Basic authx")).toBe(`Basic auth, Basic ${REDACTED}`);
    expect(redactText("cookie tunnel_admin_session=Zm9vYmFy; Path=/")).toBe(`cookie tunnel_admin_session=${REDACTED}; Path=/`);
    expect(redactField("err", new Error(`refused ${t}`).message)).not.toContain(t);
    expect(redactField("list", [t, { password: "x", n: 1 }])).toEqual([`brw_${REDACTED}`, { password: REDACTED, n: 1 }]);
  });

  test("a line in either format carries the level, the message and the fields, without the secret", () => {
    const text = formatLine("info", "agent refused", { code: "AUTH_FAILED", token: "brw_abcdefgh12345678", user: 3, reason: "has space" }, "text");
    expect(text).toMatch(/^\d{4}-\d\d-\d\dT\S+Z info agent refused code=AUTH_FAILED token=\[redacted\] user=3 reason="has space"$/);
    const json = JSON.parse(formatLine("warn", "x", { code: "C", password: "hunter22", n: 2, msg: "field named msg" }, "json"));
    expect(json).toEqual({ time: expect.any(String), level: "warn", msg: "x", code: "C", password: REDACTED, n: 2, msg_: "field named msg" });
  });
});

describe("the flags", () => {
  test("--log-format takes text or json, BURROW_LOG_FORMAT too; text by default", () => {
    const at = (argv: string[], env: Record<string, string> = {}) => {
      const p = parseServerConfig(argv, env);
      return p.help ? undefined : p.config.logFormat;
    };
    expect(at([])).toBe("text");
    expect(at(["--log-format", "json"])).toBe("json");
    expect(at([], { BURROW_LOG_FORMAT: "json" })).toBe("json");
    expect(at(["--log-format", "text"], { BURROW_LOG_FORMAT: "json" })).toBe("text");
    expect(() => at(["--log-format", "xml"])).toThrow("--log-format must be text or json (got 'xml')");
  });

  test("--metrics-token: 16 visible characters at least; a bad one is refused without echoing it", () => {
    const p = parseServerConfig(["--metrics-token", METRICS_TOKEN], {});
    expect(p.help ? undefined : p.config.metricsToken).toBe(METRICS_TOKEN);
    const q = parseServerConfig([], { BURROW_METRICS_TOKEN: METRICS_TOKEN });
    expect(q.help ? undefined : q.config.metricsToken).toBe(METRICS_TOKEN);
    for (const bad of ["short-secret-1", "has a space in it!!", "x".repeat(513)]) {
      let message = "";
      try {
        parseServerConfig(["--metrics-token", bad], {});
      } catch (err) {
        message = (err as Error).message;
      }
      expect(message).toStartWith("--metrics-token must be 16 to 512 visible ASCII characters");
      expect(message).not.toContain(bad);
    }
  });

  test("a bad value is one line on stderr and exit 2, before anything starts", () => {
    for (const [args, expected] of [
      [["--log-format", "yaml"], "burrow: --log-format must be text or json (got 'yaml')"],
      [["--metrics-token", "tooshort"], "burrow: --metrics-token must be 16 to 512 visible ASCII characters without spaces (e.g. openssl rand -hex 32)"],
    ] as const) {
      const out = Bun.spawnSync([...burrowCommand(), "server", ...args], { stdout: "pipe", stderr: "pipe" });
      expect(out.exitCode).toBe(2);
      expect(out.stderr.toString()).toBe(expected + "\n");
      expect(out.stdout.toString()).toBe("");
    }
  });
});

/** Does what puts secrets in front of a server, and returns them: logins, a token, handshakes, a scrape. */
async function exercise(server: Awaited<ReturnType<typeof startServer>>, upstreamPort: number): Promise<string[]> {
  const wrongPassword = "not-the-password-42";
  const api = await signedIn(server);
  const cookie = api.cookie!.split("=")[1]!;
  await new AdminClient(server.adminUrl).login("admin", wrongPassword);
  await new AdminClient(server.adminUrl).login("someone-else", wrongPassword);
  const token = await api.createToken(await api.createUser("log-user"));
  const wrongToken = "brw_" + "Z9".repeat(21) + "Q";
  const nearlyRight = token.slice(0, -1) + (token.endsWith("a") ? "b" : "a");
  expect((await sayHello({ port: server.edgePort, via: "websocket", token: wrongToken })).refusal?.code).toBe("AUTH_FAILED");
  expect((await sayHello({ port: server.agentPort!, via: "direct", token: nearlyRight })).refusal?.code).toBe("AUTH_FAILED");
  expect((await sayHello({ port: server.edgePort, via: "websocket", token: "no-prefix-secret-8d7f6e" })).refusal?.code).toBe("AUTH_FAILED");
  await using agent = await startAgent({ kind: "http", target: `127.0.0.1:${upstreamPort}`, server: server.edgeUrl, token });
  expect((await tunnelFetch(server.edgePort, agent.subdomain!, "/", { headers: { Authorization: `Bearer ${METRICS_TOKEN}`, Cookie: `tunnel_admin_session=${cookie}` } })).status).toBe(200);
  expect((await fetch(`${server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } })).status).toBe(200);
  expect((await fetch(`${server.adminUrl}/metrics`, { headers: { Authorization: `Bearer ${wrongToken}` } })).status).toBe(401);
  expect((await fetch(`${server.adminUrl}/api/users`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } })).status).toBe(401);
  // a route that is not there, named with a secret in its path: the 404 is answered, nothing logged with it
  expect((await fetch(`${server.adminUrl}/api/${token}`)).status).toBe(404);
  await agent.stop();
  return [ADMIN_PASSWORD, wrongPassword, cookie, token, wrongToken, nearlyRight, "no-prefix-secret-8d7f6e", METRICS_TOKEN];
}

describe("a real server's output", () => {
  const upstream = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("fine") });

  test("--log-format json: every line is one object with time, level and msg, the ready line's fields included; no secret in any line", async () => {
    const server = await startServer({ args: ["--log-format", "json", "--metrics-token", METRICS_TOKEN] });
    let secrets: string[] = [];
    try {
      secrets = await exercise(server, upstream.port!);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const lines = server.output.lines.filter((l) => l.trim() !== "");
    expect(lines.length).toBeGreaterThan(8);
    for (const line of lines) {
      let parsed: any;
      expect(() => (parsed = JSON.parse(line)), line).not.toThrow();
      expect(typeof parsed.time).toBe("string");
      expect(["info", "warn", "error"]).toContain(parsed.level);
      expect(typeof parsed.msg).toBe("string");
      for (const secret of secrets) expect(line).not.toContain(secret);
    }
    const ready = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "admin api listening");
    expect(Object.keys(ready).sort()).toEqual(["agent_port", "data", "edge_port", "level", "msg", "ssh_port", "time", "tls_port", "url"]);
    expect(lines.map((l) => JSON.parse(l).msg)).toEqual(expect.arrayContaining(["agent refused", "agent connected", "server stopped"]));
    const connected = lines.map((l) => JSON.parse(l)).find((l) => l.msg === "agent connected");
    expect(typeof connected.token).toBe("number"); // the token's id, not the token
  }, 30_000);

  test("text (the default): the same lines as before, and no secret in any of them either", async () => {
    const server = await startServer({ env: { BURROW_METRICS_TOKEN: METRICS_TOKEN } });
    let secrets: string[] = [];
    try {
      secrets = await exercise(server, upstream.port!);
    } finally {
      expect(await server.stop()).toBe(0);
    }
    const text = server.output.text();
    for (const secret of secrets) expect(text).not.toContain(secret);
    expect(text).toMatch(/^\S+Z info agent refused code=AUTH_FAILED /m);
    expect(text).toMatch(/^\S+Z info agent connected session=\S+ user=log-user token=\d+ /m);
    expect(text).toMatch(/^\S+Z info server stopped$/m);
    upstream.stop(true);
  }, 30_000);
});

test("the first admin's generated password is printed once, as one JSON line in JSON", async () => {
  const server = await startServer({ args: ["--log-format", "json"], env: { BURROW_ADMIN_PASSWORD: "" } });
  try {
    const lines = server.output.lines.filter((l) => l.trim() !== "").map((l) => JSON.parse(l));
    const shown = lines.filter((l) => "generated_password" in l);
    expect(shown).toHaveLength(1);
    expect(shown[0].generated_password).toMatch(/^[0-9A-Za-z]{24}$/);
    expect((await new AdminClient(server.adminUrl).login("admin", shown[0].generated_password)).status).toBe(200);
  } finally {
    await server.stop();
  }
});
