/**
 * Path traversal and absolute form at the agent: heads an older server
 * sends as the visitor wrote them (and a private tunnel's connector's, which
 * no edge reads) are made normal by the agent before its path routes match,
 * and the service is sent the path that was matched, in origin form, with
 * an absolute form's authority as Host. The edge of this version sends
 * heads already normal; this is the second line.
 */
import { describe, expect, test } from "bun:test";
import { parsePrefix, routeFor } from "../../src/agent/routes.ts";
import { cleanedUp, fetchThrough, requestHead, response, until, type TestTunnel } from "./raw-service.ts";

const { service, tunnel } = cleanedUp();

const ok = (body: string) => response(200, [["Content-Length", String(body.length)]], body);

/** A tunnel to `front` with `/api` routed to `api`: both raw services that answer with their name and the path they got. */
function routed(hostHeader?: string) {
  const front = service((req, socket) => void socket.write(ok(`front ${req.path}`)));
  const api = service((req, socket) => void socket.write(ok(`api ${req.path}`)));
  const t = tunnel(front.port, { target: { routes: [{ prefix: "/api", target: { host: "127.0.0.1", port: api.port } }], ...(hostHeader ? { hostHeader } : {}) } });
  return { front, api, t };
}

describe("path traversal: the agent matches routes on the normal path and sends that path", () => {
  test("/api/../secret is /secret: the tunnel's own service gets it, as GET /secret; the /api service never sees it", async () => {
    const { front, api, t } = routed();
    const res = await fetchThrough(t, { head: requestHead("GET", "/api/../secret?x=/../y", [["Host", "web.example"]]) });
    expect(res.text).toEndWith("front /secret?x=/../y");
    expect(front.requests[0]!.head.split("\r\n")[0]).toBe("GET /secret?x=/../y HTTP/1.1");
    expect(api.requests).toHaveLength(0);
    expect(t.logs[0]?.path).toBe("/secret?x=/../y");
  });

  test("/%61pi//v1/./x takes the /api route, sent as /api/v1/x", async () => {
    const { front, api, t } = routed();
    const res = await fetchThrough(t, { head: requestHead("GET", "/%61pi//v1/./x", [["Host", "web.example"]]) });
    expect(res.text).toEndWith("api /api/v1/x");
    expect(front.requests).toHaveLength(0);
  });

  test("%2e%2e and ..%2f are refused: the stream is reset with why, and no service is sent anything", async () => {
    const { front, api, t } = routed();
    for (const path of ["/api/%2e%2e/secret", "/api/..%2fsecret", "/api/..\\secret"]) {
      const res = await fetchThrough(t, { head: requestHead("GET", path, [["Host", "web.example"]]) });
      expect(res.reset).toContain("cannot be read");
    }
    expect(front.accepted + api.accepted).toBe(0);
  });

  test("a kept stream's later heads, read from its bytes, are made normal too", async () => {
    const { front, api, t } = routed();
    const stream = t.pair.edge.open({ tunnel: "t1", kind: "h1", remote: "127.0.0.1:50000", head: requestHead("GET", "/api/ok", [["Host", "web.example"]]), keep: true }, false);
    let text = "";
    stream.onData = (chunk) => {
      text += Buffer.from(chunk).toString("latin1");
      stream.consumed(chunk.byteLength);
    };
    await until(() => text.endsWith("api /api/ok"), "the first answer");
    stream.write(Buffer.from(requestHead("GET", "/api/./../secret", [["Host", "web.example"]]), "latin1"));
    await until(() => text.endsWith("front /secret"), "the second answer");
    expect(api.requests.map((r) => r.path)).toEqual(["/api/ok"]);
    expect(front.requests.map((r) => r.path)).toEqual(["/secret"]);
    stream.end();
  });
});

describe("absolute form at the agent: origin form, the target's authority as Host", () => {
  async function absolute(t: TestTunnel, fields: [string, string][]) {
    return fetchThrough(t, { head: requestHead("GET", "http://web.example:8080/api/x?q", fields) });
  }

  test("GET http://web.example:8080/api/x with Host: evil.example takes the route and is sent as GET /api/x with Host: web.example:8080", async () => {
    const { api, t } = routed();
    expect((await absolute(t, [["Host", "evil.example"], ["Accept", "*/*"]])).text).toEndWith("api /api/x?q");
    expect(api.requests[0]!.head).toBe("GET /api/x?q HTTP/1.1\r\nHost: web.example:8080\r\nAccept: */*\r\n\r\n");
  });

  test("without a Host field it gets one; a --host-header rule still has the last word", async () => {
    const plain = routed();
    await absolute(plain.t, [["Accept", "*/*"]]);
    expect(plain.api.requests[0]!.head).toBe("GET /api/x?q HTTP/1.1\r\nAccept: */*\r\nHost: web.example:8080\r\n\r\n");
    const ruled = routed("inside.test");
    await absolute(ruled.t, [["Host", "evil.example"]]);
    expect(ruled.api.requests[0]!.head).toBe("GET /api/x?q HTTP/1.1\r\nHost: inside.test\r\n\r\n");
  });
});

describe("route prefixes", () => {
  test("are made normal as paths are, and one that no normal path can match is a usage error", () => {
    expect(parsePrefix("/%61pi//v1/")).toBe("/api/v1");
    expect(parsePrefix("/a/./b/../c")).toBe("/a/c");
    expect(() => parsePrefix("/a%2fb")).toThrow(/can match no request: it holds an encoded slash/);
    expect(() => parsePrefix("/a/%2e%2e/b")).toThrow(/dot segment in disguise/);
    expect(() => parsePrefix("/a/..")).toThrow(/a route for \//);
  });

  test("match whole segments of the path they are given", () => {
    const routes = [{ prefix: "/api", target: { host: "127.0.0.1", port: 1 } }];
    expect(routeFor(routes, "/api/x")?.prefix).toBe("/api");
    expect(routeFor(routes, "/apis")).toBeUndefined();
    expect(routeFor(routes, "/api?x")?.prefix).toBe("/api");
  });
});
