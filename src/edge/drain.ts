/**
 * How the edge stops (SIGTERM, or a server that takes over on the same data
 * dir), in three phases:
 *
 * 1. nothing new: the public, redirect and direct ports stop accepting (the
 *    ports are free at once for the successor), TCP tunnels' listeners
 *    too, and the live names are written down for the successor to hold;
 * 2. agents that understand DRAIN connect again now (to the successor)
 *    while this edge finishes the visitor requests in flight, up to
 *    --drain-timeout; connections that fall idle close meanwhile;
 * 3. the rest are told SERVER_SHUTDOWN, tunnels go, and the traffic is
 *    written down.
 */
import { reachedByName, type NamedKind } from "../protocol/kinds.ts";
import { log } from "../log.ts";
import { WireError } from "../protocol/wire.ts";
import type { AgentSessions } from "./agent-sessions.ts";
import type { DirectListener } from "./direct.ts";
import type { TrafficMeter } from "./meter.ts";
import type { Registry } from "./registry.ts";
import { writeHolds } from "./restart-holds.ts";

/** While draining, how often the edge looks whether requests are still in flight. */
const DRAIN_POLL_MS = 50;

/** What the edge's HTTP listeners are to the drain: the public port (public-port.ts) and the ACME redirect port (public-listener.ts). */
interface Listening {
  pause(): void;
  closeIdle(): number;
  readonly pendingRequests: number;
  stop(force: boolean): Promise<void>;
}

export interface Draining {
  listener: Listening;
  /** The ACME redirect port, beside the public one. */
  redirect?: Listening;
  direct?: DirectListener;
  registry: Registry;
  agents: AgentSessions;
  meter: TrafficMeter;
  /** Where live names are written for the successor. */
  holdsFile?: string;
  drainTimeoutMs: number;
  /** Phase 1: stops what watches and feeds the edge (descriptors, certificate swaps, names wanting certificates). */
  stopWatching(): void;
  /** Phase 3: the edge's periodic work (meter flushes, quotas, idle expiry). */
  stopTimers(): void;
  /** Ends the links to other nodes. */
  closeLinks?(): void;
}

export async function drainEdge(d: Draining): Promise<void> {
  // 1. no new visitors or agents: the ports are free at once for a server that takes over
  d.stopWatching();
  d.listener.pause();
  d.redirect?.pause();
  d.direct?.stop(false);
  for (const t of d.registry.allTunnels()) t.stopAccepting?.();
  if (d.holdsFile) {
    // by name: subdomains, custom hostnames, every member of a pool
    const held = d.registry.allTunnels().filter((t) => t.port === undefined && (t.subdomain !== undefined || t.hostname !== undefined));
    const hold = (t: (typeof held)[number], protocol: NamedKind) => ({
      ...(t.subdomain !== undefined ? { subdomain: t.subdomain } : {}),
      ...(t.hostname !== undefined ? { hostname: t.hostname } : {}),
      protocol,
      ...(t.pool ? { pool: t.pool.balance } : {}),
      userId: t.userId,
      username: t.username,
      tokenId: t.tokenId,
      skipWarning: t.skipWarning,
    });
    writeHolds(
      d.holdsFile,
      held.flatMap((t) => {
        const kind = t.protocol;
        return reachedByName(kind) ? [hold(t, kind)] : [];
      }),
    );
  }
  // agents that understand it connect again now, to the server that takes over, while this
  // one finishes what is in flight; the others are told SERVER_SHUTDOWN at the end
  const told = d.agents.drainAll();
  if (told > 0) log.info("told agents to connect again", { agents: told });
  // 2. requests in flight finish (up to --drain-timeout); connections that fall idle close
  const deadline = Date.now() + d.drainTimeoutMs;
  let inFlight = d.listener.pendingRequests;
  if (inFlight > 0) log.info("draining visitor requests", { in_flight: inFlight, timeout_s: d.drainTimeoutMs / 1000 });
  while ((inFlight = d.listener.pendingRequests) > 0 && Date.now() < deadline) {
    d.listener.closeIdle();
    await Bun.sleep(DRAIN_POLL_MS);
  }
  if (inFlight > 0) log.info("drain timeout: cutting the requests still in flight", { in_flight: inFlight });
  // 3. agents are told why, tunnels go, traffic is written down
  d.stopTimers();
  d.agents.refuseAll(WireError.SERVER_SHUTDOWN, "the server is shutting down");
  // private tunnels held in grace too: their timers would keep the stopped process alive
  for (const t of new Set([...d.registry.allTunnels(), ...d.registry.graceTunnels()])) d.registry.remove(t);
  await d.listener.stop(true);
  await d.redirect?.stop(true);
  d.direct?.stop(true);
  d.closeLinks?.();
  await d.meter.flush();
}
