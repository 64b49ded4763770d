/**
 * Path traversal past a path route (the class: a proxy that routes on the
 * raw path, in front of a server that resolves dot segments and escapes
 * itself). `--route /api=S`, where S is Python's http.server serving a
 * directory with api/ok.txt and internal-secret.txt: S resolves
 * `/api/../internal-secret.txt` (and its encoded forms) to the secret, so
 * a request that the route sends to S with such a path leaks it. The edge
 * makes every path normal before anything reads it and forwards that path,
 * refusing with 400 what has no one normal form; the agent does the same
 * for heads no edge read (a private tunnel's connector). An absolute-form
 * target goes by its path like any other.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Subprocess } from "bun";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RawService, response } from "../agent/raw-service.ts";
import { startConnector } from "../harness/connector.ts";
import { LineReader } from "../harness/lines.ts";
import { freePort, untilListening } from "../harness/ports.ts";
import { rawHttp } from "../harness/raw-http.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { waitUntil } from "../harness/wait.ts";

const SECRET = "TOP-SECRET-CONTENT";
const OK = "ok from the api";

let dir: string;
let files: Subprocess<"ignore", "pipe", "pipe">;
let filesLog: LineReader;
let filesPort: number;
/** The tunnel's own address: a raw service that answers with the request line it was sent. */
let front: RawService;
let rig: Rig;
let host: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "burrow-paths-"));
  mkdirSync(join(dir, "api"));
  writeFileSync(join(dir, "api", "ok.txt"), OK);
  writeFileSync(join(dir, "internal-secret.txt"), SECRET);
  filesPort = freePort();
  files = Bun.spawn(["python3", "-u", "-m", "http.server", String(filesPort), "--bind", "127.0.0.1", "--directory", dir], { stdin: "ignore", stdout: "pipe", stderr: "pipe" });
  filesLog = new LineReader(files);
  await untilListening(filesPort, () => (files.exitCode !== null ? `http.server exited: ${filesLog.text()}` : undefined), "python3 -m http.server");
  front = new RawService((req, socket) => {
    const said = `front saw ${req.head.split("\r\n")[0]}`;
    socket.write(response(200, [["Content-Length", String(said.length)]], said));
  });
  rig = await withServer({ username: "paths", user: { skip_warning: true } });
  await rig.startAgent({ kind: "http", target: front.port, args: ["--subdomain", "paths", "--route", `/api=127.0.0.1:${filesPort}`] });
  host = `paths.localhost:${rig.server.edgePort}`;
}, 60_000);

