/**
 * The inspector's JSON API against the real thing: a server, `burrow http`
 * with its inspector on an ephemeral loopback port, and a local service
 * that records what reaches it. What a script sees, and what it cannot do.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { selfSignedCertificate } from "../harness/certs.ts";
import { within, waitUntil } from "../harness/wait.ts";
import { BINARY, PNG, startInspectedAgent, startRig, startUpstream, STREAM_CHUNK, STREAM_CHUNKS, type InspectedAgent, type Rig, type Upstream } from "./rig.ts";

const MiB = 1024 * 1024;
let rig: Rig;
let up: Upstream;
let a: InspectedAgent;

beforeAll(async () => {
  rig = await startRig();
  up = startUpstream();
  a = await startInspectedAgent(rig, up.port);
});
afterAll(async () => {
  await a?.[Symbol.asyncDispose]();
  up?.[Symbol.dispose]();
  await rig?.[Symbol.asyncDispose]();
});

const getJson = async (path: string, init?: RequestInit) => {
  const res = await a.api(path, init);
  return { status: res.status, headers: res.headers, body: (await res.json()) as any };
};
const b64 = (s: string) => Buffer.from(s, "base64");
const header = (list: [string, string][], name: string) => list.find(([n]) => n.toLowerCase() === name)?.[1];

/** The newest capture with this path, once it is over. */
async function captured(path: string): Promise<any> {
  let found: any;
  await waitUntil(
    async () => {
      const { body } = await getJson("/api/requests");
      found = body.requests.find((r: any) => r.path === path && r.state !== "pending");
      return found !== undefined;
    },
    5_000,
    `a finished capture of ${path}`,
  );
  return (await getJson(`/api/requests/${found.id}`)).body;
}

