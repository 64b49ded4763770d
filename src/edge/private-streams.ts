/**
 * A connector's connection to a private tunnel, opened on the owner's
 * agent: the rules asked again for each one (the owner's agent there, the
 * tunnel still shared with the connector), and what the agent is told. One
 * place for the connector's node (edge/agent-streams.ts) and, when the owner is on
 * another node, the owner's node (cluster/relay.ts).
 *
 * An http tunnel's connection is an h1 stream that brings its own heads,
 * with the connector's username for X-Burrow-User (protocol/messages.ts
 * OpenMeta `user`); a tcp one's, its bytes; a udp one's, a flow.
 */
import type { Stream } from "../protocol/mux.ts";
import { WireError } from "../protocol/wire.ts";
import type { Tunnel } from "./registry.ts";

export interface PrivateConnector {
  userId: number;
  username: string;
}

/** The stream to `t`'s agent for a connector's `kind` stream, or the code to reset the connector's with. */
export function openToPrivate(t: Tunnel | undefined, connector: PrivateConnector, kind: string, remote: string, local?: string): Stream | string {
  if (!t?.agent) return "TUNNEL_OFFLINE";
  if (t.userId !== connector.userId && !t.shares?.has(connector.userId)) return "NOT_SHARED";
  // a udp tunnel's flows are the connector's udp streams; an http or tcp one's connections its tcp ones
  if ((kind !== "tcp" && kind !== "udp") || (t.protocol === "udp") !== (kind === "udp")) return WireError.PROTOCOL_ERROR;
  const up = t.agent.openStream(
    t.protocol === "http"
      ? { tunnel: t.id, kind: "h1", remote, keep: true, user: connector.username }
      : { tunnel: t.id, kind: kind as "tcp" | "udp", remote, ...(local !== undefined ? { local } : {}) },
  );
  return up ?? WireError.UPSTREAM_FAILED;
}

/** The row a private tunnel has among the cluster's live tunnels, apart from every name and port. */
export function privateRowName(ownerId: number, name: string): string {
  return `private:${ownerId}/${name}`;
}

/** privateRowName's owner and name, or undefined for any other row. */
export function readPrivateRowName(row: string): { ownerId: number; name: string } | undefined {
  const m = /^private:(\d{1,12})\/([a-z0-9-]{1,63})$/.exec(row);
  return m ? { ownerId: Number(m[1]), name: m[2]! } : undefined;
}
