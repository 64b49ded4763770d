/**
 * Who may open which tunnels: the handshake's checks, in their fixed order,
 * each refusing with its own code. Pure rules over the database and a view
 * of what is live; binding ports is the edge's job (PORT_UNAVAILABLE).
 */
import * as v from "valibot";
import { normalizeHostname } from "../validate/hostname.ts";

/** How a pool spreads its requests (edge/pool.ts). */
export type PoolBalance = "round-robin" | "least-requests";
import type { TokenRow, UserRow } from "../db/schema.ts";
import { isPrivateKind, KINDS, type TunnelKind } from "../protocol/kinds.ts";
import type { PrivateRequest, TunnelRequest } from "../protocol/messages.ts";
import type { PrivateName } from "./private-shares.ts";
import { hasAuthentication } from "../validate/access.ts";
import { checkAccess } from "./access.ts";
import { keyDevice, keyOfDevice } from "./device-ids.ts";
import { AppError } from "./errors.ts";
import { protocolList, subdomain as subdomainRule, type Protocol } from "../validate/fields.ts";
import type { Core } from "./index.ts";

type Answer<T> = T | Promise<T>;

/**
 * What is live, as admission needs it: the edge's registry on one node, the
 * shared registry with several (whose answers take a query, hence Answer).
 */
export interface LiveView {
  /** Ids of the user's tokens that have a live agent connection. */
  liveTokenIds(userId: number): Answer<Set<number>>;
  /** The user's live tunnels, not counting those of the session `except`. */
  liveTunnelCount(userId: number, except?: string): Answer<number>;
  /** Bytes counted live but not yet written to the database. */
  unflushedBytes(userId: number): Answer<number>;
  /**
   * Who holds a subdomain: a live tunnel, or a dropped one kept for its
   * token during the grace period. `sessionId` is null while in grace.
   */
  subdomainHolder(subdomain: string): Answer<{ tokenId: number; sessionId: string | null; pool?: { userId: number } } | undefined>;
  /** The token of a live session, or undefined when there is no such session. */
  sessionTokenId(sessionId: string): Answer<number | undefined>;
  /** Who holds the user's private tunnel `name` (live, or in grace: sessionId null); none on a view that has no private tunnels. */
  privateHolder?(ownerId: number, name: string): Answer<{ tokenId: number; sessionId: string | null } | undefined>;
  /**
   * The user's live tunnels on every node, each with its token and since
   * when it is live (ms), `key` one over the cluster; `here`: the tunnel's
   * id when this node holds it. What a lowered max_tunnels or max_devices
   * keeps (the oldest) and closes (live-admission.ts).
   */
  userTunnels?(userId: number): Answer<{ key: string; here?: string; tokenId: number; since: number }[]>;
}

export interface AdmissionRequest {
  token: string;
  proxy: boolean;
  /** HELLO's tunnel requests, each its kind's (protocol/kinds/): admission reads what a kind's plan needs and leaves the rest (an http tunnel's response timeout, its upgrades) to the edge. */
  tunnels: TunnelRequest[];
  /** Session being resumed: its tunnels will be handed over, so they neither count nor conflict. */
  resume?: string;
  /**
   * Each tunnel on its own: one the rules refuse (its protocol, the tunnel
   * limit, its subdomain) comes back as its AppError and the others are
   * admitted. The checks of the token, the user and the connection still
   * refuse the whole request, and so does a request with no tunnel left.
   */
  partial?: boolean;
  /** Judged only, nothing written: a private tunnel's declaration is checked, not stored (an agent's check, wire.ts CHECK_PATH). */
  dryRun?: boolean;
}

export type PlannedTunnel =
  /**
   * `hostname`: a verified custom hostname it is reached by. A tunnel has a
   * subdomain, a hostname or both: one asked for a hostname and no subdomain
   * has no subdomain.
   */
  | { protocol: "http"; subdomain?: string; hostname?: string; skipWarning: boolean; pool?: PoolBalance; private?: PrivateName }
  /** `pool`: share the port with the user's other pooled tunnels on it (edge/pool.ts), spread as it says. */
  | { protocol: "tcp"; port?: number; pool?: PoolBalance; private?: PrivateName }
  /** Its name is from the same names as http tunnels' (one name, one tunnel, whichever kind). */
  | { protocol: "tls"; subdomain?: string; hostname?: string }
  /** Its port is from the UDP port space, apart from tcp's: tcp 20000 and udp 20000 are two tunnels. */
  | { protocol: "udp"; port?: number; private?: PrivateName };

