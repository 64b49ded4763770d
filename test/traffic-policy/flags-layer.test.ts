/**
 * A tunnel's access flags run as its flags layer (src/edge/access/
 * flag-layer.ts): after the operator's layers, before the tunnel's own
 * policy file, in each phase. What the flags do to a request and a
 * response is what the file's rules see; their answers are theirs as
 * always (the same pages and codes: the flags' own tests in test/e2e/
 * access-*.test.ts and test/edge/access-rules.test.ts say so); and what
 * they always did where no policy rule reaches (a switch's answer, an
 * HTTP/1.0 visitor's chunked response, a field named X-Burrow-*) they still do.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { connect, createServer, type AddressInfo, type Server } from "node:net";
import { startAgent, type TestAgent } from "../harness/agent.ts";
import { withServer, type Rig } from "../harness/tunnel.ts";
import { curl } from "./curl.ts";
import { echo, policyFile, type Echoed } from "./rig.ts";

let rig: Rig;
let upstream: ReturnType<typeof Bun.serve>;
/** A service that answers every request with a chunked body, as written here. */
let chunked: Server;
const agents: TestAgent[] = [];
const files: Disposable[] = [];

beforeAll(async () => {
  rig = await withServer({ user: { skip_warning: true } });
  upstream = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(req, server) {
      const path = new URL(req.url).pathname;
      if (path === "/ws" && server.upgrade(req, { data: undefined })) return undefined;
      return echo(req);
    },
    websocket: { message() {} },
  });
  chunked = createServer((sock) => {
    let got = "";
    sock.on("data", (d: Buffer) => {
      got += d.toString("latin1");
      for (let end = got.indexOf("\r\n\r\n"); end >= 0; end = got.indexOf("\r\n\r\n")) {
        got = got.slice(end + 4);
        sock.write("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nfirst,\r\n6\r\nsecond\r\n0\r\n\r\n");
      }
    });
    sock.on("error", () => undefined);
  });
  await new Promise<void>((resolve) => chunked.listen(0, "127.0.0.1", resolve));
}, 30_000);
afterAll(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await rig?.close();
  upstream?.stop(true);
  chunked?.close();
  for (const f of files) f[Symbol.dispose]();
});

const tunnelUrl = (sub: string, path = "/") => `http://${sub}.localhost:${rig.server.edgePort}${path}`;

async function tunnel(sub: string, args: string[], policy?: string, target: number = upstream.port!): Promise<TestAgent> {
  const file = policy === undefined ? undefined : policyFile(policy);
  if (file) files.push(file);
  const a = await startAgent({ kind: "http", target, server: rig.server.edgeUrl, token: rig.token, args: ["--subdomain", sub, "--no-inspect", ...args, ...(file ? ["--policy-file", file.path] : [])] });
  agents.push(a);
  return a;
}

/** The head a raw request gets back (up to its blank line), the socket closed after it; bounded in time. */
function headOf(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    let got = "";
    const sock = connect(port, "127.0.0.1", () => sock.write(text));
    const timer = setTimeout(() => (sock.destroy(), reject(new Error(`no head within 10 s: ${got}`))), 10_000);
    sock.on("data", (d: Buffer) => {
      got += d.toString("latin1");
      const end = got.indexOf("\r\n\r\n");
      if (end < 0) return;
      clearTimeout(timer);
      sock.destroy();
      resolve(got.slice(0, end));
    });
    sock.on("error", (err) => (clearTimeout(timer), reject(err)));
  });
}

