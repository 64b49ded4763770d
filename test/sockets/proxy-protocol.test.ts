/**
 * The PROXY protocol v2 header, byte for byte against HAProxy's
 * proxy-protocol.txt (section 2.2), and the "ip:port" texts it is made from.
 * test/e2e/proxy-protocol.test.ts shows nginx reading it.
 */
import { describe, expect, test } from "bun:test";
import { parseEndpoint, proxyV2Header } from "../../src/sockets/proxy-protocol.ts";

const SIGNATURE = "0d0a0d0a000d0a515549540a";
const hex = (b: Uint8Array) => Buffer.from(b).toString("hex");

describe("proxyV2Header", () => {
  test("TCP over IPv4: signature, version 2 PROXY, 0x11, 12 bytes of addresses and ports", () => {
    const h = proxyV2Header({ address: "203.0.113.7", port: 56324 }, { address: "198.51.100.1", port: 20000 });
    expect(h.byteLength).toBe(16 + 12);
    expect(hex(h)).toBe(`${SIGNATURE}21` + "11" + "000c" + "cb007107" + "c6336401" + "dc04" + "4e20");
  });

  test("TCP over IPv6: 0x21 and 36 bytes", () => {
    const h = proxyV2Header({ address: "2001:db8::1", port: 443 }, { address: "::1", port: 8443 });
    expect(h.byteLength).toBe(16 + 36);
    expect(hex(h)).toBe(`${SIGNATURE}21` + "21" + "0024" + "20010db8000000000000000000000001" + "00000000000000000000000000000001" + "01bb" + "20fb");
  });

  test("IPv4 mapped into IPv6 on both sides (a dual-stack listener) is written as IPv4", () => {
    const h = proxyV2Header({ address: "::ffff:10.0.0.1", port: 1 }, { address: "::ffff:10.0.0.2", port: 2 });
    expect(hex(h)).toBe(`${SIGNATURE}21` + "11" + "000c" + "0a000001" + "0a000002" + "0001" + "0002");
  });

  test("one IPv4 side next to an IPv6 one: both as IPv6, the IPv4 one mapped", () => {
    const h = proxyV2Header({ address: "10.0.0.1", port: 1 }, { address: "::", port: 2 });
    expect(hex(h)).toBe(`${SIGNATURE}21` + "21" + "0024" + "00000000000000000000ffff0a000001" + "00000000000000000000000000000000" + "0001" + "0002");
  });
});

describe("parseEndpoint", () => {
  test("an IPv4 peer, an unbracketed and a bracketed IPv6 one", () => {
    expect(parseEndpoint("127.0.0.1:5000")).toEqual({ address: "127.0.0.1", port: 5000 });
    expect(parseEndpoint("::1:5000")).toEqual({ address: "::1", port: 5000 });
    expect(parseEndpoint("::ffff:127.0.0.1:80")).toEqual({ address: "::ffff:127.0.0.1", port: 80 });
    expect(parseEndpoint("[2001:db8::2]:443")).toEqual({ address: "2001:db8::2", port: 443 });
  });

  test("anything that is not an address and a port is refused", () => {
    for (const bad of ["", ":", "127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:65536", "host.example:80", "1.2.3:80", "127.0.0.1:-1", "[::1]"]) {
      expect(parseEndpoint(bad)).toBeUndefined();
    }
  });
});
