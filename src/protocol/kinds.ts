/**
 * The tunnel kinds, in one table: what the rest of the tree asks instead of
 * writing its own list of kinds. Each row holds the facts the code branches
 * on (how a visitor's traffic is carried, how a visitor reaches it, what
 * rules it takes, its metrics label), so that a new kind is a new row
 * here and its own code, and a list such as "the kinds reached by a port"
 * follows from the rows rather than being written again in each place.
 *
 * Layer 0 (protocol/): the edge, the agent, the SDK, validation and the
 * panel may all import it. The database (also layer 0) keeps its enum
 * literal; test/protocol/kinds.test.ts checks it against this table.
 */

/** One kind's facts. */
export interface KindFacts {
  /** OPEN's `kind` (messages.ts OpenMeta) of a visitor's stream to the agent. */
  readonly stream: "h1" | "tcp" | "tls" | "udp";
  /** A stream's bytes both ways (DATA), or each datagram whole (DATAGRAM frames). */
  readonly carries: "bytes" | "datagrams";
  /** A visitor reaches it by a name (a subdomain or hostname) or by a public port. */
  readonly reachedBy: "name" | "port";
  /** The public ports it takes a port from, when reached by a port: tcp and udp ports are separate spaces. */
  readonly portSpace?: "tcp" | "udp";
  /** It can be private (no public name or port; reached through `burrow connect`). */
  readonly canBePrivate: boolean;
  /** Its access rules: http's (basic auth, OIDC, headers, IP rules), or IP rules only. */
  readonly access: "http" | "ip";
  /** Its `protocol` label in the metrics (tunnels_active). */
  readonly metricsLabel: string;
}

/** The table. The order is the order kinds are listed in (help, panel, metrics). */
export const KINDS = {
  http: { stream: "h1", carries: "bytes", reachedBy: "name", canBePrivate: true, access: "http", metricsLabel: "http" },
  tcp: { stream: "tcp", carries: "bytes", reachedBy: "port", portSpace: "tcp", canBePrivate: true, access: "ip", metricsLabel: "tcp" },
  // a tls tunnel passes a public name through (the ClientHello's): it cannot be private
  tls: { stream: "tls", carries: "bytes", reachedBy: "name", canBePrivate: false, access: "ip", metricsLabel: "tls" },
  udp: { stream: "udp", carries: "datagrams", reachedBy: "port", portSpace: "udp", canBePrivate: true, access: "ip", metricsLabel: "udp" },
} as const satisfies Record<string, KindFacts>;

type Table = typeof KINDS;
/** A tunnel kind's name. */
export type TunnelKind = keyof Table;

/** Every kind's name, in the table's order. */
export const KIND_NAMES = Object.keys(KINDS) as TunnelKind[];

/** The kinds that can be private. */
export type PrivateKind = { [K in TunnelKind]: Table[K]["canBePrivate"] extends true ? K : never }[TunnelKind];
export const PRIVATE_KINDS = KIND_NAMES.filter((k) => KINDS[k].canBePrivate) as PrivateKind[];

/** The kinds a visitor reaches by a public port. */
export type PortKind = { [K in TunnelKind]: Table[K]["reachedBy"] extends "port" ? K : never }[TunnelKind];
export const PORT_KINDS = KIND_NAMES.filter((k) => KINDS[k].reachedBy === "port") as PortKind[];

/** The kinds a visitor reaches by a name (subdomain or hostname). */
export type NamedKind = { [K in TunnelKind]: Table[K]["reachedBy"] extends "name" ? K : never }[TunnelKind];
export const NAMED_KINDS = KIND_NAMES.filter((k) => KINDS[k].reachedBy === "name") as NamedKind[];

/** OPEN's kinds: one per tunnel kind. */
export type StreamKind = Table[TunnelKind]["stream"];
export const STREAM_KINDS = KIND_NAMES.map((k) => KINDS[k].stream) as StreamKind[];

/** A kind's facts, as the interface says them (a field one kind lacks reads undefined). */
export function kindFacts(kind: TunnelKind): KindFacts {
  return KINDS[kind];
}

/** A tunnel (a request, a plan, a live one) of a kind reached by a port: narrows it to those kinds. */
export function isPortKind<T extends { protocol: TunnelKind }>(t: T): t is Extract<T, { protocol: PortKind }> {
  return KINDS[t.protocol].reachedBy === "port";
}

/** A tunnel of a kind reached by a name: narrows it to those kinds. */
export function isNamedKind<T extends { protocol: TunnelKind }>(t: T): t is Extract<T, { protocol: NamedKind }> {
  return KINDS[t.protocol].reachedBy === "name";
}

/** A tunnel of a kind that can be private: narrows it to those kinds (the ones with a `private` field). */
export function isPrivateKind<T extends { protocol: TunnelKind }>(t: T): t is Extract<T, { protocol: PrivateKind }> {
  return KINDS[t.protocol].canBePrivate;
}

/** Reached by a public port (tcp, udp), rather than by a name. */
export function reachedByPort(kind: TunnelKind): kind is PortKind {
  return KINDS[kind].reachedBy === "port";
}

/** Reached by a name (http, tls). */
export function reachedByName(kind: TunnelKind): kind is NamedKind {
  return KINDS[kind].reachedBy === "name";
}
