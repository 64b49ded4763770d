/**
 * How nodes tell each other from strangers: a node dialling another sends
 * `Authorization: Burrow-Node <node id> <unix seconds> <HMAC-SHA256>`, the
 * MAC of the id and the time under --cluster-secret, good for a minute
 * either side of the receiver's clock. The secret itself never travels, and
 * the MAC is compared in constant time.
 */
import { createHmac, timingSafeEqual } from "node:crypto";

import { NODE_PATH } from "../protocol/wire.ts";

export { NODE_PATH };
const SCHEME = "Burrow-Node";
/** How far the sender's clock may be from the receiver's. */
const SKEW_S = 60;

const mac = (secret: string, nodeId: string, at: number) => createHmac("sha256", secret).update(`burrow-node\n${nodeId}\n${at}`).digest("hex");

export function nodeAuthorization(secret: string, nodeId: string, nowS = Math.floor(Date.now() / 1000)): string {
  return `${SCHEME} ${nodeId} ${nowS} ${mac(secret, nodeId, nowS)}`;
}

/** The calling node's id, or undefined when the header is not a good one. */
export function verifyNodeAuthorization(header: string | null, secret: string, nowS = Math.floor(Date.now() / 1000)): string | undefined {
  if (!header || header.length > 300) return undefined;
  const [scheme, nodeId, at, given] = header.split(" ");
  if (scheme !== SCHEME || !nodeId || !at || !given || !/^\d{1,12}$/.test(at) || !/^[0-9a-f]{64}$/.test(given)) return undefined;
  if (Math.abs(nowS - Number(at)) > SKEW_S) return undefined;
  const expected = Buffer.from(mac(secret, nodeId, Number(at)), "hex");
  return timingSafeEqual(expected, Buffer.from(given, "hex")) ? nodeId : undefined;
}
