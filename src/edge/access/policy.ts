/**
 * A tunnel's access settings, compiled once at the handshake from what its
 * agent asked and its user's settings. They are the tunnel's flags layer
 * (flag-layer.ts), which the policy engine runs for the tunnel's requests
 * and connections after the operator's layers and before the tunnel's own
 * policy:
 *
 *   IP rules (403) -> basic auth (401) -> OIDC (the openid-connect action
 *   with the tunnel's own sign-in: the provider's for a browser's page,
 *   401 for anything else) -> request header rules -> warning -> tunnel
 *
 * The same IP rules are asked directly where no policy runs (a udp
 * datagram, a connector's stream to a private tunnel) and of the visits
 * that stay open when they narrow. A tunnel without rules has no settings
 * at all (Tunnel.access undefined), so the hot path pays one property read.
 */
import type { HttpAccess, TcpAccess } from "../../protocol/messages.ts";
import { KINDS, type TunnelKind } from "../../protocol/kinds.ts";
import type { Policy } from "../../policy/index.ts";
import { BasicAuth } from "./basic-auth.ts";
import { flagLayer } from "./flag-layer.ts";
import { HeaderRules } from "./header-rules.ts";
import { IpRules } from "./ip-rules.ts";
import { OidcGate } from "./oidc.ts";
import type { OidcProvider } from "./oidc-discovery.ts";

/** What a tunnel's flags layer judges (AccessSources.judged), by its kind: nothing for a private tunnel (the edge does not read its traffic) or a udp one (no policy runs on datagrams). */
export function flagsJudge(kind: TunnelKind, isPrivate: boolean): "http" | "raw" | "none" {
  if (isPrivate) return "none";
  const facts = KINDS[kind];
  return facts.access === "http" ? "http" : facts.carries === "bytes" ? "raw" : "none";
}

export interface AccessSources {
  /** What the agent asked for the tunnel. */
  asked?: HttpAccess | TcpAccess;
  /** The user's allow_cidrs: applied to every tunnel of the user, besides the agent's own list. */
  userAllowCidrs?: readonly string[];
  /** The tunnel's name (its keys are derived from it) or, for tcp, its port. */
  name: string;
  /** The discovered provider for `asked.oidc`. */
  provider?: OidcProvider;
  /** Wrong basic-auth passwords an address may try before it is locked (--basic-auth-limit). */
  basicAuthLimit?: number;
  /**
   * What the flags layer judges: an http tunnel's requests, a tcp or tls
   * tunnel's connections, or nothing (a udp or a private tunnel: its IP
   * rules are asked directly). Default http.
   */
  judged?: "http" | "raw" | "none";
}

export class AccessPolicy {
  /** The flags as the rules the policy engine runs (flag-layer.ts): the tunnel's flags layer; undefined: they make none. */
  readonly flags: Policy | undefined;

  private constructor(
    /** What it was made from, to make it again when the user's allow_cidrs change. */
    private readonly sources: AccessSources,
    private readonly ip: IpRules | undefined,
    private readonly basic: BasicAuth | undefined,
    private readonly oidc: OidcGate | undefined,
    headers: HeaderRules | undefined,
  ) {
    const judged = sources.judged ?? "http";
    const asked = (sources.asked as HttpAccess | undefined)?.oidc;
    const signIn = oidc && asked ? { issuer: asked.issuer, settings: asked, gate: oidc } : undefined;
    this.flags = judged === "none" ? undefined : flagLayer({ kind: judged, ip, basic, oidc: signIn, headers });
  }

  /** The policy, or undefined when there is nothing to enforce. Settings were checked by core/access.ts. */
  static compile(src: AccessSources): AccessPolicy | undefined {
    const asked = src.asked;
    const http = asked as HttpAccess | undefined; // a tcp tunnel's settings have the IP lists only
    const ip = new IpRules([asked?.allowCidrs ?? [], src.userAllowCidrs ?? []], asked?.denyCidrs ?? []);
    const basic = http?.basicAuth?.length ? new BasicAuth(http.basicAuth, src.name, Date.now, src.basicAuthLimit) : undefined;
    const oidc = http?.oidc && src.provider ? new OidcGate(src.provider, http.oidc, src.name) : undefined;
    const headers = new HeaderRules({ requestAdd: http?.requestHeaderAdd, requestRemove: http?.requestHeaderRemove, responseAdd: http?.responseHeaderAdd });
    if (ip.empty && !basic && !oidc && headers.empty) return undefined;
    return new AccessPolicy(src, ip.empty ? undefined : ip, basic, oidc, headers.empty ? undefined : headers);
  }

  /**
   * A live tunnel's policy after its user's allow_cidrs changed: the same
   * agent rules (and OIDC keys, so its visitors stay signed in) with the
   * new list. `current` undefined: the tunnel had no rules of its own
   * (`judged`: what its flags layer judges, as AccessSources says).
   */
  static withUserAllowCidrs(current: AccessPolicy | undefined, name: string, userAllowCidrs: readonly string[], judged?: AccessSources["judged"]): AccessPolicy | undefined {
    return AccessPolicy.compile({ ...(current?.sources ?? { name, judged }), userAllowCidrs });
  }

  /** The user's allow_cidrs it was made with. */
  get userAllowCidrs(): readonly string[] {
    return this.sources.userAllowCidrs ?? [];
  }

  /** Whether visitors must sign in (basic auth or OIDC): what a user's require_auth asks of every tunnel. */
  get authenticates(): boolean {
    return this.basic !== undefined || this.oidc !== undefined;
  }

  /** IP rules say no to this canonical address (a tcp tunnel closes the connection at accept). */
  refusesAddress(address: string): boolean {
    return this.ip !== undefined && !this.ip.allows(address);
  }
}
