/**
 * An agent's tunnels: made from what admission granted (a tunnel taken
 * back from grace, a new private one, or a new public one placed by its
 * kind's edge unit: kinds/), the public addresses READY names, and one
 * tunnel closed alone (REVOKE). The handshake (agent-handshake.ts) decides
 * when; this file knows how.
 */
import { AppError } from "../core/errors.ts";
import type { Admitted, PlannedTunnel } from "../core/admission.ts";
import type { PrivateName } from "../core/private-shares.ts";
import { log } from "../log.ts";
import { isPortKind, isPrivateKind } from "../protocol/kinds.ts";
import type { GrantedTunnel, Hello, OpenMeta } from "../protocol/messages.ts";
import { FrameType } from "../protocol/wire.ts";
import type { Policy } from "../policy/index.ts";
import { cidrs } from "../validate/fields.ts";
import { tunnelAccess, type Providers } from "./access/handshake.ts";
import { flagsJudge } from "./access/policy.ts";
import { notesMadeOf } from "./traffic-policy/derived-notes.ts";
import { withFlags } from "./traffic-policy/tunnel-policy.ts";
import type { AgentSide } from "./agent-context.ts";
import { kindAddress } from "./public-addresses.ts";
import type { Tunnel } from "./registry.ts";
import type { Owner, Prepared } from "./kinds/edge-kind.ts";
import { edgeKind } from "./kinds/index.ts";


/** What one HELLO's tunnels are made from. `created`: the new ones so far, removed again if the handshake fails after. */
export interface Grant {
  /** What the tunnels were asked with: a HELLO, or an ADD's one tunnel as a partial HELLO's. */
  hello: Pick<Hello, "tunnels" | "partial">;
  admitted: Admitted;
  providers: Providers | undefined;
  /** What its kinds bound before it (prepare: a udp port), by the HELLO's index. */
  prepared: Map<number, Prepared | AppError>;
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

  /** One granted tunnel: taken back from grace with its new settings, or made by its kind's edge unit (kinds/). Throws its refusal. */
  private tunnelFor(grant: Grant, plan: PlannedTunnel, i: number, owner: Owner): Tunnel {
    const { edge } = this.side;
    const { hello, admitted } = grant;
    const kind = edgeKind(plan.protocol);
    const priv = isPrivateKind(plan) ? plan.private : undefined;
    const unavailable = priv ? undefined : kind.unavailable?.(edge, plan as never);
    if (unavailable) throw unavailable;
    const want = priv
      ? { protocol: plan.protocol, private: { userId: owner.userId, name: priv.name } }
      : isPortKind(plan)
        ? { protocol: plan.protocol, port: plan.port }
        : { protocol: plan.protocol, subdomain: plan.subdomain, hostname: plan.hostname };
    const back = edge.registry.reclaimable(owner.tokenId, want, admitted.resume);
    const asked = hello.tunnels[i];
    // what the access rules' log lines name the tunnel by
    const label = priv ? `${owner.username}/${priv.name}` : isPortKind(plan) ? plan.protocol : (plan.subdomain ?? plan.hostname)!;
    const access = tunnelAccess(asked, cidrs(admitted.user.allowCidrs), label, grant.providers, edge.basicAuthLimit, flagsJudge(plan.protocol, priv !== undefined));
    if (access instanceof AppError) throw access;
    const own = this.ownPolicy(asked, plan, label, owner.userId);
    const t =
      back ??
      (priv
        ? edge.registry.newTunnel(plan.protocol, { private: priv.name }, owner, false)
        : kind.place(edge, plan as never, owner, { resume: admitted.resume, memberId: grant.memberIds.get(i), prepared: grant.prepared.get(i) }));
    t.access = access;
    // its layers: the operator's, its flags (access/flag-layer.ts) and its own policy
    if (edge.policies) edge.policies.attach(t, own);
    else withFlags(t);
    if (priv) sharePrivate(t, priv);
    kind.keep?.(edge, t, plan as never, asked as never);
    if (!back) grant.created.push(t);
    return t;
  }

