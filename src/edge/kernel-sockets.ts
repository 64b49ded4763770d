/**
 * Which TCP connections to a local port are open, as the kernel sees them
 * (Linux: /proc/net/tcp and tcp6). Bun.serve tells a fetch handler who sent
 * a request but never when that client's connection closed; the per-address
 * cap asks the kernel before it refuses anyone, so a client that opens and
 * closes many short connections is not taken for one that holds them.
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
 */
export function establishedPeers(localPort: number): Set<string> | undefined {
  const peers = new Set<string>();
  let readAny = false;
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string;
    try {
      text = readFileSync(file, "latin1");
    } catch {
      continue;
    }
    readAny = true;
    for (const line of text.split("\n").slice(1)) {
      const cols = line.trim().split(/\s+/);
      if (cols.length < 4 || cols[3] !== ESTABLISHED) continue;
      if (decode(cols[1]!)?.port !== localPort) continue;
      const peer = decode(cols[2]!);
      if (peer) peers.add(`${peer.address}:${peer.port}`);
    }
  }
  return readAny ? peers : undefined;
}
