/**
 * Hostile and careless input to the users and auth endpoints: wrong types,
 * extreme numbers, odd text, broken or oversized bodies, raw HTTP. Every
 * answer must be a deliberate 4xx with {"error": ...} (never a 500), and the
 * server must come out of it alive and without an "admin request failed" log.
 */
import { Database } from "bun:sqlite";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect } from "node:net";
import { join } from "node:path";
import { AdminClient, signedIn, type ApiResponse } from "../harness/admin.ts";
import { ADMIN_PASSWORD, startServer, type TestServer } from "../harness/server.ts";
import { rawHttp } from "../harness/raw-http.ts";

const PASSWORD = "password-123";
const MIB = 1024 * 1024;

let server: TestServer;
let api: AdminClient;
let target: Record<string, unknown>; // a user the PUT cases aim at, as created
let seq = 0;

beforeAll(async () => {
  server = await startServer();
  api = await signedIn(server);
  const res = await api.post("/api/users", { username: "target", password: PASSWORD, max_tunnels: 3 });
  expect(res.status).toBe(201);
  target = res.body;
});
afterAll(() => server?.stop());

const uniqueName = (prefix = "user") => `${prefix}${++seq}`;

function expectError(res: ApiResponse, status: number, mentions?: string) {
  expect(res.status).toBe(status);
  expect(typeof res.body).toBe("object");
  expect(Object.keys(res.body)).toEqual(["error"]);
  expect(typeof res.body.error).toBe("string");
  expect(res.body.error.length).toBeGreaterThan(0);
  if (mentions) expect(res.body.error).toContain(mentions);
}

const rawHttpToAdmin = async (text: string | Uint8Array) => {
  const reply = await rawHttp(Number(new URL(server.adminUrl).port), text);
  return { status: reply.status, head: reply.head, body: reply.body };
};

const rawRequest = (method: string, path: string, headers: string[], body = "") =>
  rawHttpToAdmin(
    [`${method} ${path} HTTP/1.1`, "Host: burrow.test", `Cookie: ${api.cookie}`, "Connection: close", ...headers, "", body].join("\r\n"),
  );

/** Values of the wrong JSON type for a field of each kind (string, integer limit, boolean flag). */
const NOT_STRINGS: [string, unknown][] = [
  ["a number", 12345678],
  ["zero", 0],
  ["true", true],
  ["false", false],
  ["null", null],
  ["an empty array", []],
  ["an array of a string", ["value-value"]],
  ["an empty object", {}],
  ["a nested object", { value: { deeper: "value-value" } }],
];
const BAD_LIMITS: [string, unknown][] = [
  ["a numeric string", "5"],
  ["the string 0", "0"],
  ["an empty string", ""],
  ["null", null],
  ["true", true],
  ["false", false],
  ["an array", [1]],
  ["an object", { n: 1 }],
  ["1.5", 1.5],
  ["0.1", 0.1],
  ["-1", -1],
  ["-0.5", -0.5],
  ["1e308", 1e308],
  ["-1e308", -1e308],
  ["2**53", 2 ** 53],
  ["2**53 + 2", 2 ** 53 + 2],
  ["1e21", 1e21],
  ["Number.MIN_SAFE_INTEGER", Number.MIN_SAFE_INTEGER],
];
const BAD_FLAGS: [string, unknown][] = [
  ["the string true", "true"],
  ["the string false", "false"],
  ["1", 1],
  ["0", 0],
  ["null", null],
  ["an empty string", ""],
  ["an array", [true]],
  ["an object", { value: true }],
];

