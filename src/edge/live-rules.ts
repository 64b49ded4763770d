/**
 * What is live, judged again by the handshake's rules after an admin change
 * (core/live-admission.ts), and the verdicts carried out here: a session no
 * longer allowed is closed with the handshake's code, a tunnel no longer
 * allowed is closed alone when its agent can be told so (REVOKE), tunnels
 * held in grace go, and the user's settings a live tunnel carries
 * (allow_cidrs, skip_warning) are taken in place; the tunnel's visits that
 * stay (connections, pipes, streams) are judged again by its new IP rules
 * (judgement/live-visits.ts). With several nodes each
 * node does this for its own sessions, told by the node where the change
 * was made (cluster/messages.ts `rules`).
 *
 * And each connector's standing for the streams it opens (a `burrow
 * connect` connection, here or relayed from another node): judged by the
 * connector's rules, kept until an admin change or a private tunnel's new
 * declaration makes it stale, and never longer than STANDING_MS, so a
 * change no node was told of reaches the next stream within that too.
 */
import type { LiveView } from "../core/admission.ts";
import type { AppError } from "../core/errors.ts";
import type { Core } from "../core/index.ts";
import { judgeConnector, judgeLive, type LiveSession } from "../core/live-admission.ts";
import type { RulesChange } from "../core/live.ts";
import type { UserRow } from "../db/schema.ts";
import { databaseUnavailable } from "../db/unavailable.ts";
import { log, quietWarnings } from "../log.ts";
import { isPortKind } from "../protocol/kinds.ts";
import { cidrs } from "../validate/fields.ts";
import { hostnameCovers } from "../validate/hostname.ts";
import { AccessPolicy, flagsJudge } from "./access/policy.ts";
import { withFlags } from "./traffic-policy/tunnel-policy.ts";
import type { AgentLink, HeardChange, LiveJudge, Registry, Tunnel } from "./registry.ts";
import type { Admitted } from "../core/admission.ts";

/** The longest a connector's standing is kept without being asked again (admin changes make it stale at once). */
export const STANDING_MS = 2_000;
/** Standings kept at most (the cache is cleared past it). */
const STANDINGS_MAX = 10_000;
/** A failure of one kind is logged at most this often. */
const failures = quietWarnings(10_000);

/** A session (or tunnels held in grace) as judged, with what it is here. */
interface Concerned {
  facts: LiveSession;
  link?: AgentLink;
  tunnels: Tunnel[];
}

export class LiveRules implements LiveJudge {
  /** Connectors' standings by connector and private tunnel. */
  private readonly standings = new Map<string, { at: number; refusal: AppError | undefined }>();
  private readonly asking = new Map<string, Promise<AppError | undefined>>();
  /** Bumped by each forget(): an answer asked for before it is not kept. */
  private generation = 0;

  constructor(
    private readonly core: Core,
    private readonly registry: Registry,
    /** What the limits count: this node's registry, or the cluster's. */
    private readonly live: LiveView,
  ) {}

  async changed(change: RulesChange): Promise<void> {
    this.forget();
    const byUser = new Map<number, Concerned[]>();
    for (const c of this.concerned(change)) {
      const userId = c.link?.userId ?? c.tunnels[0]!.userId;
      byUser.set(userId, [...(byUser.get(userId) ?? []), c]);
    }
    await Promise.all(
      [...byUser].map(([userId, concerned]) =>
        this.judge(userId, concerned, "userId" in change && change.userId === userId).catch((err) => {
          // what was live stays as it was until the next change, or the handshake after a reconnect
          if (databaseUnavailable(err)) failures("unavailable", "live tunnels not judged again: the database does not answer", { user: userId, err: String(err) });
          else failures("failed", "live tunnels not judged again", { user: userId, err: String(err) });
        }),
      ),
    );
  }

  forget(): void {
    this.generation++;
    this.standings.clear();
    this.asking.clear();
  }

  connector(c: { userId: number; tokenId?: number }, ownerId: number, name: string): AppError | undefined | Promise<AppError | undefined> {
    const key = `${c.userId}/${c.tokenId ?? ""}/${ownerId}/${name}`;
    const known = this.standings.get(key);
    if (known && Date.now() - known.at < STANDING_MS) return known.refusal;
    const asked = this.asking.get(key);
    if (asked) return asked;
    const generation = this.generation;
    const asking = judgeConnector(this.core, c, ownerId, name).then(
      (refusal) => {
        if (generation !== this.generation) return refusal;
        if (this.standings.size >= STANDINGS_MAX) this.standings.clear();
        this.standings.set(key, { at: Date.now(), refusal });
        return refusal;
      },
      (err) => {
        // no admin change can be made while the database does not answer: what was known last still holds
        if (known && databaseUnavailable(err)) return known.refusal;
        throw err;
      },
    );
    const settled = () => {
      if (this.asking.get(key) === asking) this.asking.delete(key);
    };
    asking.then(settled, settled);
    this.asking.set(key, asking);
    return asking;
  }

