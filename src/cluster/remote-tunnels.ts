/**
 * What a node answers for a name it does not hold: another node's tunnel,
 * served through a relay link, or nothing. The answer comes from
 * live_tunnels and is kept for REMOTE_CACHE_MS, found or not, so that a
 * visitor's node asks the database at most once a second per name, and a
 * flood of made-up names asks it at most --relay-lookups queries at a time.
 */
import { badGatewayPage, lookupsBusyPage } from "../edge/pages.ts";
import { quietWarnings } from "../log.ts";
import type { Registry, Tunnel } from "../edge/registry.ts";
import type { Mux } from "../protocol/mux.ts";
import { TunnelPool } from "../edge/pool.ts";
import type { ClusterNames, RemoteTunnel } from "./cluster-names.ts";
import type { RelayOut } from "./relay.ts";

/** How long a node keeps what it learned of another node's tunnel (or of its absence). */
const REMOTE_CACHE_MS = 1_000;
/** Names remembered at most (the cache is cleared past it). */
const REMOTE_CACHE_MAX = 10_000;
/** Lookups of different names in the database at once (--relay-lookups); past it a visitor gets 503. */
export const DEFAULT_RELAY_LOOKUPS = 64;
/** A failing lookup is logged at most this often. */
const FAILURE_LOG_MS = 10_000;

type Answer = Tunnel | Response | undefined;
type Found = Awaited<ReturnType<ClusterNames["remote"]>>;

export class RemoteTunnels {
  private readonly cache = new Map<string, { at: number; tunnel?: Tunnel; links: Mux[] }>();
  private readonly lookups = new Map<string, Promise<Answer>>();
  /** What is known of the members on other nodes of the pools this node has members of, by name. */
  private readonly poolMembers = new Map<string, { at: number; members: Tunnel[]; links: Mux[] }>();
  private readonly memberLookups = new Set<string>();
  private readonly failures = quietWarnings(FAILURE_LOG_MS);
  /** Changes told of each name (forget): an answer asked for before the latest is not kept. */
  private readonly changes = new Map<string, number>();
  /** The link each stand-in was made on: one made on a link since closed is made again. */
  private readonly linkOf = new WeakMap<Tunnel, Mux>();

  constructor(
    private readonly names: ClusterNames,
    private readonly relay: RelayOut | undefined,
    private readonly registry: Registry,
    private readonly domain: string,
    private readonly maxLookups = DEFAULT_RELAY_LOOKUPS,
  ) {}

  find(name: string): Promise<Answer> | Answer {
    const hit = this.cache.get(name);
    if (hit && Date.now() - hit.at < REMOTE_CACHE_MS && !hit.links.some((l) => l.closed)) return hit.tunnel;
    const running = this.lookups.get(name);
    if (running) return running;
    if (this.lookups.size + this.memberLookups.size >= this.maxLookups) return lookupsBusyPage();
    const lookup = this.look(name).finally(() => this.lookups.delete(name));
    this.lookups.set(name, lookup);
    return lookup;
  }

  /**
   * The members elsewhere of a pool this node has members of, as last
   * learned: asked again in the background when a second old (or told of a
   * change), so a visitor never waits on the database for them.
   */
  poolOthers(name: string): readonly Tunnel[] {
    const known = this.poolMembers.get(name);
    if ((!known || Date.now() - known.at >= REMOTE_CACHE_MS || known.links.some((l) => l.closed)) && !this.memberLookups.has(name) && this.lookups.size + this.memberLookups.size < this.maxLookups) {
      this.memberLookups.add(name);
      const change = this.changes.get(name);
      void this.lookMembers(name, known?.members ?? []).finally(() => {
        this.memberLookups.delete(name);
        // told of a change while asking: the answer may be from before it
        if (this.changes.get(name) !== change) this.poolOthers(name);
      });
    }
    return known?.members ?? [];
  }

  /**
   * Another node said a pool's members changed: what is known of them is
   * old now, and asked for again at once (a member leaving the rotation
   * gets nothing new from this node a moment later, long before its agent
   * goes).
   */
  forget(name: string): void {
    if (this.changes.size >= REMOTE_CACHE_MAX) this.changes.clear();
    this.changes.set(name, (this.changes.get(name) ?? 0) + 1);
    this.cache.delete(name);
    const known = this.poolMembers.get(name);
    if (!known) return;
    known.at = 0;
    this.poolOthers(name);
  }