describe("capture", () => {
  test("a request through the tunnel appears with its heads and both bodies", async () => {
    const res = await a.visit("/json?x=1", { method: "POST", body: JSON.stringify({ sent: true }), headers: { "content-type": "application/json", authorization: "Bearer s3cret-token" } });
    expect(res.status).toBe(200);
    await res.text();
    const d = await captured("/json?x=1");
    expect(d).toMatchObject({ tunnel: "http", kind: "http", method: "POST", path: "/json?x=1", status: 200, state: "done", replay_of: null, error: null });
    expect(d.duration_ms).toBeGreaterThanOrEqual(0);
    expect(new Date(d.started_at).getTime()).toBeGreaterThan(Date.now() - 60_000);
    expect(header(d.request.headers, "authorization")).toBe("Bearer s3cret-token");
    expect(JSON.parse(b64(d.request.body.base64).toString())).toEqual({ sent: true });
    expect(d.request.body).toMatchObject({ size: 13, captured: 13, truncated: false, content_type: "application/json" });
    expect(header(d.response.headers, "set-cookie")).toBe("session=secret-cookie");
    expect(JSON.parse(b64(d.response.body.base64).toString())).toEqual({ hello: "world", list: [1, 2, 3] });
    expect(d.request_size).toBe(13);
    expect(d.response_size).toBe(d.response.body.size);
  });

  test("binary, image and gzip bodies: raw bytes kept, gzip also decoded", async () => {
    for (const p of ["/binary", "/image", "/gzip"]) await (await a.visit(p)).arrayBuffer();
    expect(new Uint8Array(b64((await captured("/binary")).response.body.base64))).toEqual(BINARY);
    expect(b64((await captured("/image")).response.body.base64)).toEqual(PNG);
    const gz = (await captured("/gzip")).response.body;
    expect(gz.content_encoding).toBe("gzip");
    expect(b64(gz.base64).subarray(0, 2)).toEqual(Buffer.from([0x1f, 0x8b])); // the raw bytes, as sent
    expect(gz.decoded).toMatchObject({ encoding: "gzip", size: 1600 });
    expect(b64(gz.decoded.base64).toString()).toBe("a gzipped hello ".repeat(100));
  });

  test("bodies are kept up to 1 MiB each and marked truncated beyond; the service still gets all of it", async () => {
    const big = new Uint8Array(1.5 * MiB).fill(0x7a);
    const res = await a.visit("/echo", { method: "PUT", body: big, headers: { "content-type": "application/octet-stream" } });
    expect((await res.arrayBuffer()).byteLength).toBe(big.byteLength);
    expect(up.seen.at(-1)!.body.byteLength).toBe(big.byteLength);
    const d = await captured("/echo");
    expect(d.request.body).toMatchObject({ size: big.byteLength, captured: MiB, truncated: true });
    expect(b64(d.request.body.base64).byteLength).toBe(MiB);
    expect(d.response.body).toMatchObject({ size: big.byteLength, captured: MiB, truncated: true });
  });

  test("a long streamed response still streams through the tunnel, and is captured truncated", async () => {
    const res = await a.visit("/stream");
    const reader = res.body!.getReader();
    const first = await within(reader.read(), 5_000, "the first streamed bytes");
    expect(first.done).toBe(false);
    // the visitor has bytes while the service is still early in its stream: nothing waited for the whole
    expect(up.streamed()).toBeLessThan(STREAM_CHUNKS / 2);
    const live = (await getJson("/api/requests?limit=1")).body.requests[0];
    expect(live).toMatchObject({ path: "/stream", state: "pending", status: 200 });
    let total = first.value!.byteLength;
    for (;;) {
      const next = await within(reader.read(), 5_000, "more streamed bytes");
      if (next.done) break;
      total += next.value.byteLength;
    }
    expect(total).toBe(STREAM_CHUNK * STREAM_CHUNKS);
    const d = await captured("/stream");
    expect(d.response.body).toMatchObject({ size: total, captured: MiB, truncated: true });
  });

  test("a WebSocket appears with its message counts and last messages", async () => {
    const ws = new WebSocket(`ws://127.0.0.1:${rig.server.edgePort}/ws`, { headers: { host: `${a.subdomain}.localhost:${rig.server.edgePort}` } } as any);
    const got: string[] = [];
    ws.onmessage = (ev) => got.push(String(ev.data));
    await within(new Promise((r) => (ws.onopen = r)), 5_000, "the WebSocket to open");
    ws.send("one");
    ws.send("two");
    await waitUntil(() => got.length >= 3, 5_000, "the echoes");
    ws.close();
    const d = await captured("/ws");
    expect(d).toMatchObject({ kind: "websocket", status: 101, state: "done" });
    expect(d.websocket).toMatchObject({ messages_from_visitor: 2, messages_from_service: 3 });
    // each direction in its order (the two directions interleave as they happen to)
    const from = (who: string) => d.websocket.last_messages.filter((m: any) => m.from === who).map((m: any) => m.text);
    expect(from("visitor")).toEqual(["one", "two"]);
    expect(from("service")).toEqual(["hello from the service", "echo: one", "echo: two"]);
  });

  test("an https local service (fetch's path): captured both ways, and replayed to it", async () => {
    const cert = await selfSignedCertificate({ names: ["localhost"], ips: ["127.0.0.1"] });
    const seen: string[] = [];
    const tls = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: { cert: cert.certPem, key: cert.keyPem },
      fetch: async (req) => {
        seen.push(`${req.method} ${new URL(req.url).pathname} ${await req.text()}`);
        return new Response(new Uint8Array(70_000).fill(0x41), { headers: { "content-type": "text/plain" } }); // past one DATA frame: streamed
      },
    });
    try {
      await using b = await startInspectedAgent(rig, `https://127.0.0.1:${tls.port}`);
      expect((await (await b.visit("/secure", { method: "POST", body: "over tls" })).arrayBuffer()).byteLength).toBe(70_000);
      await waitUntil(async () => ((await (await b.api("/api/requests")).json()) as any).requests[0]?.state === "done", 5_000, "the capture");
      const [c] = ((await (await b.api("/api/requests")).json()) as any).requests;
      const d = (await (await b.api(`/api/requests/${c.id}`)).json()) as any;
      expect(b64(d.request.body.base64).toString()).toBe("over tls");
      expect(d.response.body).toMatchObject({ size: 70_000, captured: 70_000, truncated: false });
      const replayed = await b.api(`/api/requests/${c.id}/replay`, { method: "POST" });
      expect(replayed.status).toBe(201);
      expect(((await replayed.json()) as any).status).toBe(200);
      expect(seen).toEqual(["POST /secure over tls", "POST /secure over tls"]);
    } finally {
      tls.stop(true);
    }
  });

  test("a local service that is down is captured as failed, with why", async () => {
    // a tunnel to a port nothing listens on: its own agent, same server
    const dead = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response("") });
    const port = dead.port!;
    dead.stop(true);
    await using b = await startInspectedAgent(rig, port);
    expect((await b.visit("/down")).status).toBe(502);
    await waitUntil(async () => ((await (await b.api("/api/requests")).json()) as any).requests.length === 1, 5_000, "the failed capture");
    const [r] = ((await (await b.api("/api/requests")).json()) as any).requests;
    expect(r).toMatchObject({ path: "/down", state: "failed", status: null });
    expect(r.error).toContain("refused");
  });
});