  /**
   * The tunnel's own traffic policy, compiled (undefined: it sent none, or
   * this edge takes none, and READY does not say it runs one). Throws
   * POLICY_INVALID with its errors (POLICY_LIMITED past the user's compile
   * budget). Its rate limits count under its name
   * (a port kind's: its port when it asked for one), so that an agent that
   * reconnects keeps counting.
   */
  private ownPolicy(asked: Hello["tunnels"][number] | undefined, plan: PlannedTunnel, label: string, userId: number): Policy | undefined {
    const text = asked && "policy" in asked ? asked.policy : undefined;
    const policies = this.side.edge.policies;
    if (text === undefined || !policies) return undefined;
    // the edge does not read a private tunnel's traffic: it has nothing to run a policy on
    if (isPrivateKind(plan) && plan.private) throw new AppError("POLICY_INVALID", "a private tunnel takes no traffic policy: the server does not read its traffic");
    const key = isPortKind(plan) ? `${plan.protocol}:${plan.port ?? crypto.randomUUID()}` : label;
    const own = policies.own(text, key, plan.protocol === "http", userId);
    if (own instanceof AppError) throw own;
    return own;
  }

  /**
   * What the admitted public tunnels' kinds bind before the tunnels open
   * (a udp port: binding is asynchronous), by their index: bound, or why
   * not. What a tunnel held in grace for this token has is not bound again
   * (it is taken back as it is).
   */
  async prepare(admitted: Admitted): Promise<Map<number, Prepared | AppError>> {
    const prepared = new Map<number, Prepared | AppError>();
    const { edge } = this.side;
    for (const [i, plan] of admitted.tunnels.entries()) {
      if (plan instanceof AppError || (isPrivateKind(plan) && plan.private)) continue;
      const kind = edgeKind(plan.protocol);
      if (!kind.prepare) continue;
      const want = isPortKind(plan) ? { protocol: plan.protocol, port: plan.port } : { protocol: plan.protocol, subdomain: plan.subdomain, hostname: plan.hostname };
      if (edge.registry.reclaimable(admitted.token.id, want, admitted.resume)) continue;
      prepared.set(i, await kind.prepare(edge, plan as never));
    }
    return prepared;
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
      ...(t.policy?.own ? { policy: true } : {}),
      // the notes its agent makes itself: their rules, listed once (derived-notes.ts)
      ...(t.agent?.makesNotes && t.policy?.own && notesMadeOf(t.policy.own) ? { notes: notesMadeOf(t.policy.own)!.wire } : {}),
      ...(t.pool ? { pool: true } : {}),
      ...(t.privateName !== undefined ? { private: { target: `${t.username}/${t.privateName}`, shares: t.shareNames ?? [] } } : {}),
    }));
  }

  /** Where visitors reach a tunnel, as READY names it. */
  publicAddress(t: Tunnel): string {
    if (t.privateName !== undefined) return `${t.username}/${t.privateName}`;
    // a tls tunnel is granted only where a port passes its name through (tunnelFor): it has an address
    const address = kindAddress(this.side.edge, t.protocol, t.hostname ?? t.subdomain!, t.port!)!;
    t.publicHost ??= hostOf(address);
    return address;
  }

  /** One of its tunnels closed alone (an admin's change): the agent is told why (REVOKE) and the tunnel's streams end. */
  revoke(tunnelId: string, code: string, message: string): void {
    const { mux, sessionId } = this.side;
    mux.sendControl(FrameType.REVOKE, { tunnel: tunnelId, code, message });
    this.endStreams(tunnelId, code);
    log.info("tunnel closed alone", { session: sessionId, tunnel: tunnelId, code });
  }

  /** The streams of one tunnel of the session reset with `code`; the other tunnels' go on. */
  endStreams(tunnelId: string, code: string): void {
    const { mux } = this.side;
    for (const s of [...mux.streams.values()]) if ((s.meta as OpenMeta | undefined)?.tunnel === tunnelId) s.reset(code.slice(0, 100));
  }
}

/** The host a public address names (`example.com:41000`, a tcp tunnel's; `tls://app.example.com:443`), or undefined when it is none. */
function hostOf(address: string): string | undefined {
  try {
    const host = new URL(address.includes("://") ? address : `tcp://${address}`).hostname;
    return host === "" ? undefined : host.replace(/^\[(.*)\]$/, "$1");
  } catch {
    return undefined;
  }
}