/** [field, label, value]: every value must be refused with 400 naming the field. */
const FIELD_CASES: [string, string, unknown][] = [
  ...NOT_STRINGS.map(([l, v]): [string, string, unknown] => ["username", l, v]),
  ["username", "an empty string", ""],
  ["username", "65 characters", "x".repeat(65)],
  ["username", "a non-ASCII letter", "ålice"],
  ["username", "Cyrillic letters", "алиса"],
  ["username", "CJK characters", "名前"],
  ["username", "an emoji", "bob😀"],
  ["username", "a lone surrogate", "bob\ud800"],
  ["username", "a NUL character", "bob\u0000"],
  ["username", "a zero-width space", "bob\u200b"],
  ["username", "fullwidth letters", "ａｄｍｉｎ"],
  ["username", "SQL to drop the users table", "a'; DROP TABLE users;--"],
  ["username", "SQL that is always true", "admin' OR '1'='1"],
  ["username", "a percent sign", "100%"],
  ["username", "HTML", "<script>alert(1)</script>"],
  ...NOT_STRINGS.map(([l, v]): [string, string, unknown] => ["password", l, v]),
  ["password", "seven characters", "1234567"],
  ["password", "1025 characters", "p".repeat(1025)],
  ...(["max_tunnels", "traffic_limit", "max_devices"] as const).flatMap((f) =>
    BAD_LIMITS.map(([l, v]): [string, string, unknown] => [f, l, v]),
  ),
  ...(["skip_warning", "can_use_proxy", "enabled"] as const).flatMap((f) =>
    BAD_FLAGS.map(([l, v]): [string, string, unknown] => [f, l, v]),
  ),
  ...NOT_STRINGS.map(([l, v]): [string, string, unknown] => ["role", l, v]),
  ["role", "ADMIN", "ADMIN"],
  ["role", "an array of admin", ["admin"]],
  ["role", "admin with a NUL", "admin\u0000"],
  ...NOT_STRINGS.map(([l, v]): [string, string, unknown] => ["traffic_period", l, v]),
  ["traffic_period", "Monthly", "Monthly"],
  ["traffic_period", "an array of monthly", ["monthly"]],
  ...NOT_STRINGS.map(([l, v]): [string, string, unknown] => ["allowed_protocols", l, v]),
  ["allowed_protocols", "an empty string", ""],
  ["allowed_protocols", "an array of http", ["http", "tcp"]],
  ["allowed_protocols", "quic", "quic"],
  ["allowed_protocols", "http and quic", "http,quic"],
  ["allowed_protocols", "SQL", "http'; DROP TABLE users;--"],
];

describe("POST /api/users with a bad field", () => {
  test.each(FIELD_CASES)("refuses %s as %s with 400 naming the field", async (field, _label, value) => {
    const res = await api.post("/api/users", { username: uniqueName("bad"), password: PASSWORD, [field]: value });
    expectError(res, 400, field);
  });
});

describe("PUT /api/users/:id with a bad field", () => {
  test.each(FIELD_CASES)("refuses %s as %s with 400 naming the field, and changes nothing", async (field, _label, value) => {
    // a valid change beside the bad one (overridden when the bad field is itself max_devices): it must not land either
    const res = await api.put(`/api/users/${target.id}`, { max_devices: 1, [field]: value });
    expectError(res, 400, field);
    expect((await api.get(`/api/users/${target.id}`)).body.user).toEqual(target);
  });
});

describe("numbers at the edges", () => {
  test.each([
    ["-0", "-0", 0],
    ["2**53 - 1", String(Number.MAX_SAFE_INTEGER), Number.MAX_SAFE_INTEGER],
    ["1e3", "1e3", 1000],
    ["5.0", "5.0", 5],
  ])("accepts %s as a limit and stores the integer it means", async (_label, text, stored) => {
    const name = uniqueName("edge");
    const body = `{"username":"${name}","password":"${PASSWORD}","max_tunnels":${text},"traffic_limit":${text},"max_devices":${text}}`;
    const res = await api.call("POST", "/api/users", body);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ max_tunnels: stored, traffic_limit: stored, max_devices: stored });
    expect(Object.is(res.body.max_tunnels, -0)).toBe(false);
    expect((await api.get(`/api/users/${res.body.id}`)).body.user).toMatchObject({ traffic_limit: stored });
  });

  test.each(["1e400", "-1e400", "123456789012345678901234567890"])("refuses the JSON number %s with 400", async (text) => {
    const body = `{"username":"${uniqueName("inf")}","password":"${PASSWORD}","traffic_limit":${text}}`;
    expectError(await api.call("POST", "/api/users", body), 400, "traffic_limit");
  });
});