describe("list", () => {
  test("limit and tunnel filter the list, newest first", async () => {
    for (const p of ["/l1", "/l2", "/l3"]) await (await a.visit(p)).text();
    await captured("/l3");
    const two = (await getJson("/api/requests?limit=2")).body.requests;
    expect(two.map((r: any) => r.path)).toEqual(["/l3", "/l2"]);
    expect((await getJson("/api/requests?tunnel=http&limit=1")).body.requests.map((r: any) => r.path)).toEqual(["/l3"]);
    expect((await getJson("/api/requests?tunnel=nope")).body.requests).toEqual([]);
    const tunnels = (await getJson("/api/tunnels")).body.tunnels;
    expect(tunnels).toEqual([
      {
        name: "http",
        protocol: "http",
        public_url: `http://${a.subdomain}.localhost:${rig.server.edgePort}`,
        local: `127.0.0.1:${up.port}`,
        host_header: null,
        inspect: true,
        // the agent API's (ngrok's) fields beside them
        uri: "/api/tunnels/http",
        proto: "http",
        config: { addr: `http://127.0.0.1:${up.port}`, inspect: true },
        source: "local",
      },
    ]);
  });

  test("--inspect-keep N keeps the last N", async () => {
    await using b = await startInspectedAgent(rig, up.port, ["--inspect-keep", "3"]);
    for (let i = 0; i < 6; i++) await (await b.visit(`/k${i}`)).text();
    await waitUntil(async () => ((await (await b.api("/api/requests")).json()) as any).requests[0]?.path === "/k5", 5_000, "the last request");
    const list = ((await (await b.api("/api/requests")).json()) as any).requests;
    expect(list.map((r: any) => r.path)).toEqual(["/k5", "/k4", "/k3"]);
    expect((await b.api(`/api/requests/${list[2].id - 1}`)).status).toBe(404);
  });

  test("--inspect-memory 1: bodies past 1 MiB in all push the oldest requests out before --inspect-keep does", async () => {
    await using b = await startInspectedAgent(rig, up.port, ["--inspect-keep", "100", "--inspect-memory", "1"]);
    const body = new Uint8Array(400 * 1024).fill(0x62);
    for (let i = 0; i < 6; i++) await (await b.visit(`/m${i}`, { method: "POST", body })).text();
    await waitUntil(async () => ((await (await b.api("/api/requests")).json()) as any).requests[0]?.path === "/m5", 5_000, "the last request");
    const list = ((await (await b.api("/api/requests")).json()) as any).requests;
    // 400 KiB each: two fit in 1 MiB, a third would not
    expect(list.map((r: any) => r.path)).toEqual(["/m5", "/m4"]);
  });

  test("the live stream delivers a new request", async () => {
    const controller = new AbortController();
    const res = await a.api("/api/requests/stream", { signal: controller.signal });
    expect(res.headers.get("content-type")).toStartWith("text/event-stream");
    const reader = res.body!.getReader();
    let text = "";
    try {
      await (await a.visit("/via-sse")).text();
      await within(
        (async () => {
          while (!/event: (request|update)\ndata: .*"path":"\/via-sse"/.test(text)) {
            const { value, done } = await reader.read();
            if (done) throw new Error(`the stream ended: ${text}`);
            text += new TextDecoder().decode(value);
          }
        })(),
        5_000,
        "the request on the live stream",
      );
      const line = /data: (\{.*"path":"\/via-sse".*\})/.exec(text)![1]!;
      expect(JSON.parse(line)).toMatchObject({ method: "GET", path: "/via-sse", tunnel: "http" });
    } finally {
      controller.abort();
    }
  });
});

