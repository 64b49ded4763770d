/**
 * The tunnel kinds, in one table: what the rest of the tree asks instead of
 * writing its own list of kinds. Each kind is a unit in kinds/ (its facts,
 * its HELLO request, how it is shown); this file gathers them and says what
 * follows from their rows, so that a new kind is a new unit and its line
 * here, and a list such as "the kinds reached by a port" follows from the
 * rows rather than being written again in each place.
 *
 * Layer 0 (protocol/): the edge, the agent, the SDK, validation and the
 * panel may all import it. The database (also layer 0) keeps its enum
 * literal; test/protocol/kinds.test.ts checks it against this table.
 */
import { HTTP } from "./kinds/http.ts";
import { TCP } from "./kinds/tcp.ts";
import { TLS } from "./kinds/tls.ts";
import type { AddressParts, KindFacts, KindUnit } from "./kinds/unit.ts";
import { UDP } from "./kinds/udp.ts";

export type { AddressParts, KindDisplay, KindFacts, KindUnit } from "./kinds/unit.ts";

/** A table whose every key is its unit's name. */
const table = <T extends { [K in keyof T]: KindUnit<K & string> }>(units: T): T => units;

/** The units, one line per kind. The order is the order kinds are listed in (help, panel, metrics, HELLO's variants). */
export const KIND_UNITS = table({ http: HTTP, tcp: TCP, tls: TLS, udp: UDP });

type Units = typeof KIND_UNITS;

/** Each kind's facts, by its name. */
export const KINDS = Object.fromEntries(Object.entries(KIND_UNITS).map(([name, unit]) => [name, unit.facts])) as { readonly [K in keyof Units]: Units[K]["facts"] };

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

/** Each kind's HELLO request, in the table's order: TunnelRequest's variants (messages.ts). */
export const TUNNEL_REQUESTS = KIND_NAMES.map((k) => KIND_UNITS[k].request);

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

/** A name from outside (a database row, an API answer) as a kind, or undefined when no kind has it. */
export function kindNamed(name: string): TunnelKind | undefined {
  return Object.hasOwn(KIND_UNITS, name) ? (name as TunnelKind) : undefined;
}

/**
 * The kind of a tunnel reached by a name, from a row that says its kind: a
 * named kind as it is, anything else the first named kind (http), which is
 * what a name's row meant before it said its kind.
 */
export function namedKindOf(kind: string | undefined): NamedKind {
  return kind !== undefined && (NAMED_KINDS as string[]).includes(kind) ? (kind as NamedKind) : NAMED_KINDS[0]!;
}

/** A public address of a tunnel of `kind`, as people write it (kinds/unit.ts AddressParts says which parts). */
export function addressText(kind: TunnelKind, at: AddressParts): string {
  return KIND_UNITS[kind].display.address(at);
}
