/**
 * An agent's check (wire.ts CHECK_PATH, protocol/agent-check.ts): what its
 * HELLO would get now, judged by the handshake's own rules and order
 * (version, token, user, then each tunnel: core/admission.ts, and what
 * the edge checks when it places a tunnel: a kind it takes, a port in its
 * range and free), with nothing opened, claimed or written.
 *
 * The handshake throttle holds for it as for a HELLO: a place is reserved
 * before the body is read or the token looked up, and a bad token or a
 * body that is no check counts as a failed handshake. A name or port the
 * same token's agent holds now counts as its own (it would be handed over
 * when that agent reconnects), so `burrow diagnose` next to a running
 * agent does not report its tunnels as taken. Asked with `remote`, it also
 * answers the token's remote config (`burrow diagnose --remote`).
 */
import * as v from "valibot";
import { admit, type LiveView, type PlannedTunnel } from "../core/admission.ts";
import { AppError } from "../core/errors.ts";
import type { HandshakeTicket } from "../core/handshake-throttle.ts";
import type { TokenRow, UserRow } from "../db/schema.ts";
import { databaseUnavailable, reportUnavailable, UNAVAILABLE_MESSAGE, UNAVAILABLE_RETRY_S } from "../db/unavailable.ts";
import { log } from "../log.ts";
import { AgentCheck, MAX_CHECK_BYTES, type AgentCheckAnswer } from "../protocol/agent-check.ts";
import { PROTOCOL_VERSION, WireError } from "../protocol/wire.ts";
import { VERSION } from "../version.ts";
import type { EdgeContext } from "./agent-context.ts";
import { edgeKind } from "./kinds/index.ts";

/** How long a check's body may take to arrive, as a HELLO may take (HANDSHAKE_TIMEOUT_MS). */
export const CHECK_BODY_TIMEOUT_MS = 10_000;

/** The refusals that end a check before its tunnels: the token's and its user's. */
const WHO_REFUSALS = new Set(["AUTH_FAILED", "TOKEN_DISABLED", "USER_DISABLED"]);

type Tunnels = AgentCheckAnswer["tunnels"];

/** An error answer: {"error", "code"}, the code's status; the connection closes after it (as after every check). */
function failure(code: string, message: string, status: number, headers: Record<string, string> = {}): Response {
  return Response.json({ error: message, code }, { status, headers: { "Cache-Control": "no-store", Connection: "close", ...headers } });
}
const appFailure = (err: AppError) => failure(err.code, err.message, err.status, err.headers);

/** The answer to a request for CHECK_PATH from `address` (the client, as the handshake throttle counts it). */
export async function answerAgentCheck(req: Request, address: string, edge: EdgeContext): Promise<Response> {
  if (req.method !== "POST") return failure("METHOD_NOT_ALLOWED", "an agent's check is a POST of JSON", 405, { Allow: "POST" });
  let ticket: HandshakeTicket | undefined;
  if (edge.handshakes) {
    const turn = await edge.handshakes.reserve(address);
    if (turn.refusal) return appFailure(turn.refusal);
    ticket = turn.ticket;
  }
  // the result the throttle is told: a failure's code counts against the address, anything else gives the place back
  let result: string | undefined;
  try {
    const body = await readCheck(req);
    if (typeof body === "string") {
      result = WireError.PROTOCOL_ERROR;
      return failure("BAD_REQUEST", body, 400);
    }
    if (body.version !== PROTOCOL_VERSION) {
      const update = body.version < PROTOCOL_VERSION ? "client" : "server";
      return failure(WireError.VERSION_MISMATCH, `this server speaks protocol version ${PROTOCOL_VERSION}, the agent ${body.version}: please update burrow on the ${update} (burrow update)`, 409);
    }
    const who = await identify(body, edge);
    if (who instanceof AppError) {
      result = who.code;
      return appFailure(who);
    }
    result = "READY";
    return Response.json(await judge(body, who, edge), { headers: { "Cache-Control": "no-store", Connection: "close" } });
  } catch (err) {
    if (databaseUnavailable(err)) {
      reportUnavailable("agent check", err);
      return failure("DATABASE_UNAVAILABLE", UNAVAILABLE_MESSAGE, 503, { "Retry-After": String(UNAVAILABLE_RETRY_S) });
    }
    log.error("agent check failed", { err: String(err) });
    return failure("INTERNAL", "the server failed to handle the check", 500);
  } finally {
    if (result === undefined) ticket?.[Symbol.dispose]();
    else ticket?.ended(result);
  }
}