afterAll(async () => {
  await rig?.close();
  front?.stop();
  if (files && files.exitCode === null) files.kill();
  await files?.exited;
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const get = (target: string, extra = "") => rawHttp(rig.server.edgePort, `GET ${target} HTTP/1.1\r\nHost: ${host}\r\n${extra}Connection: close\r\n\r\n`);
/** What the file server was asked for the secret (its log line for each request). */
const secretAsked = () => filesLog.lines.filter((l) => l.includes("secret"));
/** Runs `request`, then waits for the file server's log line of it (its request line as it got it). */
async function filesHeard(request: () => Promise<unknown>): Promise<string> {
  const mark = filesLog.lines.length;
  await request();
  await waitUntil(() => filesLog.lines.length > mark, 5_000, "the file server's log line");
  return filesLog.lines[mark]!;
}

describe("path traversal past a route", () => {
  test("the file server behind the route does resolve the traversals itself (what makes them dangerous)", async () => {
    for (const path of ["/api/../internal-secret.txt", "/api/%2e%2e/internal-secret.txt", "/api/..%2finternal-secret.txt"]) {
      const direct = await rawHttp(filesPort, `GET ${path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`);
      expect(direct.body).toBe(SECRET);
    }
    await filesLog.waitFor(/"GET \/api\/\.\.%2finternal-secret\.txt HTTP\/1\.1" 200/, 5_000);
    filesLog.lines.length = 0; // from here on it must hear of no secret
  });

  test("the route serves its own files", async () => {
    const reply = await get("/api/ok.txt");
    expect(reply.status).toBe(200);
    expect(reply.body).toBe(OK);
  });

  test("path traversal: /api/../internal-secret.txt is made normal before routing; the tunnel's own address gets GET /internal-secret.txt", async () => {
    const reply = await get("/api/../internal-secret.txt");
    expect(reply.body).toBe("front saw GET /internal-secret.txt HTTP/1.1");
    expect(secretAsked()).toEqual([]);
  });

  test.each([
    ["an encoded dot segment", "/api/%2e%2e/internal-secret.txt"],
    ["an encoded slash", "/api/..%2finternal-secret.txt"],
    ["half a dot segment encoded", "/api/.%2E/internal-secret.txt"],
    ["a dot segment with parameters", "/api/..;/internal-secret.txt"],
    ["an encoded backslash", "/api/..%5cinternal-secret.txt"],
    ["a backslash", "/api/..\\internal-secret.txt"],
    ["an encoded NUL", "/api/ok.txt%00.html"],
    ["a fragment the file server would cut the path at", "/api/..#/internal-secret.txt"],
  ])("path traversal: %s is refused with 400 by the edge, and nothing behind it hears of it", async (_, path) => {
    const before = front.requests.length;
    const reply = await get(path);
    expect(reply.status).toBe(400);
    expect(reply.body).toContain("The request path holds");
    expect(reply.body).not.toContain(SECRET);
    expect(front.requests.length).toBe(before);
    expect(secretAsked()).toEqual([]);
  });

  test("path traversal: escapes of unreserved characters and doubled slashes are made normal, and still take the route", async () => {
    const heard = await filesHeard(async () => expect((await get("/%61pi//./ok%2Etxt")).body).toBe(OK));
    expect(heard).toContain('"GET /api/ok.txt HTTP/1.1" 200');
  });

  test("path traversal on a kept-alive connection: the second request, on the kept stream, is made normal too", async () => {
    const both = await rawHttp(rig.server.edgePort, `GET /first HTTP/1.1\r\nHost: ${host}\r\n\r\nGET /api/../internal-secret.txt HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    expect(both.head).toStartWith("HTTP/1.1 200");
    expect(both.body).toContain("front saw GET /first HTTP/1.1");
    expect(both.body).toContain("front saw GET /internal-secret.txt HTTP/1.1");
    expect(both.body).not.toContain(SECRET);
    expect(secretAsked()).toEqual([]);
  });
});

describe("path traversal and absolute form", () => {
  test("GET http://host/api/ok.txt (absolute form) takes the route, and the file server is sent GET /api/ok.txt", async () => {
    const heard = await filesHeard(async () => {
      const reply = await get(`http://${host}/api/ok.txt`);
      expect(reply.status).toBe(200);
      expect(reply.body).toBe(OK);
    });
    expect(heard).toContain('"GET /api/ok.txt HTTP/1.1" 200');
  });

  test("an absolute-form traversal is made normal as an origin-form one is", async () => {
    expect((await get(`http://${host}/api/../internal-secret.txt`)).body).toBe("front saw GET /internal-secret.txt HTTP/1.1");
    expect((await get(`http://${host}/api/%2e%2e/internal-secret.txt`)).status).toBe(400);
    expect(secretAsked()).toEqual([]);
  });

  test("an absolute form of another scheme, or without a host, is a 400", async () => {
    for (const target of [`ftp://${host}/api/ok.txt`, "http:///api/ok.txt", `file://${host}/api/ok.txt`]) {
      expect((await get(target)).status).toBe(400);
    }
  });
});

describe("path traversal through a private tunnel's connector (heads no edge reads)", () => {
  test("the agent makes the path normal before its routes: GET /api/../internal-secret.txt reaches the tunnel's own address as /internal-secret.txt; encoded forms get 400", async () => {
    const bob = await rig.api.createToken(await rig.api.createUser("bob"));
    await rig.startAgent({ kind: "http", target: front.port, args: ["--private", "--name", "site", "--share", "bob", "--route", `/api=127.0.0.1:${filesPort}`] });
    await using connector = startConnector({ server: rig.server.edgeUrl, token: bob, target: "paths/site" });
    const port = await connector.port();
    const through = (target: string) => rawHttp(port, `GET ${target} HTTP/1.1\r\nHost: site\r\nConnection: close\r\n\r\n`);
    expect((await through("/api/ok.txt")).body).toBe(OK);
    expect((await through("/api/../internal-secret.txt")).body).toBe("front saw GET /internal-secret.txt HTTP/1.1");
    expect((await through("http://site/api/../internal-secret.txt")).body).toBe("front saw GET /internal-secret.txt HTTP/1.1");
    for (const path of ["/api/%2e%2e/internal-secret.txt", "/api/..%2finternal-secret.txt"]) {
      const reply = await through(path);
      expect(reply.status).toBe(400);
      expect(reply.body).not.toContain(SECRET);
    }
    expect(secretAsked()).toEqual([]);
  });
});
