/**
 * The handshake's rules (admission.ts) asked again of what is live: after
 * an admin change that may narrow what someone may do, of each session it
 * concerns, and for each stream a connector opens. What no longer holds
 * comes back as the refusal the handshake would give now, with its code;
 * closing is the edge's job. The same rule functions as the handshake's,
 * in the handshake's order: the device (a token, an SSH key), the user, the protocols, the proxy,
 * max_devices, max_tunnels, then each tunnel's own (require_auth, its
 * reserved subdomain, its custom hostname) and a connector's share.
 *
 * What is measured rather than set (the traffic quota) is judged by its own
 * round every second (edge/quota.ts).
 */
import type { UserRow } from "../db/schema.ts";
import { isNamedKind, isPrivateKind } from "../protocol/kinds.ts";
import type { Protocol } from "../validate/fields.ts";
import { hasAuthentication } from "../validate/access.ts";
import { authRefusal, hostnameRefusal, protocolRefusal, proxyRefusal, reservedRefusal, type AdmissionRequest, type Admitted, type LiveView } from "./admission.ts";
import { deviceRefusal } from "./devices.ts";
import { AppError } from "./errors.ts";
import type { Core } from "./index.ts";

/** A live session as the rules see it again. */
export interface LiveSession {
  /** null: tunnels its token holds in grace (their agent dropped), judged as its session would be. */
  id: string | null;
  tokenId: number;
  /** Its HELLO said it came through a proxy. */
  proxy: boolean;
  tunnels: LiveTunnelFacts[];
  /** A connector's session (`burrow connect`): the private tunnel it reaches. */
  connects?: { ownerId: number; name: string };
}

export interface LiveTunnelFacts {
  id: string;
  protocol: Protocol;
  subdomain?: string;
  hostname?: string;
  private: boolean;
  /** Its visitors sign in (basic auth or OIDC). */
  authenticates: boolean;
}

export interface Judgement {
  /** The user as they are now, for what the edge applies in place (allow_cidrs, skip_warning); undefined when deleted. */
  user?: UserRow;
  /** Sessions no longer allowed at all (their token, their user, their connection, a connector's share). */
  sessions: Map<LiveSession, AppError>;
  /** Tunnels no longer allowed, by id; their sessions may go on with the others. */
  tunnels: Map<string, AppError>;
}

/** `userId`'s sessions (of this node) judged again, each by the rules of its handshake. */
export async function judgeLive(core: Core, live: LiveView, userId: number, sessions: LiveSession[]): Promise<Judgement> {
  const verdict: Judgement = { sessions: new Map(), tunnels: new Map() };
  let user: UserRow;
  try {
    user = await core.users.get(userId);
  } catch (err) {
    if (!(err instanceof AppError && err.code === "NOT_FOUND")) throw err;
    for (const s of sessions) verdict.sessions.set(s, new AppError("USER_DISABLED", "the user was deleted"));
    return verdict;
  }
  verdict.user = user;
  const refuse = (s: LiveSession, err: AppError | undefined) => err !== undefined && !verdict.sessions.has(s) && verdict.sessions.set(s, err);
  const refuseTunnel = (id: string, err: AppError | undefined) => err !== undefined && !verdict.tunnels.has(id) && verdict.tunnels.set(id, err);

  for (const s of sessions) refuse(s, await deviceRefusal(core, s.tokenId));
  for (const s of sessions) refuse(s, user.enabled ? undefined : new AppError("USER_DISABLED", `user '${user.username}' is disabled`));
  for (const s of sessions) for (const t of s.tunnels) refuseTunnel(t.id, protocolRefusal(user, t.protocol));
  for (const s of sessions) refuse(s, s.id === null ? undefined : proxyRefusal(user, s.proxy));
  if (user.maxDevices > 0 || user.maxTunnels > 0) await judgeLimits(live, user, sessions, refuse, refuseTunnel);
  for (const s of sessions) {
    if (verdict.sessions.has(s)) continue;
    if (s.connects) {
      refuse(s, await connectorRefusal(core, user, s.connects.ownerId, s.connects.name));
      continue;
    }
    for (const t of s.tunnels) {
      if (verdict.tunnels.has(t.id)) continue;
      refuseTunnel(t.id, authRefusal(user, t.protocol, t.private, t.authenticates));
      if (t.subdomain !== undefined) refuseTunnel(t.id, await reservedRefusal(core, user, t.subdomain));
      if (t.hostname !== undefined) refuseTunnel(t.id, await hostnameRefusal(core, user, t.hostname));
    }
  }
  return verdict;
}