/** The body as an AgentCheck, or why it is not one (too big, too slow, not JSON, not the shape). */
async function readCheck(req: Request): Promise<AgentCheck | string> {
  const declared = Number(req.headers.get("content-length") ?? "0");
  if (!(declared <= MAX_CHECK_BYTES)) return `the body is larger than ${MAX_CHECK_BYTES} bytes`;
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = req.body?.getReader();
  const timer = setTimeout(() => void reader?.cancel().catch(() => {}), CHECK_BODY_TIMEOUT_MS);
  try {
    for (;;) {
      const { value, done } = reader ? await reader.read() : { value: undefined, done: true };
      if (done) break;
      size += value.byteLength;
      if (size > MAX_CHECK_BYTES) return `the body is larger than ${MAX_CHECK_BYTES} bytes`;
      chunks.push(value);
    }
  } catch {
    return `the body did not arrive whole within ${CHECK_BODY_TIMEOUT_MS / 1000} s`;
  } finally {
    clearTimeout(timer);
  }
  let json: unknown;
  try {
    json = JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return "the body is not JSON";
  }
  const parsed = v.safeParse(AgentCheck, json);
  return parsed.success ? parsed.output : `the body is not an agent's check: ${v.getDotPath(parsed.issues[0]) ?? "its fields"}: ${parsed.issues[0].message}`;
}

interface Who {
  user: UserRow;
  token: TokenRow;
  /** What refuses every tunnel of the agent (its proxy, devices, traffic), or undefined. */
  refusal?: AppError;
}

/** The token and its user (AUTH_FAILED, TOKEN_DISABLED, USER_DISABLED as an AppError), and what would refuse the whole HELLO. */
async function identify(body: AgentCheck, edge: EdgeContext): Promise<Who | AppError> {
  try {
    const { user, token } = await admit(edge.core, { token: body.token, proxy: body.proxy, tunnels: [], partial: true, dryRun: true }, edge.live);
    // A check proves no SSH key, so admission's device is the token's own row.
    return { user, token: token as TokenRow };
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    if (WHO_REFUSALS.has(err.code)) return err;
    const { user, token } = await edge.core.tokens.authenticate(body.token);
    return { user, token, refusal: err };
  }
}

async function judge(body: AgentCheck, who: Who, edge: EdgeContext): Promise<AgentCheckAnswer> {
  const { user, token } = who;
  const { live, core } = edge;
  const mine = (await live.userTunnels?.(user.id))?.filter((t) => t.tokenId === token.id).length ?? 0;
  const view = asThisToken(live, token.id, mine);
  const used = (await core.traffic.usedInPeriod(user)) + (await live.unflushedBytes(user.id));
  return {
    protocol_version: PROTOCOL_VERSION,
    server_version: VERSION,
    token: { id: token.id, device_name: token.deviceName },
    user: {
      username: user.username,
      enabled: user.enabled,
      max_tunnels: user.maxTunnels,
      tunnels_open: await live.liveTunnelCount(user.id),
      max_devices: user.maxDevices,
      devices_connected: (await live.liveTokenIds(user.id)).size,
      allowed_protocols: user.allowedProtocols,
      traffic_limit: user.trafficLimit,
      traffic_used: used,
      traffic_period: user.trafficPeriod,
      can_use_proxy: user.canUseProxy,
      require_auth: user.requireAuth,
    },
    refusal: who.refusal ? { code: who.refusal.code, message: who.refusal.message } : null,
    tunnels: who.refusal ? [] : await judgeTunnels(body, token, view, edge),
    // what CONFIG would send this token's agent: the token proved it is that agent's
    ...(body.remote ? { remote_config: await remoteConfig(token.id, edge) } : {}),
  };
}

/** The token's remote config as CONFIG carries it. */
async function remoteConfig(tokenId: number, edge: EdgeContext): Promise<NonNullable<AgentCheckAnswer["remote_config"]>> {
  const c = await edge.core.tokenConfigs.read(tokenId);
  return { version: c.version, tunnels: c.tunnels };
}

