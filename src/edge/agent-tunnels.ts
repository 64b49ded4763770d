/**
 * An agent's tunnels: made from what admission granted (a tunnel taken
 * back from grace, or a new one on its name, port, udp port or private
 * name, a pool joined or started), the public addresses READY names, and
 * one tunnel closed alone (REVOKE). The handshake (agent-handshake.ts)
 * decides when; this file knows how.
 */
import { AppError } from "../core/errors.ts";
import type { Admitted, PlannedTunnel } from "../core/admission.ts";
import type { PrivateName } from "../core/private-shares.ts";
import { log } from "../log.ts";
import { isNamedKind, isPortKind, isPrivateKind } from "../protocol/kinds.ts";
import type { GrantedTunnel, Hello, OpenMeta } from "../protocol/messages.ts";
import { FrameType } from "../protocol/wire.ts";
import { cidrs } from "../validate/fields.ts";
import { tunnelAccess, type Providers } from "./access/handshake.ts";
import type { AgentSide, EdgeContext } from "./agent-context.ts";
import { TunnelPool } from "./pool.ts";
import { kindAddress } from "./public-addresses.ts";
import type { Tunnel } from "./registry.ts";
import type { UdpTunnelPort } from "./udp-flows.ts";

type Owner = { userId: number; username: string; tokenId: number };

/** What one HELLO's tunnels are made from. `created`: the new ones so far, removed again if the handshake fails after. */
export interface Grant {
  hello: Hello;
  admitted: Admitted;
  providers: Providers | undefined;
  /** The udp ports bound for it (bindUdpPorts), by the HELLO's index. */
  udp: Map<number, UdpTunnelPort | AppError>;
  /** The ids of the pool members joined over the cluster (claim), by the HELLO's index. */
  memberIds: Map<number, string>;
  created: Tunnel[];
}

/** The tunnels a HELLO opened, with their indexes in it, and what it asked that was refused (a partial HELLO). */
export interface OpenedTunnels {
  tunnels: Tunnel[];
  indexes: number[];
  refused: { index: number; error: AppError }[];
}

/** What the agent asked to wait for its service, in ms, held to the server's maximum. */
export function responseTimeout(edge: EdgeContext, askedS: number | undefined): number | undefined {
  const max = edge.maxResponseTimeoutMs;
  if (askedS === undefined || max === undefined) return undefined;
  return Math.min(Math.round(askedS * 1000), max);
}

/**
 * A private tunnel takes its owner's declaration (core/private-shares.ts):
 * who it is shared with now. A connector no longer shared with is closed at
 * once (NOT_SHARED), not at its next connection.
 */
function sharePrivate(t: Tunnel, declared: PrivateName): Tunnel {
  t.shares = new Set(declared.shares);
  t.shareNames = declared.shareNames ?? [];
  for (const c of [...t.connectors]) {
    if (c.userId !== t.userId && !t.shares.has(c.userId)) {
      t.connectors.delete(c);
      c.close("NOT_SHARED");
    }
  }
  return t;
}

export class AgentTunnels {
  constructor(private readonly side: AgentSide) {}

  /**
   * The granted tunnels, made or taken back, in the HELLO's order. Throws
   * the refusal of the whole HELLO; in a partial one, a tunnel's refusal is
   * its own.
   */
  open(grant: Grant): OpenedTunnels {
    const { admitted, hello } = grant;
    const owner: Owner = { userId: admitted.user.id, username: admitted.user.username, tokenId: admitted.token.id };
    const out: OpenedTunnels = { tunnels: [], indexes: [], refused: [] };
    admitted.tunnels.forEach((plan, i) => {
      if (plan instanceof AppError) return void out.refused.push({ index: i, error: plan });
      try {
        out.tunnels.push(this.tunnelFor(grant, plan, i, owner));
        out.indexes.push(i);
      } catch (err) {
        // a partial HELLO: a port that cannot be bound, or rules that cannot be, is this tunnel's refusal, not the session's
        if (!hello.partial || !(err instanceof AppError)) throw err;
        out.refused.push({ index: i, error: err });
      }
    });
    return out;
  }

