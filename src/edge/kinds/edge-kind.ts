/**
 * What a tunnel kind is at the edge (the edge's row of the kind table:
 * kinds/index.ts): how a new tunnel of the kind takes its public place (a
 * name, a tcp port, a udp port), what must be bound first, what the edge
 * keeps of what the agent asked, and the doors its visitors come through
 * (judgement/pipeline.ts). What the kind is on the wire and to the agent is
 * its protocol unit's (protocol/kinds.ts) and its agent unit's.
 */
import type { PlannedTunnel } from "../../core/admission.ts";
import type { AppError } from "../../core/errors.ts";
import type { TunnelKind } from "../../protocol/kinds.ts";
import type { TunnelRequest } from "../../protocol/messages.ts";
import type { DoorName } from "../judgement/pipeline.ts";
import type { Registry, Tunnel } from "../registry.ts";

/** What admission planned for one tunnel of kind K. */
export type PlanOf<K extends TunnelKind> = Extract<PlannedTunnel, { protocol: K }>;
/** What the agent asked for one tunnel of kind K (its HELLO's entry). */
export type AskedOf<K extends TunnelKind> = Extract<TunnelRequest, { protocol: K }>;

/** What a kind's public address is made from: the edge's own addresses (public-addresses.ts PublicAddresses, or the EdgeContext that passes them on). */
export interface KindAddresses {
  httpUrl(name: string): string;
  tcpAddress(port: number): string;
  udpAddress(port: number): string;
  tlsAddress(name: string): string | undefined;
}

/**
 * What a unit uses of the edge (agent-context.ts's EdgeContext has it): the
 * registry, the port ranges, where names pass TLS through, the response
 * timeout's cap. Said here rather than imported, so that the units stay
 * below the listeners that ask them which kinds come through their doors.
 */
export interface EdgeContext {
  registry: Registry;
  ports: { bind(port: number | undefined, make: (port: number) => Tunnel): Tunnel };
  udpPorts?: { bind(port?: number): Promise<BoundUdpPort> };
  tlsAddress(name: string): string | undefined;
  maxResponseTimeoutMs?: number;
}

/** A udp port bound for a tunnel (udp-flows.ts UdpTunnelPort). */
export interface BoundUdpPort extends Prepared {
  readonly port: number;
  adopt(t: Tunnel): Tunnel;
}

export interface Owner {
  userId: number;
  username: string;
  tokenId: number;
}

/** Something bound for a tunnel before the grant (prepare), let go when no tunnel adopts it. */
export interface Prepared {
  closeUnadopted(): void;
}

/** What placing a tunnel knows of its handshake. */
export interface PlaceContext {
  /** The session it resumes, if any (its dropped tunnels give their names back). */
  resume?: string;
  /** A pool member's id, chosen when its name was claimed over the cluster. */
  memberId?: string;
  /** What prepare bound for it, or why that failed. */
  prepared?: Prepared | AppError;
}

export interface EdgeKind<K extends TunnelKind> {
  /** Where visitors reach a public tunnel of the kind, from its name or its port (undefined: nowhere on this server now). */
  address(at: KindAddresses, name: string, port: number): string | undefined;
  /** The doors its visitors come through (DoorName): the docs' table and the kind table's test read them. */
  readonly doors: readonly DoorName[];
  /** Why this server takes no public tunnel of the kind now (before anything is bound), or undefined. */
  unavailable?(edge: EdgeContext, plan: PlanOf<K>): AppError | undefined;
  /** What must be bound before the tunnels open (asynchronously), for a public tunnel of the kind not held in grace. */
  prepare?(edge: EdgeContext, plan: PlanOf<K>): Promise<Prepared | AppError>;
  /** A new public tunnel of the kind in its place, checked against what this node holds now. Throws its refusal. */
  place(edge: EdgeContext, plan: PlanOf<K>, owner: Owner, ctx: PlaceContext): Tunnel;
  /** What the edge keeps on a tunnel of the kind (new, or taken back from grace) of what its agent asked. */
  keep?(edge: EdgeContext, t: Tunnel, plan: PlanOf<K>, asked: AskedOf<K> | undefined): void;
}