describe("replay", () => {
  test("exactly: the service gets the same request again, and the new capture names its original", async () => {
    await (await a.visit("/echo?r=1", { method: "POST", body: "replay me", headers: { "content-type": "text/plain", "x-kept": "yes" } })).text();
    const original = await captured("/echo?r=1");
    const before = up.seen.length;
    const res = await getJson(`/api/requests/${original.id}/replay`, { method: "POST" });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ replay_of: original.id, method: "POST", path: "/echo?r=1", status: 201, remote: "replay" });
    expect(up.seen.length).toBe(before + 1);
    const again = up.seen.at(-1)!;
    expect(again).toMatchObject({ method: "POST", path: "/echo?r=1" });
    expect(new TextDecoder().decode(again.body)).toBe("replay me");
    expect(again.headers["x-kept"]).toBe("yes");
    expect(again.headers.host).toBe(`${a.subdomain}.localhost:${rig.server.edgePort}`); // the visitor's Host: this tunnel has no host_header rule
    const copy = (await getJson(`/api/requests/${res.body.id}`)).body;
    expect(b64(copy.response.body.base64).toString()).toBe("replay me");
  });

  test("edited: method, path, a header and the body as given, and the Host rule of the tunnel", async () => {
    await using b = await startInspectedAgent(rig, up.port, ["--host-header", "rewrite"]);
    await (await b.visit("/echo?e=1", { method: "POST", body: "original" })).text();
    await waitUntil(async () => ((await (await b.api("/api/requests")).json()) as any).requests[0]?.state === "done", 5_000, "the capture");
    const [original] = ((await (await b.api("/api/requests")).json()) as any).requests;
    const edits = { method: "PUT", path: "/echo?e=2", headers: { "x-edited": "by test", "user-agent": null }, body: Buffer.from("edited body").toString("base64") };
    const res = await b.api(`/api/requests/${original.id}/replay`, { method: "POST", body: JSON.stringify(edits), headers: { "content-type": "application/json" } });
    expect(res.status).toBe(201);
    const made = (await res.json()) as any;
    expect(made).toMatchObject({ replay_of: original.id, method: "PUT", path: "/echo?e=2" });
    const seen = up.seen.at(-1)!;
    expect(seen).toMatchObject({ method: "PUT", path: "/echo?e=2" });
    expect(seen.headers["x-edited"]).toBe("by test");
    expect(seen.headers["user-agent"]).toBeUndefined();
    expect(seen.headers.host).toBe(`127.0.0.1:${up.port}`); // --host-header rewrite
    expect(new TextDecoder().decode(seen.body)).toBe("edited body");
  });

  test("a replayed response longer than the cap is read as far as its capture goes, then left", async () => {
    await (await a.visit("/stream?replay=1")).arrayBuffer();
    const original = await captured("/stream?replay=1");
    const res = await getJson(`/api/requests/${original.id}/replay`, { method: "POST" });
    expect(res.status).toBe(201);
    await waitUntil(async () => (await getJson(`/api/requests/${res.body.id}`)).body.state !== "pending", 10_000, "the replay's end");
    const d = (await getJson(`/api/requests/${res.body.id}`)).body;
    expect(d).toMatchObject({ state: "done", replay_of: original.id, status: 200 });
    expect(d.response.body).toMatchObject({ captured: MiB, truncated: true });
  });

  test("a truncated body is not replayed as if whole; a WebSocket is not replayed", async () => {
    await (await a.visit("/echo?t=1", { method: "POST", body: new Uint8Array(MiB + 10) })).arrayBuffer();
    const big = await captured("/echo?t=1");
    const refused = await getJson(`/api/requests/${big.id}/replay`, { method: "POST" });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual({ error: expect.stringContaining("1048576"), code: "NOT_REPLAYABLE" });
    const ok = await getJson(`/api/requests/${big.id}/replay`, { method: "POST", body: JSON.stringify({ body: "" }) });
    expect(ok.status).toBe(201);
  });
});

describe("clear", () => {
  test("DELETE /api/requests forgets every capture", async () => {
    await (await a.visit("/before-clear")).text();
    await captured("/before-clear");
    const res = await a.api("/api/requests", { method: "DELETE" });
    expect(res.status).toBe(204);
    expect((await getJson("/api/requests")).body.requests).toEqual([]);
    await (await a.visit("/after-clear")).text();
    expect((await captured("/after-clear")).path).toBe("/after-clear");
  });
});