/** Each tunnel as a partial HELLO would have it; when the rules refuse them all, each is asked alone for its own reason. */
async function judgeTunnels(body: AgentCheck, token: TokenRow, view: LiveView, edge: EdgeContext): Promise<Tunnels> {
  if (body.tunnels.length === 0) return [];
  const ask = (tunnels: AgentCheck["tunnels"]) => admit(edge.core, { token: body.token, proxy: body.proxy, tunnels, partial: true, dryRun: true }, view);
  let planned: (PlannedTunnel | AppError)[];
  try {
    planned = (await ask(body.tunnels)).tunnels;
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    // every one refused (admission then throws the first's reason): none claimed a name, so alone each says its own
    planned = [];
    for (const t of body.tunnels) {
      try {
        planned.push((await ask([t])).tunnels[0]!);
      } catch (each) {
        if (!(each instanceof AppError)) throw each;
        planned.push(each);
      }
    }
  }
  const out: Tunnels = [];
  for (const [index, plan] of planned.entries()) {
    if (plan instanceof AppError) {
      out.push({ index, ok: false, code: plan.code, message: plan.message });
      continue;
    }
    const asked = body.tunnels[index]!;
    const placed = await placeable(plan, token, edge);
    if (placed instanceof AppError) {
      out.push({ index, ok: false, code: placed.code, message: placed.message });
      continue;
    }
    const named = "subdomain" in asked && asked.subdomain !== undefined && "subdomain" in plan ? plan.subdomain : undefined;
    const hostname = "hostname" in plan ? plan.hostname : undefined;
    const port = "port" in plan ? plan.port : undefined;
    out.push({
      index,
      ok: true,
      ...(named !== undefined ? { subdomain: named } : {}),
      ...(hostname !== undefined ? { hostname } : {}),
      ...(port !== undefined ? { port } : {}),
      ...(placed.held ? { held_by_this_token: true } : {}),
    });
  }
  return out;
}

/**
 * What the edge would check placing a planned tunnel: a kind this server
 * takes now (tls: a port that passes names through; udp: --udp-ports), a
 * port in its range that no other token's tunnel holds. Whether the
 * kernel lets the port be bound is only known by binding it.
 */
async function placeable(plan: PlannedTunnel, token: TokenRow, edge: EdgeContext): Promise<{ held: boolean } | AppError> {
  if ("private" in plan && plan.private) return { held: false };
  if (plan.protocol === "tls") return edgeKind("tls").unavailable?.(edge, plan) ?? { held: await heldByToken(plan.subdomain ?? plan.hostname, token, edge) };
  if (plan.protocol === "http") return { held: await heldByToken(plan.subdomain ?? plan.hostname, token, edge) };
  const udp = plan.protocol === "udp";
  if (udp && !edge.udpPorts) return new AppError("UDP_UNAVAILABLE", "this server takes no udp tunnels (--udp-ports off)");
  if (plan.port === undefined) return { held: false };
  const { first, last } = udp ? edge.udpPorts!.range : edge.ports.range;
  if (plan.port < first || plan.port > last) return new AppError("PORT_UNAVAILABLE", `port ${plan.port} is outside this server's ${udp ? "UDP" : "TCP"} range ${first}-${last}`);
  const holder = udp ? edge.registry.udpPortHolder(plan.port) : edge.registry.portHolder(plan.port);
  if (!holder) return { held: false };
  if (holder.tokenId === token.id) return { held: holder.agent !== null };
  // a pool of the user's on the port: a pooled tunnel joins it
  if (plan.protocol === "tcp" && plan.pool && holder.pool?.userId === token.userId) return { held: false };
  return new AppError("PORT_UNAVAILABLE", `port ${plan.port} is in use`);
}

async function heldByToken(name: string | undefined, token: TokenRow, edge: EdgeContext): Promise<boolean> {
  if (name === undefined) return false;
  const holder = await edge.live.subdomainHolder(name);
  return holder !== undefined && holder.tokenId === token.id && holder.sessionId !== null;
}

/**
 * The live view as a reconnect of this token's agent meets it: what that
 * agent holds now would be handed back to it (as from grace), and its
 * tunnels do not count against the user's max_tunnels twice.
 */
function asThisToken(live: LiveView, tokenId: number, mine: number): LiveView {
  const own = <H extends { tokenId: number; sessionId: string | null }>(h: H | undefined): H | undefined => (h && h.tokenId === tokenId ? { ...h, sessionId: null } : h);
  return {
    liveTokenIds: (userId) => live.liveTokenIds(userId),
    liveTunnelCount: async (userId, except) => Math.max(0, (await live.liveTunnelCount(userId, except)) - mine),
    unflushedBytes: (userId) => live.unflushedBytes(userId),
    subdomainHolder: async (name) => own(await live.subdomainHolder(name)),
    sessionTokenId: (sessionId) => live.sessionTokenId(sessionId),
    ...(live.privateHolder ? { privateHolder: async (ownerId: number, name: string) => own(await live.privateHolder!(ownerId, name)) } : {}),
    ...(live.userTunnels ? { userTunnels: (userId: number) => live.userTunnels!(userId) } : {}),
  };
}