  /** One granted tunnel: taken back from grace with its new settings, or made. Throws its refusal. */
  private tunnelFor(grant: Grant, plan: PlannedTunnel, i: number, owner: Owner): Tunnel {
    const { edge } = this.side;
    const { hello, admitted } = grant;
    if (plan.protocol === "tls" && edge.tlsAddress((plan.hostname ?? plan.subdomain)!) === undefined) {
      throw new AppError("TLS_UNAVAILABLE", "this server passes no TLS through by name (no TLS on its public port, no --tls-port)");
    }
    const priv = isPrivateKind(plan) ? plan.private : undefined;
    const want = priv
      ? { protocol: plan.protocol, private: { userId: owner.userId, name: priv.name } }
      : isPortKind(plan)
        ? { protocol: plan.protocol, port: plan.port }
        : { protocol: plan.protocol, subdomain: plan.subdomain, hostname: plan.hostname };
    const back = edge.registry.reclaimable(owner.tokenId, want, admitted.resume);
    const asked = hello.tunnels[i];
    const timeout = asked?.protocol === "http" ? responseTimeout(edge, asked.responseTimeout) : undefined;
    const allowUpgrade = asked?.protocol === "http" && asked.allowUpgrade?.length ? new Set(asked.allowUpgrade.map((u) => u.toLowerCase())) : undefined;
    // what the access rules' log lines name the tunnel by
    const label = priv ? `${owner.username}/${priv.name}` : isPortKind(plan) ? plan.protocol : (plan.subdomain ?? plan.hostname)!;
    const access = tunnelAccess(asked, cidrs(admitted.user.allowCidrs), label, grant.providers, edge.basicAuthLimit);
    if (access instanceof AppError) throw access;
    if (back) {
      back.access = access;
      if (priv) sharePrivate(back, priv);
      if (plan.protocol === "http") back.skipWarning = plan.skipWarning;
      back.responseTimeoutMs = timeout;
      back.allowUpgrade = allowUpgrade;
      return back;
    }
    const t = priv
      ? sharePrivate(edge.registry.newTunnel(plan.protocol, { private: priv.name }, owner, false), priv)
      : isNamedKind(plan)
        ? this.namedTunnel(plan, owner, admitted.resume, grant.memberIds.get(i))
        : plan.protocol === "udp"
          ? this.adoptUdpPort(grant.udp.get(i), owner)
          : this.portTunnel(plan, owner);
    t.responseTimeoutMs = timeout;
    t.allowUpgrade = allowUpgrade;
    t.access = access;
    grant.created.push(t);
    return t;
  }

  /**
   * The UDP ports of the admitted udp tunnels, by their index: bound, or why
   * not. A port held in grace for this token is not bound again (its tunnel
   * is taken back as it is).
   */
  async bindUdpPorts(admitted: Admitted): Promise<Map<number, UdpTunnelPort | AppError>> {
    const bound = new Map<number, UdpTunnelPort | AppError>();
    const { edge } = this.side;
    for (const [i, plan] of admitted.tunnels.entries()) {
      if (plan instanceof AppError || plan.protocol !== "udp" || plan.private) continue;
      if (edge.registry.reclaimable(admitted.token.id, { protocol: "udp", port: plan.port }, admitted.resume)) continue;
      const ports = edge.udpPorts;
      if (!ports) {
        bound.set(i, new AppError("UDP_UNAVAILABLE", "this server takes no udp tunnels (--udp-ports off)"));
        continue;
      }
      try {
        bound.set(i, await ports.bind(plan.port));
      } catch (err) {
        if (!(err instanceof AppError)) throw err;
        bound.set(i, err);
      }
    }
    return bound;
  }