/**
 * A device proved otherwise than by the HELLO's token: an SSH key whose
 * signature the SSH gateway checked (ssh/). Never read from the wire: the
 * connection that carries the HELLO says it (edge/agent-context.ts).
 */
export interface ProvedDevice {
  sshKey: number;
}

/**
 * The device a handshake is admitted as: a token's row, or an SSH key by its
 * device id (device-ids.ts); what the rules read of it is its id, what the
 * admission hook and token.first_use say of it its name and last use.
 */
export type Device = Pick<TokenRow, "id" | "deviceName" | "lastUsed">;

export interface Admitted {
  user: UserRow;
  /** The device: a token, or an SSH key (ProvedDevice). */
  token: Device;
  /** In the order asked; an AppError only for a partial request's refused tunnels. */
  tunnels: (PlannedTunnel | AppError)[];
  /** The session this connection takes over: the one asked for, only when it is live and of the same token. */
  resume?: string;
}

const RANDOM_SUBDOMAIN_LENGTH = 8;
const RANDOM_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789";

/** The HELLO's device and its user: its token (AUTH_FAILED, TOKEN_DISABLED), or the SSH key the connection proved (KEY_REVOKED once removed). */
async function deviceOf(core: Core, token: string, proved: ProvedDevice | undefined): Promise<{ token: Device; user: UserRow }> {
  if (proved === undefined) return core.tokens.authenticate(token);
  return keyDeviceOf(core, proved.sshKey);
}

/** SSH key `keyId` as a device, with its owner: KEY_REVOKED when it was removed. */
async function keyDeviceOf(core: Core, keyId: number): Promise<{ token: Device; user: UserRow }> {
  const { key, user } = await core.sshKeys.authenticate(keyId);
  return { token: { id: keyDevice(key.id), deviceName: key.name, lastUsed: key.lastUsed }, user };
}

export async function admit(core: Core, req: AdmissionRequest, live: LiveView, proved?: ProvedDevice): Promise<Admitted> {
  const who = await deviceOf(core, req.token, proved); // AUTH_FAILED, TOKEN_DISABLED, KEY_REVOKED
  return admitAs(core, who, req, live);
}

/**
 * A tunnel added to a live session (wire.ts ADD): the same rules as a
 * HELLO's, for the session's device and user as they are now, with no
 * session to resume. `deviceId` is the session's (device-ids.ts): a token's
 * (TOKEN_DISABLED when it was revoked or deleted meanwhile) or an SSH key's
 * (KEY_REVOKED when it was removed). The session's own tunnels count toward
 * max_tunnels and hold their names, as any live tunnel's do.
 */
export async function admitOnSession(core: Core, deviceId: number, req: Omit<AdmissionRequest, "token" | "resume">, live: LiveView): Promise<Admitted> {
  const keyId = keyOfDevice(deviceId);
  const who = keyId !== undefined ? await keyDeviceOf(core, keyId) : await tokenDeviceOf(core, deviceId);
  return admitAs(core, who, { ...req, token: "" }, live);
}

/** Token `tokenId` as a device, with its user, read again now: TOKEN_DISABLED when it was revoked or is gone. */
async function tokenDeviceOf(core: Core, tokenId: number): Promise<{ token: Device; user: UserRow }> {
  try {
    const token = await core.tokens.get(tokenId);
    if (!token.enabled) throw new AppError("TOKEN_DISABLED", "the token has been revoked");
    return { token, user: await core.users.get(token.userId) };
  } catch (err) {
    if (err instanceof AppError && err.code === "NOT_FOUND") throw new AppError("TOKEN_DISABLED", "the token is gone");
    throw err;
  }
}

