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
import type { Cluster } from "./cluster.ts";
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

export class RemoteTunnels {
  private readonly cache = new Map<string, { at: number; tunnel?: Tunnel; link?: Mux }>();
  private readonly lookups = new Map<string, Promise<Answer>>();
  private readonly failures = quietWarnings(FAILURE_LOG_MS);

  constructor(
    private readonly cluster: Cluster,
    private readonly relay: RelayOut | undefined,
    private readonly registry: Registry,
    private readonly domain: string,
    private readonly maxLookups = DEFAULT_RELAY_LOOKUPS,
  ) {}

  find(name: string): Promise<Answer> | Answer {
    const hit = this.cache.get(name);
    if (hit && Date.now() - hit.at < REMOTE_CACHE_MS && !hit.link?.closed) return hit.tunnel;
    const running = this.lookups.get(name);
    if (running) return running;
    if (this.lookups.size >= this.maxLookups) return lookupsBusyPage();
    const lookup = this.look(name).finally(() => this.lookups.delete(name));
    this.lookups.set(name, lookup);
    return lookup;
  }

  private remember(name: string, tunnel?: Tunnel, link?: Mux): void {
    if (this.cache.size >= REMOTE_CACHE_MAX) this.cache.clear();
    this.cache.set(name, { at: Date.now(), tunnel, link });
  }

  private async look(name: string): Promise<Answer> {
    let found: Awaited<ReturnType<Cluster["remote"]>>;
    try {
      found = await this.cluster.remote(name);
    } catch (err) {
      // the database is out of reach: this node's own tunnels go on; others' cannot be found now
      this.failures("lookup", "cluster lookup failed", { err: String(err) });
      return badGatewayPage(name.includes(".") ? name : `${name}.${this.domain}`, "This node cannot look up the cluster's tunnels now.");
    }
    if (!found) return void this.remember(name);
    const host = name.includes(".") ? name : `${name}.${this.domain}`; // a custom hostname is as it is
    if (!this.relay || !found.nodeUrl) return badGatewayPage(host, "Its agent is on another node, which this node cannot reach (no --node-url or --cluster-secret).");
    const link = await this.relay.link(found.nodeId, found.nodeUrl);
    if (!link) return badGatewayPage(host, "Its agent is on another node, which does not answer now.");
    const tunnel = this.registry.newTunnel(found.protocol ?? "http", { subdomain: name }, found, found.skipWarning);
    tunnel.responseTimeoutMs = found.responseTimeoutMs;
    tunnel.relayed = true;
    tunnel.agent = this.relay.agentFor(link, found);
    this.remember(name, tunnel, link);
    return tunnel;
  }
}
