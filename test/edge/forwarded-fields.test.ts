/**
 * The fields the edge sets on every request it forwards: X-Forwarded-*,
 * X-Real-IP and Forwarded. A visitor's own X-Real-IP and Forwarded never
 * reach the service; a trusted proxy's Forwarded chain (--trusted-proxies)
 * is kept with this hop added, as its X-Forwarded-For is believed.
 */
import { describe, expect, test } from "bun:test";
import { TrustedProxies } from "../../src/http/addresses.ts";
import { isRefusal, parseRequestHead } from "../../src/http/request-head.ts";
import { EDGE_READS, requestHeadText, type ForwardContext } from "../../src/edge/forward.ts";
import type { Tunnel } from "../../src/edge/registry.ts";

const tunnel = {} as Tunnel;

function forwarded(text: string, ctx: Partial<ForwardContext>): string[] {
  const head = parseRequestHead(text, EDGE_READS);
  if (isRefusal(head)) throw new Error(head.why);
  const full: ForwardContext = {
    remoteIp: "203.0.113.9",
    remotePort: 40000,
    client: "203.0.113.9",
    secure: true,
    host: "app.tunnels.example:8443",
    trustedProxies: new TrustedProxies([]),
    responseTimeoutMs: 1000,
    maxResponseTimeoutMs: 1000,
    counters: undefined as never,
    startedAt: 0,
    ...ctx,
  };
  return requestHeadText(head, tunnel, full, text).split("\r\n");
}

describe("identity headers: X-Real-IP and Forwarded", () => {
  test("a visitor's own are replaced by the edge's, on a head that passes as sent too", () => {
    for (const extra of ["", "\r\nX-Real-IP: 6.6.6.6\r\nForwarded: for=6.6.6.6;proto=http\r\nforwarded: for=7.7.7.7"]) {
      const lines = forwarded(`GET / HTTP/1.1\r\nHost: app.tunnels.example${extra}`, {});
      expect(lines.filter((l) => /^x-real-ip:/i.test(l))).toEqual(["X-Real-IP: 203.0.113.9"]);
      expect(lines.filter((l) => /^forwarded:/i.test(l))).toEqual(['Forwarded: for=203.0.113.9;proto=https;host="app.tunnels.example:8443"']);
    }
  });

  test("from a trusted proxy: X-Real-IP is the client it names, and its Forwarded chain is kept with this hop added", () => {
    const lines = forwarded("GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 198.51.100.7\r\nForwarded: for=198.51.100.7;proto=https", {
      remoteIp: "10.0.0.2",
      client: "198.51.100.7",
      trustedProxies: new TrustedProxies(["10.0.0.0/8"]),
    });
    expect(lines).toContain("X-Real-IP: 198.51.100.7");
    expect(lines).toContain("X-Forwarded-For: 198.51.100.7, 10.0.0.2");
    expect(lines).toContain('Forwarded: for=198.51.100.7;proto=https, for=10.0.0.2;proto=https;host="app.tunnels.example:8443"');
  });

  test("an IPv6 peer is a quoted, bracketed node", () => {
    const lines = forwarded("GET / HTTP/1.1\r\nHost: a", { remoteIp: "2001:db8::1", client: "2001:db8::1" });
    expect(lines).toContain('Forwarded: for="[2001:db8::1]";proto=https;host="app.tunnels.example:8443"');
  });
});