  /** The sessions and grace-held tunnels of this node that `change` may narrow. */
  private concerned(change: RulesChange): Concerned[] {
    const hit: (t: Tunnel) => boolean =
      "hostname" in change
        ? (t) => t.hostname !== undefined && hostnameCovers(change.hostname, t.hostname)
        : "subdomain" in change
          ? (t) => t.subdomain === change.subdomain
          : (t) => t.userId === change.userId;
    const out: Concerned[] = [];
    for (const { link, tunnels } of this.registry.liveSessions()) {
      const mine = "userId" in change && (link.userId === change.userId || link.connects?.ownerId === change.userId);
      if (!mine && !tunnels.some(hit)) continue;
      out.push({ link, tunnels, facts: { id: link.sessionId, tokenId: link.tokenId, proxy: link.proxy ?? false, tunnels: tunnels.map(factsOf), ...(link.connects ? { connects: link.connects } : {}) } });
    }
    for (const t of this.registry.graceTunnels()) {
      if (hit(t)) out.push({ tunnels: [t], facts: { id: null, tokenId: t.tokenId, proxy: false, tunnels: [factsOf(t)] } });
    }
    return out;
  }

  private async judge(userId: number, concerned: Concerned[], settingsChanged: boolean): Promise<void> {
    const verdict = await judgeLive(this.core, this.live, userId, concerned.map((c) => c.facts));
    if (verdict.user && settingsChanged) this.takeSettings(verdict.user, concerned);
    for (const c of concerned) {
      const refused = verdict.sessions.get(c.facts);
      if (refused) {
        log.info("live session closed by an admin change", { user: userId, session: c.facts.id ?? "grace", code: refused.code });
        if (c.link) this.registry.closeSession(c.link.sessionId, refused.code, refused.message);
        else for (const t of c.tunnels) this.registry.remove(t);
        continue;
      }
      for (const t of c.tunnels) {
        const gone = verdict.tunnels.get(t.id);
        if (!gone) continue;
        log.info("live tunnel closed by an admin change", { user: userId, tunnel: t.subdomain ?? t.hostname ?? t.privateName ?? t.port, code: gone.code });
        this.registry.closeTunnel(t, gone.code, gone.message);
      }
    }
  }

  /** The user's settings that live tunnels carry: a new allow_cidrs list (the agent's own rules kept), skip_warning off. */
  private takeSettings(user: UserRow, concerned: Concerned[]): void {
    const allow = cidrs(user.allowCidrs);
    for (const c of concerned) {
      for (const t of c.tunnels) {
        if (t.userId !== user.id) continue;
        if ((t.access?.userAllowCidrs ?? []).join() !== allow.join()) {
          t.access = AccessPolicy.withUserAllowCidrs(t.access, t.subdomain ?? String(t.port), allow, flagsJudge(t.protocol, t.privateName !== undefined));
          // its flags layer made again with them: the next request and connection meet the new list
          withFlags(t);
          // what was let through before and stays (a connection, a pipe, a stream) meets the new rules too
          const ended = t.liveVisits?.rejudge(t) ?? 0;
          if (ended > 0) log.info("live connections closed by an admin change", { user: user.id, tunnel: t.subdomain ?? t.hostname ?? t.privateName ?? t.port, closed: ended, code: "ADDRESS_REFUSED" });
        }
        if (!user.skipWarning) t.skipWarning = false;
      }
    }
  }
}

/** Whether changes heard during a handshake may narrow what it was admitted to: its user's, its token's, or its names'. */
export function concerns(changes: readonly HeardChange[] | "many", admitted: Admitted): boolean {
  if (changes === "many") return true;
  for (const c of changes) {
    if ("userId" in c ? c.userId === admitted.user.id : "tokenId" in c ? c.tokenId === admitted.token.id : false) return true;
    for (const t of admitted.tunnels) {
      if (t instanceof Error || isPortKind(t)) continue;
      if ("subdomain" in c && t.subdomain === c.subdomain) return true;
      if ("hostname" in c && t.hostname !== undefined && hostnameCovers(c.hostname, t.hostname)) return true;
    }
  }
  return false;
}

function factsOf(t: Tunnel): LiveSession["tunnels"][number] {
  return {
    id: t.id,
    protocol: t.protocol,
    ...(t.subdomain !== undefined ? { subdomain: t.subdomain } : {}),
    ...(t.hostname !== undefined ? { hostname: t.hostname } : {}),
    private: t.privateName !== undefined,
    authenticates: t.access?.authenticates ?? false,
  };
}