/** The rules after the device is known: `req.token` is not read again. */
async function admitAs(core: Core, { token, user }: { token: Device; user: UserRow }, req: AdmissionRequest, live: LiveView): Promise<Admitted> {
  // a session id says nothing about who may replace it: only its own token resumes it
  const resume = req.resume !== undefined && (await live.sessionTokenId(req.resume)) === token.id ? req.resume : undefined;
  if (!user.enabled) throw new AppError("USER_DISABLED", `user '${user.username}' is disabled`);

  const protocolDenied = (t: AdmissionRequest["tunnels"][number]) => protocolRefusal(user, t.protocol);
  if (!req.partial) {
    for (const t of req.tunnels) {
      const denied = protocolDenied(t);
      if (denied) throw denied;
    }
  }
  const proxyDenied = proxyRefusal(user, req.proxy);
  if (proxyDenied) throw proxyDenied;

  if (user.maxDevices > 0) {
    const others = [...(await live.liveTokenIds(user.id))].filter((id) => id !== token.id);
    if (others.length + 1 > user.maxDevices) {
      throw new AppError("DEVICE_LIMIT", `user '${user.username}' already has ${others.length} of ${user.maxDevices} devices connected`);
    }
  }
  const current = user.maxTunnels > 0 ? await live.liveTunnelCount(user.id, resume) : 0;
  /** `open`: those already open, and in a partial HELLO those of it granted before this one. */
  const tunnelLimit = (open = current) => new AppError("TUNNEL_LIMIT", `user '${user.username}' has ${open} of ${user.maxTunnels} tunnels open`);
  if (user.maxTunnels > 0 && !req.partial && current + req.tunnels.length > user.maxTunnels) throw tunnelLimit();
  if (user.trafficLimit > 0) {
    const used = (await core.traffic.usedInPeriod(user)) + (await live.unflushedBytes(user.id));
    if (used >= user.trafficLimit) {
      throw new AppError("TRAFFIC_EXCEEDED", `user '${user.username}' has used ${used} of ${user.trafficLimit} bytes this ${user.trafficPeriod} period`);
    }
  }

  const claimed = new Set<string>();
  let room = user.maxTunnels > 0 ? user.maxTunnels - current : Infinity;
  const plan = async (t: AdmissionRequest["tunnels"][number]): Promise<PlannedTunnel> => {
    const badAccess = checkAccess(t.access); // CIDR_INVALID, BASIC_AUTH_INVALID, HEADER_RULE_INVALID, OIDC_INVALID
    if (badAccess) throw badAccess;
    // a private tunnel is reached only by signed-in users it is shared with: that is its authentication
    const priv = isPrivateKind(t) ? t.private : undefined;
    const unprotected = authRefusal(user, t.protocol, priv !== undefined, t.protocol === "http" && hasAuthentication(t.access));
    if (unprotected) throw unprotected;
    if (priv && isPrivateKind(t)) {
      const publicOptions = t.protocol === "http" ? t.subdomain !== undefined || t.hostname !== undefined || t.pool === true || t.access !== undefined : t.port !== undefined || (t.protocol === "tcp" && t.pool === true);
      const declared = await planPrivate(core, live, user, token, priv, t.protocol, resume, publicOptions, req.dryRun === true);
      return t.protocol === "http" ? { protocol: "http", skipWarning: false, private: declared } : { protocol: t.protocol, private: declared };
    }
    if (t.protocol === "tcp") return { protocol: "tcp", port: t.port, ...(t.pool ? { pool: t.balance ?? "round-robin" } : {}) };
    if (t.protocol === "udp") return { protocol: "udp", port: t.port };
    const pooled = t.protocol === "http" && t.pool === true;
    const hostname = t.hostname === undefined ? undefined : await checkHostname(core, live, user, token, t.hostname, resume, claimed, pooled);
    if (hostname !== undefined) claimed.add(hostname);
    // a hostname asked for alone is the tunnel's only name; otherwise a subdomain, asked for or random
    const subdomain =
      t.subdomain !== undefined
        ? await checkSubdomain(core, live, user, token, t.subdomain, resume, claimed, pooled)
        : hostname === undefined
          ? await randomFreeSubdomain(core, live, claimed)
          : undefined;
    if (subdomain !== undefined) claimed.add(subdomain);
    const names = { ...(subdomain !== undefined ? { subdomain } : {}), ...(hostname !== undefined ? { hostname } : {}) };
    if (t.protocol === "tls") return { protocol: "tls", ...names };
    return { protocol: "http", ...names, skipWarning: Boolean(t.skipWarning) && user.skipWarning, ...(pooled ? { pool: t.balance ?? "round-robin" } : {}) };
  };
  // one after another, in the order asked: each sees the names those before it claimed
  const planned: (PlannedTunnel | AppError)[] = [];
  for (const t of req.tunnels) {
    if (!req.partial) {
      planned.push(await plan(t));
      continue;
    }
    const denied = protocolDenied(t) ?? (room <= 0 ? tunnelLimit(user.maxTunnels - room) : undefined);
    if (denied) {
      planned.push(denied);
      continue;
    }
    try {
      const p = await plan(t);
      room--;
      planned.push(p);
    } catch (err) {
      if (err instanceof AppError) planned.push(err);
      else throw err;
    }
  }
  const first = planned[0];
  if (planned.every((p) => p instanceof AppError) && first) throw first;
  return { user, token, tunnels: planned, resume };
}