describe("the flags layer runs before the tunnel's policy file", () => {
  test("its rules see the request and the response as the header flags left them; the service is told only the file's rules that matched", async () => {
    await tunnel("flag-order", ["--request-header-add", "X-Team: blue", "--request-header-remove", "Cookie", "--response-header-add", "Cache-Control: no-store"], `
on_http_request:
  - name: sees the team
    expressions: ["req.headers['x-team'][0] == 'blue' && !('cookie' in req.headers)"]
    actions: [{ type: add-headers, config: { headers: { x-file-saw: team } } }]
on_http_response:
  - name: sees no-store
    expressions: ["res.headers['cache-control'][0] == 'no-store'"]
    actions: [{ type: add-headers, config: { headers: { x-file-saw-response: no-store } } }]
`);
    const r = await curl(tunnelUrl("flag-order", "/x"), ["-H", "Cookie: a=b", "-H", "X-Team: forged"]);
    expect(r.status).toBe(200);
    const seen = (JSON.parse(r.body) as Echoed).headers;
    expect(seen["x-team"]).toBe("blue");
    expect(seen.cookie).toBeUndefined();
    expect(seen["x-file-saw"]).toBe("team");
    expect(seen["x-burrow-policy-rules"]).toBe("sees the team");
    expect(r.headers["cache-control"]).toBe("no-store");
    expect(r.headers["x-file-saw-response"]).toBe("no-store");
  });

  test("the IP flags and basic auth answer first, with their pages, before a file rule that answers everything", async () => {
    const everything = "on_http_request:\n  - name: teapot\n    actions: [{ type: custom-response, config: { status_code: 418, body: file } }]\n";
    await tunnel("flag-first", ["--basic-auth", "erin:pw-1"], everything);
    await tunnel("flag-walled", ["--allow-cidr", "10.0.0.0/8"], everything);
    const none = await curl(tunnelUrl("flag-first"));
    expect(none.status).toBe(401);
    expect(none.headers["www-authenticate"]).toContain('Basic realm="flag-first"');
    expect(none.body).toContain("Sign-in required");
    expect((await curl(tunnelUrl("flag-first"), ["-u", "erin:pw-1"])).status).toBe(418);
    const walled = await curl(tunnelUrl("flag-walled"));
    expect(walled.status).toBe(403);
    expect(walled.body).toContain("Not from this address");
  });

  test("an operator's rule runs before the tunnel's flags", async () => {
    await tunnel("flag-op", ["--basic-auth", "erin:pw-1"]);
    const made = await rig.api.post("/api/policies", {
      name: "before-flags",
      scope: "hostname",
      hostname: "flag-op.localhost",
      policy: "on_http_request:\n  - name: operator's\n    expressions: [\"req.url.path == '/op'\"]\n    actions: [{ type: custom-response, config: { status_code: 299, body: operator } }]\n",
    });
    expect(made.status).toBe(201);
    try {
      // a change reaches live tunnels within 5 s (operator.test.ts): this waits for it, bounded
      let status = 0;
      for (let i = 0; i < 60 && status !== 299; i++) {
        status = (await curl(tunnelUrl("flag-op", "/op"))).status;
        if (status !== 299) await Bun.sleep(100);
      }
      expect(status).toBe(299);
      expect((await curl(tunnelUrl("flag-op", "/other"))).status).toBe(401);
    } finally {
      await rig.api.delete(`/api/policies/${made.body.id}`);
    }
  });
});

describe("what the header flags always did, they still do", () => {
  test("a field named X-Burrow-* that a flag sets reaches the service (a visitor's own is taken off)", async () => {
    await tunnel("flag-burrow", ["--request-header-add", "X-Burrow-Team: blue"]);
    const r = await curl(tunnelUrl("flag-burrow"), ["-H", "X-Burrow-Forged: yes"]);
    const seen = (JSON.parse(r.body) as Echoed).headers;
    expect(seen["x-burrow-team"]).toBe("blue");
    expect(seen["x-burrow-forged"]).toBeUndefined();
  });

  test("an HTTP/1.0 visitor gets a chunked response's data without its framing, with the flags' fields, the connection closed after it", async () => {
    await tunnel("flag-old", ["--response-header-add", "Cache-Control: no-store"], undefined, (chunked.address() as AddressInfo).port);
    const r = await curl(tunnelUrl("flag-old", "/chunked"), ["--http1.0"]);
    expect(r.status).toBe(200);
    expect(r.body).toBe("first,second");
    expect(r.headers["transfer-encoding"]).toBeUndefined();
    expect(r.headers.connection).toBe("close");
    expect(r.headers["cache-control"]).toBe("no-store");
  });

  test("a switch's answer (101) carries the response header flags' fields", async () => {
    await tunnel("flag-ws", ["--response-header-add", "Cache-Control: no-store"]);
    const head = await headOf(
      rig.server.edgePort,
      `GET /ws HTTP/1.1\r\nHost: flag-ws.localhost:${rig.server.edgePort}\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
    expect(head).toStartWith("HTTP/1.1 101");
    expect(head.toLowerCase()).toContain("cache-control: no-store");
  });
});
