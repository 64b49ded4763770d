/**
 * A connector's connection to a private tunnel, opened on the owner's
 * agent: the steps of the judgement that are private tunnels' own (the
 * connector's standing and share asked again for each one, the kinds that
 * fit, the stream the agent is told of), shared by the doors of the
 * connector's node (edge/agent-streams.ts) and, when the owner is on
 * another node, the owner's node (cluster/relay.ts).
 *
 * An http tunnel's connection is an h1 stream that brings its own heads,
 * with the connector's username for X-Burrow-User (protocol/messages.ts
 * OpenMeta `user`); a tcp one's, its bytes; a udp one's, a flow.
 */
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import { Refusal, type Visit } from "./judgement/pipeline.ts";
import type { LiveJudge, Tunnel } from "./registry.ts";

export interface PrivateConnector {
  userId: number;
  tokenId?: number;
  username: string;
}

/** A connector's stream to a private tunnel on its way through the steps (judgement/pipeline.ts). */
export interface PrivateVisit extends Visit {
  readonly connector: PrivateConnector;
  /** The connector's stream: its OPEN's kind, and the addresses the agent is told. */
  readonly kind: string;
  readonly remote: string;
  readonly local?: string;
}

/**
 * Step 2 of a private tunnel's doors, first: the connector's standing as
 * the rules say now (its token, its user, the share: edge/live-rules.ts,
 * asked for each stream), and for a tunnel of this node the share as the
 * tunnel holds it. A refusal carries the rules' code.
 */
export function connectorStanding(judge: LiveJudge | undefined, t: Tunnel, v: PrivateVisit, ownerId: number, name: string): undefined | Refusal | Promise<undefined | Refusal> {
  const c = v.connector;
  const shared = (): undefined | Refusal => (t.relayed || t.userId === c.userId || t.shares?.has(c.userId) ? undefined : NOT_SHARED);
  const standing = judge?.connector({ userId: c.userId, ...(c.tokenId !== undefined ? { tokenId: c.tokenId } : {}) }, ownerId, name);
  if (standing instanceof Promise) return standing.then((refusal) => (refusal ? new StandingRefusal("admission", refusal.code, refusal.message) : shared()));
  return standing ? new StandingRefusal("admission", standing.code, standing.message) : shared();
}

/** A refusal of the connector itself (its token, its user, the share as the rules hold it), rather than of this one stream. */
export class StandingRefusal extends Refusal {}

/** Step 2 of a private tunnel's doors: a udp tunnel's flows are the connector's udp streams; an http or tcp one's connections its tcp ones. */
export function privateKindFits(t: Tunnel, v: PrivateVisit): true | Refusal {
  const { kind } = v;
  return (kind === "tcp" || kind === "udp") && (t.protocol === "udp") === (kind === "udp") ? true : PROTOCOL_ERROR;
}

/** Step 4 of a private tunnel's doors: the stream to `t`'s agent for the connector's, or the code to reset the connector's with. */
export function openPrivateStream(t: Tunnel, v: PrivateVisit): Stream | string {
  if (!t.agent) return "TUNNEL_OFFLINE";
  const { remote, local } = v;
  const up = t.agent.openStream(
    t.protocol === "http"
      ? { tunnel: t.id, kind: "h1", remote, keep: true, user: v.connector.username }
      : { tunnel: t.id, kind: v.kind as "tcp" | "udp", remote, ...(local !== undefined ? { local } : {}) },
  );
  return up ?? WireError.UPSTREAM_FAILED;
}

const NOT_SHARED = new Refusal("admission", "NOT_SHARED");
const PROTOCOL_ERROR = new Refusal("admission", WireError.PROTOCOL_ERROR);

/** The row a private tunnel has among the cluster's live tunnels, apart from every name and port. */
export function privateRowName(ownerId: number, name: string): string {
  return `private:${ownerId}/${name}`;
}

/** privateRowName's owner and name, or undefined for any other row. */
export function readPrivateRowName(row: string): { ownerId: number; name: string } | undefined {
  const m = /^private:(\d{1,12})\/([a-z0-9-]{1,63})$/.exec(row);
  return m ? { ownerId: Number(m[1]), name: m[2]! } : undefined;
}