/**
 * A private tunnel: its name and shares declared (core/private-shares.ts:
 * PRIVATE_NAME_INVALID, SHARE_DENIED, SHARE_UNKNOWN_USER), and the name the
 * user's only live one (PRIVATE_NAME_TAKEN; the token's own dropped or
 * resumed tunnel gives it back). It has no public port or name, so no pool,
 * no --remote-port, and for http no --subdomain, --hostname or access rules
 * (the edge never reads its requests: its users are the ones it is shared
 * with).
 */
async function planPrivate(
  core: Core,
  live: LiveView,
  user: UserRow,
  token: Device,
  asked: PrivateRequest,
  protocol: PrivateName["protocol"],
  resume: string | undefined,
  publicOptions: boolean,
  dryRun: boolean,
): Promise<PrivateName> {
  if (publicOptions) {
    const which = protocol === "http" ? "--subdomain, --hostname, --pool and access rules" : "--remote-port and --pool";
    throw new AppError("PRIVATE_NAME_INVALID", `a private tunnel has no public ${KINDS[protocol].reachedBy}: ${which} do not go with --private`);
  }
  const name = asked.name.trim().toLowerCase();
  const holder = await live.privateHolder?.(user.id, name);
  if (holder && !mayTake({ ...holder }, token, user, resume, false)) throw new AppError("PRIVATE_NAME_TAKEN", `you have a private tunnel named '${name}' already`);
  return core.privateShares.declare(user, name, protocol, asked.share ?? [], asked.localPort, { write: !dryRun });
}

async function checkSubdomain(
  core: Core,
  live: LiveView,
  user: UserRow,
  token: Device,
  asked: string,
  resume: string | undefined,
  claimed: Set<string>,
  pooled = false,
): Promise<string> {
  const parsed = v.safeParse(subdomainRule, asked);
  if (!parsed.success) throw new AppError("SUBDOMAIN_INVALID", `'${asked}' is not a valid subdomain: ${parsed.issues[0]?.message}`);
  const name = parsed.output;
  const reserved = await reservedRefusal(core, user, name);
  if (reserved) throw reserved;
  const holder = await live.subdomainHolder(name);
  if ((holder && !mayTake(holder, token, user, resume, pooled)) || claimed.has(name)) throw new AppError("SUBDOMAIN_TAKEN", `'${name}' is in use by another tunnel`);
  return name;
}

/**
 * Whether a name someone holds may be taken: the token's own tunnel comes
 * back to it (dropped, in grace, or from the session it resumes), and a
 * pool of the same user takes another member when this one asks to pool.
 */
function mayTake(holder: { tokenId: number; sessionId: string | null; pool?: { userId: number } }, token: Device, user: UserRow, resume: string | undefined, pooled: boolean): boolean {
  if (holder.tokenId === token.id && (holder.sessionId === null || holder.sessionId === resume)) return true;
  return pooled && holder.pool !== undefined && holder.pool.userId === user.id;
}

/**
 * A custom hostname a tunnel asks for: one name (no wildcard), a verified
 * hostname of the user's or under a verified wildcard of theirs, and never
 * a name another user registered, whoever's wildcard covers it
 * (HOSTNAME_NOT_ALLOWED), and no other tunnel's (HOSTNAME_IN_USE; its own
 * token's dropped or resumed tunnel gives it back, as with subdomains).
 * Hostnames and subdomains share the live names: a hostname has dots, a
 * subdomain never.
 */
async function checkHostname(
  core: Core,
  live: LiveView,
  user: UserRow,
  token: Device,
  asked: string,
  resume: string | undefined,
  claimed: Set<string>,
  pooled = false,
): Promise<string> {
  const checked = normalizeHostname(asked);
  if ("problem" in checked || checked.hostname.startsWith("*.")) {
    throw new AppError("HOSTNAME_NOT_ALLOWED", `'${asked.slice(0, 253)}' is not a hostname a tunnel can have (one DNS name, no wildcard)`);
  }
  const name = checked.hostname;
  const notAllowed = await hostnameRefusal(core, user, name);
  if (notAllowed) throw notAllowed;
  const holder = await live.subdomainHolder(name);
  if ((holder && !mayTake(holder, token, user, resume, pooled)) || claimed.has(name)) throw new AppError("HOSTNAME_IN_USE", `'${name}' is in use by another tunnel`);
  return name;
}

