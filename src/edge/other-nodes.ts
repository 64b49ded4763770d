/**
 * What the edge needs from the other nodes when several share one
 * database, as an interface the edge owns: cluster/ implements it
 * (cluster/edge-nodes.ts), server.ts builds it and passes it in, and a
 * single node passes nothing. So the edge never imports cluster/, and the
 * arrow runs one way: cluster -> edge.
 */
import type { LiveView, PoolBalance } from "../core/admission.ts";
import type { LiveTunnels } from "../core/live.ts";
import type { NamedKind } from "../protocol/kinds.ts";
import type { SendResult } from "../protocol/mux.ts";
import type { Registry, Tunnel } from "./registry.ts";

/** Who a claimed name is for. */
export interface NameOwner {
  userId: number;
  username: string;
  tokenId: number;
}

/** How a tunnel is served, for another node that relays to it (its access rules stay with its own node). */
export interface Serving {
  skipWarning: boolean;
  responseTimeoutMs?: number;
  /** The kind of tunnel the name is (default http): a tls one is relayed as a connection, undecrypted. */
  protocol?: NamedKind;
  /** The name is a tunnel's second (its hostname beside its subdomain): claimed for the name, not listed or counted as a tunnel. */
  twin?: boolean;
  /** The tunnel's hostname beside the subdomain claimed (for the other nodes' lists). */
  hostname?: string;
}

export interface OtherNodes {
  /** What admission counts and the admin API lists: the live tunnels of every node. */
  readonly live: LiveView & LiveTunnels;
  /** This node's registry, mirrored to the others from now on; `domain` names relayed tunnels' pages. */
  attach(registry: Registry, domain: string): void;
  /**
   * A name held at start for the agent of the server before: claimed for it
   * over every node, let go when another has it. Settles once the claim is
   * written (or failed, which is logged), never rejects.
   */
  holdAtStart(t: Tunnel): Promise<void>;
  /** Runs a user's handshake rules one at a time over every node, so two nodes cannot pass a limit together. */
  oneUserAtATime<T>(userId: number, fn: () => Promise<T>): Promise<T>;
  /** Claims a name over every node for this session; false: another node holds it. */
  claim(subdomain: string, owner: NameOwner, sessionId: string, resume: string | undefined, serving: Serving): Promise<boolean>;
  /** Gives back a claimed name that no tunnel of this node took after all. */
  release(subdomain: string): Promise<void>;
  /**
   * Joins the user's pool on `names` over every node (or starts it) with the
   * member `memberId` (the id its tunnel will have): undefined when it is in,
   * else the name another user's tunnel (or one that is no pool) holds.
   */
  joinPool(names: string[], memberId: string, owner: NameOwner, sessionId: string, serving: Serving & { pool: PoolBalance }): Promise<string | undefined>;
  /** Gives back a pool member joined at a handshake that no tunnel of this node took after all. */
  dropMember(memberId: string): Promise<void>;
  /** A tcp or udp tunnel of this node, or a pool member, listed for the others. */
  registerRow(t: Tunnel, sessionId: string | null): Promise<boolean>;
  /**
   * The members on other nodes, in rotation, of a pool this node has members
   * of too: stand-ins (as find's) for the pool to take in turn with its own.
   * Answered at once from what was last learned (within a second or so).
   */
  poolOthers(name: string): readonly Tunnel[];
  /**
   * A name that is not live here: another node's tunnel as a stand-in the
   * edge opens streams on as it would on an agent's connection, a page that
   * says why it cannot be reached now, or undefined when no node has it.
   */
  find(name: string): Promise<Tunnel | Response | undefined> | Tunnel | Response | undefined;
  /**
   * A private tunnel live on another node: a stand-in whose streams go
   * through a relay link to that node, which asks the rules again and opens
   * them on the owner's agent (OPEN carries the connector). Undefined when
   * no node has it live, or it cannot be reached now.
   */
  privateElsewhere(ownerId: number, name: string): Promise<Tunnel | undefined>;
  /** Links in from nodes that relay visitors to this one; undefined when the nodes do not relay (no --cluster-secret). */
  readonly links?: NodeLinks;
  /** Ends the links out to other nodes. */
  close(): void;
}

export interface NodeLinks {
  /** The node a relay link's request comes from (its authorization checked), or undefined when it is not one. */
  acceptNode(req: Request): string | undefined;
  /** A node's relay link is open on this edge: its frames go to what this returns. */
  linked(nodeId: string, transport: NodeTransport): NodeLink;
}

/** What carries another node's relay link into this edge (its WebSocket). */
export interface NodeTransport {
  send(frames: Uint8Array): SendResult;
  close(reason: string): void;
}

/** Another node's relay link, as the edge's socket events feed it. */
export interface NodeLink {
  receive(frames: Uint8Array): void;
  drained(): void;
  closed(): void;
}