describe("whole bodies that are not a JSON object", () => {
  const NOT_OBJECTS: [string, string][] = [
    ["null", "null"],
    ["an array", "[]"],
    ["an array of an object", `[{"username":"x","password":"${PASSWORD}"}]`],
    ["a string", '"username"'],
    ["a number", "42"],
    ["true", "true"],
    ["an unclosed object", "{"],
    ["a closing brace", "}"],
    ["single-quoted JSON", "{'username':'x'}"],
    ["a trailing comma", `{"username":"x","password":"${PASSWORD}",}`],
    ["two objects", '{"a":1}{"b":2}'],
    ["a byte order mark before the object", `\ufeff{"username":"x","password":"${PASSWORD}"}`],
    ["NaN", "NaN"],
    ["undefined", "undefined"],
    ["form encoding", `username=x&password=${PASSWORD}`],
    ["plain text", "hello"],
    ["deep nesting", "[".repeat(400_000) + "]".repeat(400_000)],
  ];
  const ENDPOINTS = [
    ["POST", "/api/users"],
    ["PUT", "/api/users/:id"],
    ["POST", "/api/auth/login"],
  ] as const;
  for (const [method, path] of ENDPOINTS) {
    test.each(NOT_OBJECTS)(`${method} ${path} answers 400 to %s`, async (_label, text) => {
      expectError(await api.call(method, path.replace(":id", String(target.id)), text), 400);
    });
  }

  test("a deeply nested value inside an object answers 400 naming the field", async () => {
    const text = `{"username":${"[".repeat(400_000)}${"]".repeat(400_000)},"password":"${PASSWORD}"}`;
    expectError(await api.call("POST", "/api/users", text), 400);
  });

  test("an empty or blank body is an empty object: create and login answer 400 naming username, update changes nothing", async () => {
    for (const text of ["", "   ", "\r\n\t "]) {
      expectError(await api.call("POST", "/api/users", text), 400, "username");
      expectError(await api.call("POST", "/api/auth/login", text), 400, "username");
      const put = await api.call("PUT", `/api/users/${target.id}`, text);
      expect(put.status).toBe(200);
      const { updated_at: _a, ...rest } = put.body;
      const { updated_at: _b, ...before } = target;
      expect(rest).toEqual(before);
    }
  });

  test("a body with no Content-Length or Content-Type at all is read as empty", async () => {
    const res = await rawRequest("POST", "/api/users", []);
    expect(res.status).toBe(400);
    expect(JSON.parse(res.body)).toEqual({ error: "username is required" });
  });
});

describe("content types", () => {
  test.each([
    ["no Content-Type", []],
    ["text/plain", ["Content-Type: text/plain"]],
    ["form encoding", ["Content-Type: application/x-www-form-urlencoded"]],
    ["multipart", ["Content-Type: multipart/form-data; boundary=xyz"]],
    ["application/xml", ["Content-Type: application/xml"]],
    ["JSON with a charset", ["Content-Type: application/json; charset=utf-8"]],
  ])("reads a JSON body sent with %s as JSON", async (_label, headers) => {
    const name = uniqueName("ctype");
    const body = JSON.stringify({ username: name, password: PASSWORD, max_devices: 2 });
    const res = await rawRequest("POST", "/api/users", [...headers, `Content-Length: ${Buffer.byteLength(body)}`], body);
    expect(res.status).toBe(201);
    expect(JSON.parse(res.body)).toMatchObject({ username: name, max_devices: 2 });
  });

  test("bytes that are not UTF-8 in a string answer 400, not 500", async () => {
    const prefix = new TextEncoder().encode('{"username":"ab');
    const suffix = new TextEncoder().encode(`","password":"${PASSWORD}"}`);
    const body = new Uint8Array([...prefix, 0xff, 0xfe, 0xc3, ...suffix]);
    const res = await fetch(server.adminUrl + "/api/users", { method: "POST", body, headers: { Cookie: api.cookie! } });
    expect(res.status).toBe(400);
    expect(Object.keys((await res.json()) as object)).toEqual(["error"]);
  });
});