  private remember(name: string, change: number | undefined, tunnel?: Tunnel, links: Mux[] = []): void {
    // told of a change while asking: this answer serves the visitors who waited for it, and is not kept
    if (this.changes.get(name) !== change) return;
    if (this.cache.size >= REMOTE_CACHE_MAX) this.cache.clear();
    this.cache.set(name, { at: Date.now(), tunnel, links });
  }

  private async ask(name: string): Promise<Found | Error> {
    try {
      return await this.names.remote(name);
    } catch (err) {
      // the database is out of reach: this node's own tunnels go on; others' cannot be found now
      this.failures("lookup", "cluster lookup failed", { err: String(err) });
      return err instanceof Error ? err : new Error(String(err));
    }
  }

  private async look(name: string): Promise<Answer> {
    const change = this.changes.get(name);
    const found = await this.ask(name);
    const host = name.includes(".") ? name : `${name}.${this.domain}`; // a custom hostname is as it is
    if (found instanceof Error) return badGatewayPage(host, "This node cannot look up the cluster's tunnels now.");
    if (!found) return void this.remember(name, change);
    if ("pool" in found) {
      if (!this.relay) return badGatewayPage(host, "Its agents are on other nodes, which this node cannot reach (no --node-url or --cluster-secret).");
      // a pool with no member here: its members elsewhere, in turn; none in rotation is the pool's own 502
      const { members, links } = await this.standIns(name, found.pool.members, []);
      const pool = new TunnelPool<Tunnel>(found.pool.balance, found.pool.userId);
      for (const m of members) pool.add(m);
      const head = this.registry.newTunnel("http", { subdomain: name }, { userId: found.pool.userId, username: "", tokenId: 0 }, false);
      head.relayed = true;
      head.pool = pool;
      this.remember(name, change, head, links);
      return head;
    }
    const tunnel = found.tunnel;
    if (!this.relay || !tunnel.nodeUrl) return badGatewayPage(host, "Its agent is on another node, which this node cannot reach (no --node-url or --cluster-secret).");
    const link = await this.relay.link(tunnel.nodeId, tunnel.nodeUrl);
    if (!link) return badGatewayPage(host, "Its agent is on another node, which does not answer now.");
    const standIn = this.standIn(name, tunnel, link);
    this.remember(name, change, standIn, [link]);
    return standIn;
  }

  private async lookMembers(name: string, before: Tunnel[]): Promise<void> {
    const found = await this.ask(name);
    // a failed lookup keeps what was known, for a second more
    const pool = found instanceof Error ? undefined : found && "pool" in found ? found.pool : { balance: "round-robin" as const, userId: 0, members: [] };
    const known = pool ? await this.standIns(name, pool.members, before) : { members: before, links: [] };
    // in a pool of their own, so that the requests in flight to each are counted (least-requests)
    if (pool) {
      const counted = new TunnelPool<Tunnel>(pool.balance, pool.userId);
      for (const m of known.members) counted.add(m);
    }
    if (this.poolMembers.size >= REMOTE_CACHE_MAX) this.poolMembers.clear();
    this.poolMembers.set(name, { at: Date.now(), ...known });
  }

  /** Stand-ins for a pool's members elsewhere, reached through a link to each one's node; one kept from `before` keeps its requests in flight. */
  private async standIns(name: string, members: (RemoteTunnel & { row: string })[], before: Tunnel[]): Promise<{ members: Tunnel[]; links: Mux[] }> {
    const out: Tunnel[] = [];
    const links: Mux[] = [];
    if (!this.relay) return { members: out, links };
    for (const m of members) {
      if (!m.nodeUrl) continue;
      const link = await this.relay.link(m.nodeId, m.nodeUrl);
      if (!link) continue;
      links.push(link);
      const kept = before.find((t) => t.id === m.row && this.linkOf.get(t) === link);
      out.push(kept ?? this.standIn(name, m, link, m.row));
    }
    return { members: out, links };
  }

  private standIn(name: string, found: RemoteTunnel, link: Mux, id?: string): Tunnel {
    const tunnel = this.registry.newTunnel(found.protocol ?? "http", { subdomain: name }, found, found.skipWarning, id);
    tunnel.responseTimeoutMs = found.responseTimeoutMs;
    tunnel.relayed = true;
    // the switches its tunnel allows are known on its node, which takes off the others (relay.ts)
    tunnel.allowUpgrade = "any";
    tunnel.agent = this.relay!.agentFor(link, found);
    this.linkOf.set(tunnel, link);
    return tunnel;
  }
}
