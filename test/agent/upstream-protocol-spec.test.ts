/**
 * The tunnel option that makes the agent speak HTTP/2 to its service
 * (`--upstream-protocol`, `upstream_protocol`, `upstreamProtocol`): one
 * field of the tunnel spec, its rules written once and said by the three
 * front-ends in their own names: http tunnels only, h2c to plain services
 * and h2 to https:// ones (the routes' services too), a local service and
 * not a handler; and what the agent then runs: every service of the tunnel
 * reached over HTTP/2.
 */
import { describe, expect, test } from "bun:test";
import { parseTunnelsFile as parseFile } from "../../src/agent/settings/tunnels-file.ts";
import { parseTarget } from "../../src/agent/settings/tunnel-options.ts";
import { tunnelFromFlags } from "../../src/cli/tunnel-flags.ts";
import { forward } from "../../sdk/src/index.ts";

const FILE = "/home/dev/burrow.yml";
const flagsSay = (kind: "http" | "tcp", target: string, values: Record<string, unknown>) => {
  try {
    tunnelFromFlags(kind, values, parseTarget(target, true));
    return "accepted";
  } catch (err) {
    return (err as Error).message;
  }
};
const fileSays = (yaml: string) => {
  try {
    parseFile(yaml, FILE);
    return "accepted";
  } catch (err) {
    return (err as Error).message;
  }
};
const optionsSay = (options: Record<string, unknown>) =>
  forward({ server: "http://127.0.0.1:1", token: "x", ...options }).then(
    () => "accepted",
    (err: Error) => err.message,
  );

describe("the rules, said by each front-end", () => {
  test("its values: http1, h2c, h2", async () => {
    expect(flagsSay("http", "3000", { "upstream-protocol": "h3" })).toBe("--upstream-protocol must be http1, h2c or h2 (got 'h3')");
    expect(fileSays("tunnels:\n  a: {proto: http, addr: 3000, upstream_protocol: grpc}\n")).toBe(`${FILE}:2: tunnels.a.upstream_protocol: must be http1, h2c or h2 (got 'grpc')`);
    expect(await optionsSay({ port: 3000, upstreamProtocol: "http2" })).toBe("upstreamProtocol: must be http1, h2c or h2 (got 'http2')");
  });

  test("http tunnels only", async () => {
    expect(fileSays("tunnels:\n  a: {proto: tcp, addr: 22, upstream_protocol: h2c}\n")).toBe(`${FILE}:2: tunnels.a.upstream_protocol: is for http tunnels; this one is tcp`);
    expect(await optionsSay({ protocol: "tcp", port: 22, upstreamProtocol: "h2c" })).toBe("upstreamProtocol: is for http tunnels; this one is tcp");
  });

  test("h2c is without TLS, h2 with it, for the tunnel's service and its routes' alike", async () => {
    expect(flagsSay("http", "https://localhost:8443", { "upstream-protocol": "h2c" })).toBe("--upstream-protocol: h2c is HTTP/2 without TLS: for a service given as https://, use h2");
    expect(flagsSay("http", "8080", { "upstream-protocol": "h2" })).toBe("--upstream-protocol: h2 is HTTP/2 over TLS: give the service as https://HOST:PORT (routes too), or use h2c");
    expect(flagsSay("http", "https://localhost:8443", { "upstream-protocol": "h2", route: ["/api=9000"] })).toBe(
      "--upstream-protocol: h2 is HTTP/2 over TLS: give the service as https://HOST:PORT (routes too), or use h2c",
    );
    expect(fileSays("tunnels:\n  a:\n    proto: http\n    addr: 50051\n    routes: { /web: 'https://localhost:8443' }\n    upstream_protocol: h2c\n")).toBe(
      `${FILE}:6: tunnels.a.upstream_protocol: h2c is HTTP/2 without TLS: for a service given as https://, use h2`,
    );
    expect(await optionsSay({ addr: "https://localhost:8443", upstreamProtocol: "h2c" })).toBe("upstreamProtocol: h2c is HTTP/2 without TLS: for a service given as https://, use h2");
    // http1 is the default, said or not, with any service
    expect(flagsSay("http", "https://localhost:8443", { "upstream-protocol": "http1" })).toBe("accepted");
  });

  test("a pool member's health check by path is an HTTP/1.1 GET: with HTTP/2 to the service, it checks with a connect", () => {
    expect(flagsSay("http", "50051", { "upstream-protocol": "h2c", pool: true, "health-check": "/healthz" })).toBe(
      "--health-check: a path is checked with an HTTP/1.1 GET: with --upstream-protocol h2c, check with tcp",
    );
    expect(fileSays("tunnels:\n  a: {proto: http, addr: 50051, pool: true, health_check: /healthz, upstream_protocol: h2c}\n")).toBe(
      `${FILE}:2: tunnels.a.health_check: a path is checked with an HTTP/1.1 GET: with upstream_protocol h2c, check with tcp`,
    );
    expect(flagsSay("http", "50051", { "upstream-protocol": "h2c", pool: true, "health-check": "tcp" })).toBe("accepted");
  });

  test("a local service, not a handler", async () => {
    expect(await optionsSay({ handler: () => new Response("hi"), upstreamProtocol: "h2c" })).toBe("upstreamProtocol: goes with a local service, not a handler");
  });
});

describe("what the agent runs", () => {
  test("every service of the tunnel, its routes' too, is reached over HTTP/2; http1 leaves them on HTTP/1.1", () => {
    const h2c = tunnelFromFlags("http", { "upstream-protocol": "h2c", route: ["/api=9000"] }, parseTarget("50051", true));
    expect(h2c.target.upstreamProtocol).toBe("h2c");
    expect(h2c.target.routes!.map((r) => r.target.upstreamProtocol)).toEqual(["h2c"]);
    const h2 = tunnelFromFlags("http", { "upstream-protocol": "h2" }, parseTarget("https://localhost:8443", true));
    expect(h2.target.upstreamProtocol).toBe("h2");
    expect(tunnelFromFlags("http", { "upstream-protocol": "http1" }, parseTarget("3000", true)).target.upstreamProtocol).toBeUndefined();
    expect(tunnelFromFlags("http", {}, parseTarget("3000", true)).target.upstreamProtocol).toBeUndefined();
  });

  test("burrow.yml's key reaches the agent's target", () => {
    const file = parseFile("tunnels:\n  grpc: {proto: http, addr: 50051, upstream_protocol: h2c}\n", FILE);
    expect(file.tunnels[0]!.target.upstreamProtocol).toBe("h2c");
  });
});