describe("duplicate keys and prototype keys", () => {
  test("the last of duplicate keys wins, as in JSON.parse", async () => {
    const text = `{"username":"dupfirst","username":"dupsecond","password":"${PASSWORD}","max_tunnels":1,"max_tunnels":2}`;
    const res = await api.call("POST", "/api/users", text);
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ username: "dupsecond", max_tunnels: 2 });
    const list = (await api.get("/api/users")).body as { username: string }[];
    expect(list.some((u) => u.username === "dupfirst")).toBe(false);
  });

  test("a bad value hidden behind a good duplicate is still refused", async () => {
    const text = `{"username":"${uniqueName("dup")}","password":"${PASSWORD}","max_tunnels":5,"max_tunnels":"five"}`;
    expectError(await api.call("POST", "/api/users", text), 400, "max_tunnels");
  });

  test("__proto__ and constructor keys cannot make an admin, now or for later users", async () => {
    const proto = await api.call(
      "POST",
      "/api/users",
      `{"__proto__":{"role":"admin","enabled":false},"username":"${uniqueName("proto")}","password":"${PASSWORD}"}`,
    );
    expect([201, 400]).toContain(proto.status);
    if (proto.status === 201) expect(proto.body).toMatchObject({ role: "user", enabled: true });
    const ctor = await api.call(
      "POST",
      "/api/users",
      `{"constructor":{"prototype":{"role":"admin"}},"username":"${uniqueName("ctor")}","password":"${PASSWORD}"}`,
    );
    expect([201, 400]).toContain(ctor.status);
    if (ctor.status === 201) expect(ctor.body.role).toBe("user");
    const later = await api.post("/api/users", { username: uniqueName("later"), password: PASSWORD });
    expect(later.body).toMatchObject({ role: "user", enabled: true });
  });
});

describe("SQL metacharacters", () => {
  test("a username that tries to drop the users table answers 400 and the table still works", async () => {
    const before = ((await api.get("/api/users")).body as unknown[]).length;
    expectError(await api.post("/api/users", { username: "a'; DROP TABLE users;--", password: PASSWORD }), 400, "username");
    expectError(await api.put(`/api/users/${target.id}`, { username: "x'); DELETE FROM users;--" }), 400, "username");
    const after = await api.get("/api/users");
    expect(after.status).toBe(200);
    expect((after.body as unknown[]).length).toBe(before);
    const db = new Database(join(server.dataDir, "burrow.db"), { readonly: true });
    try {
      expect((db.query("SELECT count(*) AS n FROM users").get() as { n: number }).n).toBe(before);
    } finally {
      db.close();
    }
  });

  test("SQL in a login answers 401 and signs nobody in", async () => {
    for (const [username, password] of [
      ["admin' --", "anything-at-all"],
      ["' OR '1'='1", "' OR '1'='1"],
      ["admin", "' OR '1'='1' --"],
    ]) {
      const res = await new AdminClient(server.adminUrl).login(username, password);
      expectError(res, 401);
      expect(res.headers.getSetCookie()).toEqual([]);
    }
  });

  test("a password full of SQL is stored as given: its owner can sign in with it", async () => {
    const name = uniqueName("sqlpw");
    const password = `p'; DROP TABLE users;-- "\\ %_`;
    const id = await api.createUser(name, { password, role: "admin" });
    const client = new AdminClient(server.adminUrl);
    expect((await client.login(name, password)).status).toBe(200);
    expect((await client.get("/api/auth/me")).body).toEqual({ id, username: name, role: "admin" });
  });

  test("an id with SQL in the path answers 400", async () => {
    expectError(await api.get("/api/users/1%3B%20DROP%20TABLE%20users"), 400, "id");
    expectError(await api.delete("/api/users/1%20OR%201%3D1"), 400, "id");
    expect((await api.get("/api/users/1")).status).toBe(200);
  });
});

