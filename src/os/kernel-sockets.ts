/**
 * Which TCP connections to a local port are open, as the kernel sees them
 * (Linux: /proc/net/tcp and tcp6). The edge no longer asks: its listeners
 * see every connection open and close (sockets/socket-budget.ts). What
 * reads it now is the test of a host with a large socket table
 * (test/chaos/large-socket-table.test.ts), to time one read.
 */
import { readFileSync } from "node:fs";

const ESTABLISHED = "01";

/** "0100007F:1F90" -> "127.0.0.1:8080"; tcp6 addresses are four little-endian words. */
function decode(field: string): { address: string; port: number } | undefined {
  const [hex, portHex] = field.split(":");
  if (!hex || !portHex) return undefined;
  const port = parseInt(portHex, 16);
  const words: number[] = [];
  for (let i = 0; i < hex.length; i += 8) {
    const w = hex.slice(i, i + 8);
    // each 32-bit word is in host (little-endian) order
    words.push(...[6, 4, 2, 0].map((j) => parseInt(w.slice(j, j + 2), 16)));
  }
  if (words.length === 4) return { address: words.join("."), port };
  const mapped = words.slice(0, 10).every((b) => b === 0) && words[10] === 0xff && words[11] === 0xff;
  if (mapped) return { address: words.slice(12).join("."), port };
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((words[i]! << 8) | words[i + 1]!).toString(16));
  return { address: compressIpv6(groups), port };
}

function compressIpv6(groups: string[]): string {
  // the longest run of zero groups becomes "::", as ipaddr.js and Bun print it
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== "0") {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === "0") j++;
    if (j - i > bestLen) [best, bestLen] = [i, j - i];
    i = j;
  }
  if (bestLen < 2) return groups.join(":");
  return `${groups.slice(0, best).join(":")}::${groups.slice(best + bestLen).join(":")}`;
}

/**
 * The "address:port" of every peer with an established connection to
 * `localPort`, or undefined where the kernel does not say (not Linux).
 *
 * The table lists every socket of the host, TIME_WAIT ones included, so it
 * can hold tens of thousands of lines: each line is tested for state and
 * local port at their fixed places before anything is decoded.
 */
export function establishedPeers(localPort: number, ipv6 = true): Set<string> | undefined {
  const peers = new Set<string>();
  const portHex = localPort.toString(16).toUpperCase().padStart(4, "0");
  let readAny = false;
  // each file costs a few ms even when nearly empty (the kernel walks its whole socket hash):
  // tcp6 is read only when the port may have IPv6 peers
  const files = ipv6 ? ([["/proc/net/tcp", 13], ["/proc/net/tcp6", 37]] as const) : ([["/proc/net/tcp", 13]] as const);
  for (const [file, addressLength] of files) {
    let text: string;
    try {
      text = readFileSync(file, "latin1");
    } catch {
      continue;
    }
    readAny = true;
    // each line: "<sl>: <local address:port> <remote address:port> <state> ...", fixed widths after "<sl>: "
    let at = text.indexOf("\n") + 1;
    while (at > 0 && at < text.length) {
      const next = text.indexOf("\n", at);
      const start = text.indexOf(": ", at) + 2;
      const local = start;
      const remote = local + addressLength + 1;
      const state = remote + addressLength + 1;
      if (
        start > 1 &&
        (next === -1 || state < next) &&
        text.startsWith(ESTABLISHED, state) &&
        text.startsWith(portHex, local + addressLength - 4)
      ) {
        const peer = decode(text.slice(remote, remote + addressLength));
        if (peer) peers.add(`${peer.address}:${peer.port}`);
      }
      at = next + 1;
    }
  }
  return readAny ? peers : undefined;
}
