/**
 * The PROXY protocol, version 2 (HAProxy's proxy-protocol.txt, section 2.2):
 * a binary header a TCP relay writes first on its connection to a server,
 * naming the client's address and port and the address it reached. Below
 * HTTP there is no X-Forwarded-For; with this header nginx
 * (`listen ... proxy_protocol`, `$proxy_protocol_addr`), HAProxy
 * (`accept-proxy`) or PostgreSQL behind HAProxy see the visitor instead of
 * the agent. The agent sends it on a tcp tunnel's connections when asked
 * (`--proxy-protocol`); the service must then expect it on every
 * connection, since it is not a negotiation.
 *
 *   signature (12) | 0x21 (version 2, PROXY) | family and transport |
 *   length u16 (big-endian) | addresses
 *
 * TCP over IPv4 (0x11): source, destination (4 bytes each), source port,
 * destination port (2 each): 12 bytes. TCP over IPv6 (0x21): 16 + 16 + 2 + 2.
 */
import { isIP } from "node:net";
import ipaddr from "ipaddr.js";

const SIGNATURE = [0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a];
const VERSION_2_PROXY = 0x21;
const TCP_OVER_IPV4 = 0x11;
const TCP_OVER_IPV6 = 0x21;

/** An address and port, as sockets report them ("127.0.0.1", "::1", "::ffff:10.0.0.1"). */
export interface Endpoint {
  address: string;
  port: number;
}

/** "ip:port" as the edge writes a socket's peer (an IPv6 address unbracketed: the port is after the last colon). */
export function parseEndpoint(text: string): Endpoint | undefined {
  const colon = text.lastIndexOf(":");
  if (colon <= 0) return undefined;
  const address = text.slice(0, colon).replace(/^\[(.*)\]$/, "$1");
  const portText = text.slice(colon + 1);
  const port = Number(portText);
  if (!isIP(address) || !/^\d{1,5}$/.test(portText) || port > 65535) return undefined;
  return { address, port };
}

/** The header for a TCP connection from `source` that reached `destination`. Both must be IP addresses (parseEndpoint). */
export function proxyV2Header(source: Endpoint, destination: Endpoint): Uint8Array {
  // an IPv4 address mapped into IPv6 ("::ffff:1.2.3.4") is the IPv4 one it is (ipaddr.process)
  let from: ipaddr.IPv4 | ipaddr.IPv6 = ipaddr.process(source.address);
  let to: ipaddr.IPv4 | ipaddr.IPv6 = ipaddr.process(destination.address);
  // one family for both: an IPv4 side next to an IPv6 one is written in its mapped IPv6 form
  const v4 = from.kind() === "ipv4" && to.kind() === "ipv4";
  if (!v4) {
    if (from instanceof ipaddr.IPv4) from = from.toIPv4MappedAddress();
    if (to instanceof ipaddr.IPv4) to = to.toIPv4MappedAddress();
  }
  const addresses = [...from.toByteArray(), ...to.toByteArray()];
  const length = addresses.length + 4;
  return Uint8Array.from([
    ...SIGNATURE,
    VERSION_2_PROXY,
    v4 ? TCP_OVER_IPV4 : TCP_OVER_IPV6,
    length >> 8,
    length & 0xff,
    ...addresses,
    source.port >> 8,
    source.port & 0xff,
    destination.port >> 8,
    destination.port & 0xff,
  ]);
}