describe("bad input gets a clear 4xx in the admin API's error shape, never a 500", () => {
  const cases: [string, string, RequestInit | undefined, number, string][] = [
    ["unknown id", "/api/requests/999999", undefined, 404, "NOT_FOUND"],
    ["id that is not a number", "/api/requests/abc", undefined, 400, "BAD_REQUEST"],
    ["limit 0", "/api/requests?limit=0", undefined, 400, "BAD_REQUEST"],
    ["limit not a number", "/api/requests?limit=ten", undefined, 400, "BAD_REQUEST"],
    ["replay of an unknown id", "/api/requests/999999/replay", { method: "POST" }, 404, "NOT_FOUND"],
    ["a method the path does not take", "/api/tunnels", { method: "DELETE" }, 405, "METHOD_NOT_ALLOWED"],
    ["an unknown endpoint", "/api/nope", undefined, 404, "NOT_FOUND"],
  ];
  for (const [what, path, init, status, code] of cases) {
    test(what, async () => {
      const res = await getJson(path, init);
      expect({ status: res.status, body: res.body }).toEqual({ status, body: { error: expect.any(String), code } });
    });
  }

  test("replay edits: bad JSON, wrong types, bad header names, bad base64", async () => {
    await (await a.visit("/for-bad-edits")).text();
    const { id } = await captured("/for-bad-edits");
    const bodies = ["{not json", "[1,2]", '{"method": 5}', '{"path": "no-slash"}', '{"headers": {"bad name": "x"}}', '{"headers": {"x": "a\\r\\nb: c"}}', '{"body": "%%%"}', '{"unknown": 1}'];
    for (const body of bodies) {
      const res = await getJson(`/api/requests/${id}/replay`, { method: "POST", body, headers: { "content-type": "application/json" } });
      expect({ body, status: res.status, code: res.body.code }).toEqual({ body, status: 400, code: "BAD_REQUEST" });
      expect(res.body.error.length).toBeGreaterThan(5);
    }
    expect((await a.api("/")).status).toBe(200); // still up
  });

  test("replay edits: an unknown key or a wrong type is named in plain words", async () => {
    await (await a.visit("/for-edit-words")).text();
    const { id } = await captured("/for-edit-words");
    const said = async (body: string) =>
      (await getJson(`/api/requests/${id}/replay`, { method: "POST", body, headers: { "content-type": "application/json" } })).body.error;
    expect(await said('{"methd": "PUT"}')).toBe("methd: unknown key (allowed: method, path, headers, body)");
    expect(await said('{"method": 5}')).toBe("method: must be a string");
    expect(await said('{"path": ["/a"]}')).toBe("path: must be a string");
    expect(await said('{"body": 5}')).toBe("body: must be a string (base64)");
  });
});

describe("what keeps its secrets in", () => {
  const port = () => new URL(a.inspector).port;

  test("a Host other than the inspector's own is refused (DNS rebinding), on the API and the page", async () => {
    for (const path of ["/api/requests", "/api/tunnels", "/"]) {
      for (const host of ["evil.example", `evil.example:${port()}`, "127.0.0.1:1", `localhost.evil.example:${port()}`]) {
        const res = await fetch(a.inspector + path, { headers: { host } });
        expect({ path, host, status: res.status }).toEqual({ path, host, status: 403 });
        expect(((await res.json()) as any).code).toBe("HOST_REFUSED");
      }
    }
    for (const host of [`127.0.0.1:${port()}`, `localhost:${port()}`, `[::1]:${port()}`, `LOCALHOST:${port()}`]) {
      const res = await fetch(a.inspector + "/api/tunnels", { headers: { host } });
      expect({ host, status: res.status }).toEqual({ host, status: 200 });
    }
  });

  test("a cross-site write (replay, clear) is refused; the same from the inspector's own page or a script is not", async () => {
    await (await a.visit("/csrf")).text();
    const { id } = await captured("/csrf");
    const before = up.seen.length;
    const attempts: Record<string, string>[] = [
      { origin: "http://evil.example", "sec-fetch-site": "cross-site" },
      { origin: "http://evil.example" },
      { "sec-fetch-site": "cross-site" },
      { "sec-fetch-site": "same-site", origin: "http://localhost:3000" },
      { origin: "null" },
    ];
    for (const headers of attempts) {
      for (const [method, path] of [["POST", `/api/requests/${id}/replay`], ["DELETE", "/api/requests"]] as const) {
        const res = await a.api(path, { method, headers });
        expect({ headers, method, status: res.status }).toEqual({ headers, method, status: 403 });
        expect(((await res.json()) as any).code).toBe("CROSS_SITE");
      }
    }
    expect(up.seen.length).toBe(before);
    expect((await getJson("/api/requests")).body.requests.length).toBeGreaterThan(0);
    const own = await a.api(`/api/requests/${id}/replay`, { method: "POST", headers: { origin: a.inspector, "sec-fetch-site": "same-origin" } });
    expect(own.status).toBe(201);
  });

  test("pages and API answers carry the CSP, no framing and no sniffing", async () => {
    for (const path of ["/", "/api/requests"]) {
      const res = await a.api(path);
      expect(res.headers.get("content-security-policy")).toContain("default-src 'self'");
      expect(res.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
      expect(res.headers.get("x-frame-options")).toBe("DENY");
      expect(res.headers.get("x-content-type-options")).toBe("nosniff");
    }
  });

  test("the agent's output never shows a captured secret", () => {
    const printed = a.agent.output.text();
    for (const secret of ["s3cret-token", "secret-cookie", "edited body"]) expect(printed).not.toContain(secret);
  });
});
