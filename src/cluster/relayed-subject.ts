/**
 * What a tunnel's traffic policies judge a stream relayed from another
 * node by when they change while it is open (edge/traffic-policy/
 * live-rejudge.ts): the facts its relayed door judged it with
 * (relayed-doors.ts). A request: its head as the visitor's node sent it
 * (before this node's policies changed it), with the connection's facts it
 * carries; each relayed request is a connection here, opened when it came.
 * A tls connection: the addresses the visitor's node saw.
 */
import { isRefusal as isHeadRefusal, parseRequestHead } from "../http/request-head.ts";
import type { RelayedMeta } from "../protocol/messages.ts";
import type { Tunnel } from "../edge/registry.ts";
import type { PolicySubject } from "../edge/traffic-policy/live-rejudge.ts";
import { headField, relayedClient, relayedEnds, relayedRegion, relayedTlsSubject } from "./relayed-doors.ts";

/** `head`: the request's head as it was judged (a tls connection's: none); what it is judged by is made only when asked. */
export function relayedJudgedBy(t: Tunnel, meta: RelayedMeta, head: string | undefined): () => PolicySubject | undefined {
  const openedAt = Date.now();
  return () => relayedSubject(t, meta, head, openedAt);
}

function relayedSubject(t: Tunnel, meta: RelayedMeta, text: string | undefined, openedAt: number): PolicySubject | undefined {
  const client = relayedClient(meta);
  // a tls connection: judged again by what its door judged it by
  if (text === undefined) return { connect: relayedTlsSubject(t, meta, client, openedAt) };
  const clientPort = Number(meta.remote.slice(meta.remote.lastIndexOf(":") + 1)) || 0;
  const head = parseRequestHead(text.slice(0, -4));
  // it parsed when it was let through; a head that does not is not one this node judged
  if (isHeadRefusal(head)) return undefined;
  const host = headField(head, "x-forwarded-host") ?? meta.tunnel;
  const secure = headField(head, "x-forwarded-proto") === "https";
  const serverPort = Number(/:(\d+)$/.exec(host)?.[1] ?? (secure ? 443 : 80));
  // the visitor's connection as its node told of it when the request was relayed (a snapshot), and that node's region
  const ends = relayedEnds(meta);
  const region = relayedRegion(meta);
  return {
    connect: { client, clientPort, serverPort, ends, region, host: host.replace(/:\d+$/, ""), protocol: secure ? "https" : "http", openedAt },
    request: { client, clientPort, serverPort, ends, region, openedAt, secure, host, head },
  };
}
