/**
 * How each kind's public address is shown (edge/public-addresses.ts): one
 * line per kind of the kind table, the same for READY and for the lists of
 * live tunnels (the portal, the admin API).
 */
import { describe, expect, test } from "bun:test";
import type { ActiveTunnel } from "../../src/core/live.ts";
import { kindAddress, PublicAddresses } from "../../src/edge/public-addresses.ts";
import { KIND_NAMES } from "../../src/protocol/kinds.ts";

const live = (t: Partial<ActiveTunnel>) => t as ActiveTunnel;

describe("public addresses by kind", () => {
  test("each kind's address: http by name on the edge's scheme, tcp and udp by port, tls by name where names pass through", () => {
    const at = new PublicAddresses("example.com", { tls: true, port: 443 });
    expect(at.addressOf(live({ protocol: "http", subdomain: "app" }))).toBe("https://app.example.com");
    expect(at.addressOf(live({ protocol: "http", subdomain: "app", hostname: "demo.acme.com" }))).toBe("https://demo.acme.com");
    expect(at.addressOf(live({ protocol: "tcp", port: 20000 }))).toBe("example.com:20000");
    expect(at.addressOf(live({ protocol: "udp", port: 20000 }))).toBe("udp://example.com:20000");
    expect(at.addressOf(live({ protocol: "tls", subdomain: "db" }))).toBe("tls://db.example.com");
    expect(at.addressOf(live({ protocol: "tcp", private: { target: "ann/db", shares: [], connected: 0 } } as never))).toBe("ann/db");
  });

  test("a tls tunnel has no address where no port passes names through; every kind of the table has one otherwise", () => {
    const plain = new PublicAddresses("example.com", { tls: false, port: 80 });
    expect(kindAddress(plain, "tls", "db", 0)).toBeUndefined();
    expect(plain.addressOf(live({ protocol: "tls", subdomain: "db" }))).toBe("");
    const secure = new PublicAddresses("example.com", { tls: true, port: 8443 });
    for (const kind of KIND_NAMES) expect(kindAddress(secure, kind, "x", 1)).toBeString();
    expect(kindAddress(secure, "tls", "x", 1)).toBe("tls://x.example.com:8443");
  });
});