describe("ids in the path", () => {
  const NON_INTEGERS = ["abc", "1.5", "1e3", "0x1", "1a", "%20", "+1", "1,2", "NaN", "Infinity", "%E2%82%AC"];
  for (const method of ["GET", "PUT", "DELETE"]) {
    test.each(NON_INTEGERS)(`${method} /api/users/%s answers 400 naming id`, async (id) => {
      expectError(await api.call(method, `/api/users/${id}`, method === "PUT" ? { max_tunnels: 1 } : undefined), 400, "id");
    });
  }

  test("the largest safe integer is a well-formed id that names nobody: 404", async () => {
    expectError(await api.get(`/api/users/${Number.MAX_SAFE_INTEGER}`), 404);
  });

  test.each(["0", "-1", "9007199254740993", "99999999999999999999", "1".repeat(400)])(
    "the id %s answers 400 or 404, never 500",
    async (id) => {
      for (const method of ["GET", "PUT", "DELETE"]) {
        const res = await api.call(method, `/api/users/${id}`, method === "PUT" ? {} : undefined);
        expect([400, 404]).toContain(res.status);
        expect(Object.keys(res.body)).toEqual(["error"]);
      }
    },
  );
});

describe("oversized bodies", () => {
  test.each([
    ["POST", "/api/users"],
    ["POST", "/api/auth/login"],
    ["PUT", "/api/users/TARGET"],
  ])("%s %s answers 413 to a 2 MiB body", async (method, path) => {
    const res = await api.call(method, path.replace("TARGET", String(target.id)), "x".repeat(2 * MIB));
    expectError(res, 413);
  });

  test("a 2 MiB login body answers 413 even without a session", async () => {
    const text = JSON.stringify({ username: "admin", password: "p".repeat(2 * MIB) });
    expectError(await new AdminClient(server.adminUrl).call("POST", "/api/auth/login", text), 413);
  });

  test("a 2 MiB body sent in chunks, with no Content-Length, answers 413", async () => {
    const piece = new TextEncoder().encode(" ".repeat(64 * 1024));
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (sent >= 2 * MIB) return controller.close();
        sent += piece.byteLength;
        controller.enqueue(piece);
      },
    });
    const res = await fetch(server.adminUrl + "/api/users", { method: "POST", body, headers: { Cookie: api.cookie! } });
    expect(res.status).toBe(413);
    expect(Object.keys((await res.json()) as object)).toEqual(["error"]);
  });

  test("a Content-Length over 1 MiB is refused with 413 before any body arrives", async () => {
    const res = await rawRequest("POST", "/api/users", [`Content-Length: ${2 * MIB}`], "{");
    expect(res.status).toBe(413);
    expect(Object.keys(JSON.parse(res.body))).toEqual(["error"]);
  });

  test("a body of exactly 1 MiB is read; one byte more answers 413", async () => {
    const padTo = (name: string, size: number) => {
      const json = JSON.stringify({ username: name, password: PASSWORD });
      return json.slice(0, -1) + " ".repeat(size - json.length) + "}";
    };
    const exact = padTo(uniqueName("mib"), MIB);
    expect(Buffer.byteLength(exact)).toBe(MIB);
    expect((await api.call("POST", "/api/users", exact)).status).toBe(201);
    const over = padTo(uniqueName("mib"), MIB + 1);
    expectError(await api.call("POST", "/api/users", over), 413);
  });
});