/**
 * A handshake's admission asked again before its tunnels go live, when an
 * admin change was heard while admission read the state (edge/agent-handshake.ts):
 * the same judgement as a live session's. Throws the refusal of the whole
 * request (of any tunnel, unless the request is partial); otherwise the
 * admission with the user as they are now (their allow_cidrs and
 * skip_warning are what the tunnels take) and the tunnels refused now in
 * place of their plans.
 */
export async function rejudgeAdmitted(core: Core, live: LiveView, admitted: Admitted, req: AdmissionRequest): Promise<Admitted> {
  const facts: LiveSession = { id: "handshake", tokenId: admitted.token.id, proxy: req.proxy, tunnels: [] };
  admitted.tunnels.forEach((t, i) => {
    if (t instanceof AppError) return;
    const asked = req.tunnels[i]!;
    facts.tunnels.push({
      id: String(i),
      protocol: t.protocol,
      ...(isNamedKind(t) ? { ...(t.subdomain !== undefined ? { subdomain: t.subdomain } : {}), ...(t.hostname !== undefined ? { hostname: t.hostname } : {}) } : {}),
      private: isPrivateKind(t) && t.private !== undefined,
      authenticates: asked.protocol === "http" && hasAuthentication(asked.access),
    });
  });
  const verdict = await judgeLive(core, live, admitted.user.id, [facts]);
  const whole = verdict.sessions.get(facts);
  if (whole) throw whole;
  const user = verdict.user!;
  const tunnels = admitted.tunnels.map((t, i) => {
    const refused = verdict.tunnels.get(String(i));
    if (refused && !req.partial) throw refused;
    if (refused || t instanceof AppError) return refused ?? t;
    return t.protocol === "http" && t.skipWarning && !user.skipWarning ? { ...t, skipWarning: false } : t;
  });
  const granted = tunnels.find((t) => !(t instanceof AppError));
  if (!granted) throw tunnels[0] as AppError;
  return { ...admitted, user, tunnels };
}

/**
 * A connector's standing now, for each stream it opens: its token (when
 * known), its user, the private tunnel still shared with it (NOT_SHARED,
 * the owner's can_share included) and its protocol (PROTOCOL_DENIED).
 * Undefined: it may.
 */
export async function judgeConnector(core: Core, connector: { userId: number; tokenId?: number }, ownerId: number, name: string): Promise<AppError | undefined> {
  if (connector.tokenId !== undefined) {
    const revoked = await deviceRefusal(core, connector.tokenId);
    if (revoked) return revoked;
  }
  let user: UserRow;
  try {
    user = await core.users.get(connector.userId);
  } catch (err) {
    if (err instanceof AppError && err.code === "NOT_FOUND") return new AppError("USER_DISABLED", "the user was deleted");
    throw err;
  }
  if (!user.enabled) return new AppError("USER_DISABLED", `user '${user.username}' is disabled`);
  return connectorRefusal(core, user, ownerId, name);
}

async function connectorRefusal(core: Core, user: UserRow, ownerId: number, name: string): Promise<AppError | undefined> {
  try {
    const { declared } = await core.privateShares.reachById(user, ownerId, name);
    return protocolRefusal(user, declared.protocol, "use");
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
}

/**
 * A lowered max_devices or max_tunnels: the user's live tunnels over every
 * node, oldest first, keep their place up to the limit; the newest beyond
 * it go (DEVICE_LIMIT: every session of a token beyond the oldest
 * max_devices tokens; TUNNEL_LIMIT: each tunnel beyond the oldest
 * max_tunnels). Every node ranks the same list, so each closes its own
 * share of the newest and no more. Only what the list holds is judged: a
 * tunnel still on its way into it is not counted, nor closed.
 */
async function judgeLimits(
  live: LiveView,
  user: UserRow,
  sessions: LiveSession[],
  refuse: (s: LiveSession, err: AppError) => void,
  refuseTunnel: (id: string, err: AppError) => void,
): Promise<void> {
  const all = [...((await live.userTunnels?.(user.id)) ?? [])].sort((a, b) => a.since - b.since || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  if (user.maxDevices > 0) {
    const tokens = [...new Set(all.map((t) => t.tokenId))];
    const beyond = new Set(tokens.slice(user.maxDevices));
    for (const s of sessions) {
      // a connector's session holds no tunnel, and its handshake does not count devices
      if (s.id !== null && !s.connects && beyond.has(s.tokenId)) refuse(s, new AppError("DEVICE_LIMIT", `user '${user.username}' may have ${user.maxDevices} devices connected now; this one connected after them`));
    }
  }
  if (user.maxTunnels > 0) {
    for (const t of all.slice(user.maxTunnels)) {
      if (t.here !== undefined) refuseTunnel(t.here, new AppError("TUNNEL_LIMIT", `user '${user.username}' may have ${user.maxTunnels} tunnels open now; this one opened after them`));
    }
  }
}