  /**
   * A new http or tls tunnel on its names, checked again against what this
   * node holds now (taken meanwhile by another session, between the rules'
   * answer and now). A pooled http tunnel joins the pool on its name, or
   * starts one; the token's own dropped tunnel gives its hostname to the new
   * one.
   */
  private namedTunnel(plan: Extract<PlannedTunnel, { protocol: "http" | "tls" }>, owner: Owner, resume: string | undefined, memberId: string | undefined): Tunnel {
    const { registry } = this.side.edge;
    const names = { ...(plan.subdomain !== undefined ? { subdomain: plan.subdomain } : {}), ...(plan.hostname !== undefined ? { hostname: plan.hostname } : {}) };
    const pooled = plan.protocol === "http" ? plan.pool : undefined;
    const held = registry.tunnelBySubdomain((plan.subdomain ?? plan.hostname)!);
    if (held?.pool && pooled && held.pool.userId === owner.userId && held.hostname === plan.hostname && held.subdomain === plan.subdomain) {
      const member = registry.newTunnel("http", names, owner, plan.protocol === "http" && plan.skipWarning, memberId);
      held.pool.add(member);
      return member;
    }
    if (plan.subdomain !== undefined && registry.subdomainHolder(plan.subdomain)) {
      throw new AppError("SUBDOMAIN_TAKEN", `'${plan.subdomain}' is in use by another tunnel`);
    }
    if (plan.hostname !== undefined) {
      const holder = registry.tunnelBySubdomain(plan.hostname);
      // this token's tunnel, dropped (or in the session this one resumes), gives its hostname to the new one
      const own = holder && !holder.pool && holder.tokenId === owner.tokenId && (holder.agent === null || holder.agent.sessionId === resume);
      if (holder && !own) throw new AppError("HOSTNAME_IN_USE", `'${plan.hostname}' is in use by another tunnel`);
      if (holder) registry.remove(holder);
    }
    const t = plan.protocol === "http" ? registry.newTunnel("http", names, owner, plan.skipWarning, pooled ? memberId : undefined) : registry.newTunnel("tls", names, owner, false);
    if (pooled) new TunnelPool<Tunnel>(pooled, owner.userId).add(t);
    return t;
  }

  /** A tcp tunnel on its port: a pooled one joins the user's pool on the port asked, or starts one. */
  private portTunnel(plan: Extract<PlannedTunnel, { protocol: "tcp" }>, owner: Owner): Tunnel {
    const { registry, ports } = this.side.edge;
    const held = plan.port !== undefined ? registry.portHolder(plan.port) : undefined;
    if (held?.pool && plan.pool && held.pool.userId === owner.userId) {
      const member = registry.newTunnel("tcp", { port: plan.port }, owner, false);
      held.pool.add(member);
      member.stopAccepting = held.stopAccepting;
      return member;
    }
    return ports.bind(plan.port, (port) => {
      const t = registry.newTunnel("tcp", { port }, owner, false);
      if (plan.pool) new TunnelPool<Tunnel>(plan.pool, owner.userId).add(t);
      return t;
    });
  }

  /** A udp tunnel on the port bound for it (bindUdpPorts), or that port's refusal. */
  private adoptUdpPort(bound: UdpTunnelPort | AppError | undefined, owner: Owner): Tunnel {
    if (bound instanceof AppError) throw bound;
    // its port was held in grace when bound, and has been let go since: the agent asks again
    if (!bound) throw new AppError("PORT_UNAVAILABLE", "the UDP port was let go during the handshake; try again");
    return bound.adopt(this.side.edge.registry.newTunnel("udp", { port: bound.port }, owner, false));
  }

  /** The tunnels as READY tells the agent of them: ids, names or ports, public addresses. */
  granted(opened: OpenedTunnels, partial: boolean): GrantedTunnel[] {
    return opened.tunnels.map((t, n) => ({
      id: t.id,
      protocol: t.protocol,
      ...(t.port !== undefined ? { port: t.port } : { subdomain: t.subdomain }),
      ...(t.hostname !== undefined ? { hostname: t.hostname } : {}),
      url: this.publicAddress(t),
      ...(partial ? { index: opened.indexes[n] } : {}),
      ...(t.access ? { access: true } : {}),
      ...(t.pool ? { pool: true } : {}),
      ...(t.privateName !== undefined ? { private: { target: `${t.username}/${t.privateName}`, shares: t.shareNames ?? [] } } : {}),
    }));
  }

  /** Where visitors reach a tunnel, as READY names it. */
  private publicAddress(t: Tunnel): string {
    if (t.privateName !== undefined) return `${t.username}/${t.privateName}`;
    // a tls tunnel is granted only where a port passes its name through (tunnelFor): it has an address
    return kindAddress(this.side.edge, t.protocol, t.hostname ?? t.subdomain!, t.port!)!;
  }

  /** One of its tunnels closed alone (an admin's change): the agent is told why (REVOKE) and the tunnel's streams end. */
  revoke(tunnelId: string, code: string, message: string): void {
    const { mux, sessionId } = this.side;
    mux.sendControl(FrameType.REVOKE, { tunnel: tunnelId, code, message });
    for (const s of [...mux.streams.values()]) if ((s.meta as OpenMeta | undefined)?.tunnel === tunnelId) s.reset(code.slice(0, 100));
    log.info("tunnel closed alone", { session: sessionId, tunnel: tunnelId, code });
  }
}
