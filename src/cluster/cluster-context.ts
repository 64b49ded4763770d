/**
 * What the parts of a cluster node share: the database and who this node
 * is, the edge's registry once it is attached, and the node's two ways of
 * speaking, a write whose failure is only logged and a NOTIFY to the other
 * nodes. The node itself (cluster.ts) makes it and keeps what it holds;
 * its parts are the names claimed over the cluster (cluster-names.ts), the
 * pools (cluster-pools.ts) and what is counted and listed over every node
 * (cluster-counts.ts).
 */
import type { SQL } from "bun";
import type { Core } from "../core/index.ts";
import type { Registry } from "../edge/registry.ts";
import type { Said } from "./messages.ts";

export interface ClusterSide {
  readonly sql: SQL;
  readonly nodeId: string;
  /** --node-expiry: a node silent this long is dead, its rows count for nothing. The same on every node. */
  readonly expiryMs: number;
  readonly core: Core;
  /** The edge's registry: this node's tunnels (set once the edge exists, before any part is asked). */
  readonly registry: Registry;
  /** Runs a query whose failure is logged (each kind at most every 10 s) rather than thrown; once the node stopped, not even logged. */
  quietly(what: string, query: PromiseLike<unknown>): Promise<void>;
  /** Tells the other nodes (NOTIFY); never rejects. */
  notify(message: Said): Promise<void>;
}