async function randomFreeSubdomain(core: Core, live: LiveView, claimed: Set<string>): Promise<string> {
  for (;;) {
    let name = "";
    for (const byte of crypto.getRandomValues(new Uint8Array(RANDOM_SUBDOMAIN_LENGTH * 2))) {
      if (byte < 252 && name.length < RANDOM_SUBDOMAIN_LENGTH) name += RANDOM_ALPHABET[byte % 36];
    }
    if (name.length < RANDOM_SUBDOMAIN_LENGTH) continue;
    if (core.domains.isSystem(name) || claimed.has(name)) continue;
    if ((await core.domains.ownerOf(name)) !== undefined || (await live.subdomainHolder(name))) continue;
    return name;
  }
}

/**
 * A connector's handshake (`burrow connect owner/name`): its token and user
 * as any agent's (AUTH_FAILED, TOKEN_DISABLED, USER_DISABLED, PROXY_DENIED),
 * then the private tunnel shared with it (NOT_SHARED, the same for every way
 * it is not) and the protocol it may use (PROTOCOL_DENIED). Whether the
 * owner's agent is there now is the edge's to say (TUNNEL_OFFLINE).
 */
export async function admitConnector(
  core: Core,
  req: { token: string; proxy: boolean; target: string },
  proved?: ProvedDevice,
): Promise<{ user: UserRow; token: Device; owner: UserRow; declared: PrivateName }> {
  const { token, user } = await deviceOf(core, req.token, proved);
  if (!user.enabled) throw new AppError("USER_DISABLED", `user '${user.username}' is disabled`);
  const proxyDenied = proxyRefusal(user, req.proxy);
  if (proxyDenied) throw proxyDenied;
  const { owner, declared } = await core.privateShares.reach(user, req.target);
  const denied = protocolRefusal(user, declared.protocol, "use");
  if (denied) throw denied;
  return { user, token, owner, declared };
}

// -- the rules one by one: the handshake's above, and live-admission.ts's for what is live --------

/** PROTOCOL_DENIED: the user's allowed_protocols leave out `protocol` (`verb`: what the message says they may not do). */
export function protocolRefusal(user: UserRow, protocol: string, verb: "open" | "use" = "open"): AppError | undefined {
  if (protocolList(user.allowedProtocols).includes(protocol as Protocol)) return undefined;
  return new AppError("PROTOCOL_DENIED", `user '${user.username}' may not ${verb} ${protocol} tunnels`);
}

/** PROXY_DENIED: the agent came through a proxy and the user's can_use_proxy is off. */
export function proxyRefusal(user: UserRow, proxy: boolean): AppError | undefined {
  return proxy && !user.canUseProxy ? new AppError("PROXY_DENIED", `user '${user.username}' may not connect through a proxy`) : undefined;
}

/**
 * AUTH_REQUIRED: the user's require_auth, and a tunnel that is not private
 * (a private tunnel is reached only by signed-in users: that is its
 * authentication) and has neither basic auth nor OIDC.
 */
export function authRefusal(user: UserRow, protocol: TunnelKind, isPrivate: boolean, authenticates: boolean): AppError | undefined {
  if (!user.requireAuth || isPrivate || authenticates) return undefined;
  return new AppError(
    "AUTH_REQUIRED",
    KINDS[protocol].access === "http"
      ? `user '${user.username}' must protect every tunnel with basic auth or OIDC (--basic-auth or --oidc-issuer)`
      : `user '${user.username}' must protect every tunnel with basic auth or OIDC, which a ${protocol} tunnel cannot carry`,
  );
}

/** SUBDOMAIN_RESERVED: a system name, or one reserved for another user. */
export async function reservedRefusal(core: Core, user: UserRow, name: string): Promise<AppError | undefined> {
  if (core.domains.isSystem(name)) return new AppError("SUBDOMAIN_RESERVED", `'${name}' is a system name`);
  const owner = await core.domains.ownerOf(name);
  return owner !== undefined && owner !== user.id ? new AppError("SUBDOMAIN_RESERVED", `'${name}' is reserved for another user`) : undefined;
}

/** HOSTNAME_NOT_ALLOWED: `name` (one DNS name, kept form) is not, or not under, a verified hostname of the user's. */
export async function hostnameRefusal(core: Core, user: UserRow, name: string): Promise<AppError | undefined> {
  const standing = await core.hostnames.standing(user.id, name);
  if (!("refused" in standing)) return undefined;
  // who holds it is not said: the agent's user may not see other users
  const why = standing.refused === "another user's" ? "is registered to another user (a wildcard never covers another user's name)" : `is not a verified hostname of user '${user.username}'`;
  return new AppError("HOSTNAME_NOT_ALLOWED", `'${name}' ${why}`);
}