describe("a client that leaves in the middle of its body", () => {
  /** Sends `text` (a head that announces more body than follows), then closes the connection. */
  const sendAndLeave = (text: string) =>
    new Promise<void>((resolve) => {
      const sock = connect(Number(new URL(server.adminUrl).port), "127.0.0.1", () => sock.write(text, () => sock.end()));
      sock.on("error", () => resolve());
      sock.on("close", () => resolve());
    });

  test.each([
    ["POST", "/api/auth/login", false],
    ["POST", "/api/users", true],
    ["PUT", "/api/users/TARGET", true],
  ])("%s %s: nothing is logged at error level, and the next request is served", async (method, path, withSession) => {
    const from = server.output.lines.length;
    const cookie = withSession ? `Cookie: ${api.cookie}\r\n` : "";
    await sendAndLeave(`${method} ${path.replace("TARGET", String(target.id))} HTTP/1.1\r\nHost: burrow.test\r\n${cookie}Content-Length: 10\r\n\r\n{"a":`);
    // the server handles the close a moment later: any error line it would log comes within this wait
    const logged = await server.output.waitFor(/ error |Error: /, 500, from).catch(() => undefined);
    expect(logged).toBeUndefined();
    expect((await api.get("/api/auth/me")).status).toBe(200);
  });
});

describe("malformed HTTP and methods", () => {
  test.each(["abc", "-5", "1, 2"])("a Content-Length of %p is refused with 400", async (length) => {
    const res = await rawRequest("POST", "/api/users", [`Content-Length: ${length}`], "{}");
    // Bun's HTTP parser answers these itself, without a JSON body
    expect(res.status).toBe(400);
  });

  test.each([
    ["PATCH", "/api/users"],
    ["PATCH", "/api/users/1"],
    ["OPTIONS", "/api/users"],
    ["GET", "/api/auth/login"],
    ["PUT", "/api/auth/logout"],
    ["POST", "/api/users/1"],
  ])("%s %s answers 405 with an Allow header", async (method, path) => {
    const res = await api.call(method, path, method === "GET" || method === "OPTIONS" ? undefined : {});
    expectError(res, 405);
    expect(res.headers.get("allow")).toBeTruthy();
  });

  test("an unknown path answers 404 with an error body", async () => {
    expectError(await api.get("/api/userz"), 404);
    expectError(await api.get("/api/users/1/2/3"), 404);
  });
});

describe("login with bad input", () => {
  test("thirty malformed logins answer 400 and do not count toward the lockout", async () => {
    const bodies: unknown[] = [
      { username: 1, password: ADMIN_PASSWORD },
      { username: "admin", password: 1 },
      { username: null, password: null },
      { username: ["admin"], password: ADMIN_PASSWORD },
      { username: { name: "admin" }, password: ADMIN_PASSWORD },
      { username: "admin", password: true },
    ];
    for (let i = 0; i < 30; i++) expectError(await new AdminClient(server.adminUrl).call("POST", "/api/auth/login", bodies[i % bodies.length]), 400);
    expect((await new AdminClient(server.adminUrl).login()).status).toBe(200);
  });

  test("a very long username or password answers 401, not 500", async () => {
    expectError(await new AdminClient(server.adminUrl).login("u".repeat(100_000), "whatever-password"), 401);
    expectError(await new AdminClient(server.adminUrl).login("admin", "p".repeat(500_000)), 401);
    expect((await new AdminClient(server.adminUrl).login()).status).toBe(200);
  });
});

describe("after all of the above", () => {
  test("the server still answers, is still running and has logged no failed request", async () => {
    expect((await api.get("/api/auth/me")).body).toEqual({ id: 1, username: "admin", role: "admin" });
    expect((await api.get(`/api/users/${target.id}`)).status).toBe(200);
    expect(server.proc.exitCode).toBeNull();
    const log = server.output.text();
    expect(log).not.toContain("admin request failed");
    expect(log).not.toContain("admin server error");
    expect(log).not.toContain(PASSWORD);
  });
});
