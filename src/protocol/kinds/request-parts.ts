/**
 * The parts of HELLO's tunnel requests that several kinds share: who may
 * reach a tunnel (http's access rules, or IP rules only) and what makes
 * one private. Each kind's request (its unit in this folder) is built from
 * them; messages.ts exports them under the same names as before.
 */
import * as v from "valibot";

/** An Upgrade protocol name (RFC 9110 §7.8) as --allow-upgrade takes it: a token, without a version. */
export const UPGRADE_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,64}$/;

/** CIDRs or single addresses, IPv4 or IPv6, as written ("10.0.0.0/8", "::1"); the edge checks them. */
const CidrTexts = v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64))), v.maxLength(256)));
const HeaderPairs = v.optional(
  v.pipe(v.array(v.tuple([v.pipe(v.string(), v.maxLength(256)), v.pipe(v.string(), v.maxLength(8192))])), v.maxLength(64)),
);

/**
 * Who may reach an http tunnel, asked by its agent and enforced by the edge
 * before a byte reaches the agent. Basic-auth passwords and the OIDC client
 * secret travel here, over the agent's connection: the edge never logs them
 * nor puts them in a refusal. A server that predates `access` drops it
 * (unknown keys are dropped) and would open the tunnel unprotected, so the
 * edge says `access: true` on each tunnel of READY whose rules it took, and
 * the agent serves no tunnel that asked for rules without it.
 */
export const HttpAccess = v.object({
  basicAuth: v.optional(v.pipe(v.array(v.object({ user: v.pipe(v.string(), v.maxLength(256)), password: v.pipe(v.string(), v.maxLength(1024)) })), v.maxLength(64))),
  /** Visitors must be in one of these (when there are any)... */
  allowCidrs: CidrTexts,
  /** ...and in none of these: deny wins. */
  denyCidrs: CidrTexts,
  /** Set on each request to the local service (replacing what the visitor sent under that name). */
  requestHeaderAdd: HeaderPairs,
  /** Removed from each request before it travels. */
  requestHeaderRemove: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(256))), v.maxLength(64))),
  /** Set on each response to the visitor (replacing the service's under that name). */
  responseHeaderAdd: HeaderPairs,
  /** Visitors sign in with this OpenID Connect provider. */
  oidc: v.optional(
    v.object({
      issuer: v.pipe(v.string(), v.maxLength(2048)),
      clientId: v.pipe(v.string(), v.maxLength(512)),
      clientSecret: v.pipe(v.string(), v.maxLength(2048)),
      /** "a@b.com" or "@domain.com"; none: any address the provider vouches for. */
      allowEmails: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(320))), v.maxLength(256))),
    }),
  ),
});
export type HttpAccess = v.InferOutput<typeof HttpAccess>;

/**
 * A tunnel's own traffic policy (docs/policy.md): the document's text,
 * YAML or JSON, as its agent read it, compiled by the edge at the
 * handshake (a policy that does not load refuses the tunnel,
 * POLICY_INVALID). A server that predates it drops it (unknown keys are
 * dropped) and would open the tunnel without its rules, so, as for
 * `access`, the edge says `policy: true` on each tunnel of READY whose
 * policy it took, and the agent serves no tunnel that sent one without it.
 */
export const TUNNEL_POLICY_MAX_CHARS = 128 * 1024;
export const TunnelPolicyText = v.optional(v.pipe(v.string(), v.maxLength(TUNNEL_POLICY_MAX_CHARS)));

/** A tcp tunnel has IP rules only: nothing of a TCP stream says who the visitor is. */
export const TcpAccess = v.object({ allowCidrs: CidrTexts, denyCidrs: CidrTexts });
export type TcpAccess = v.InferOutput<typeof TcpAccess>;

/**
 * A private tunnel (`--private --name db --share bob,carol`): no public port
 * or name; reached only through `burrow connect owner/name` by its owner and
 * the users it is shared with. `localPort`: the owner's service port, which a
 * connector's local port takes when it is free there.
 */
export const PrivateRequest = v.object({
  name: v.pipe(v.string(), v.maxLength(63)),
  share: v.optional(v.pipe(v.array(v.pipe(v.string(), v.maxLength(64))), v.maxLength(64))),
  localPort: v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))),
});
export type PrivateRequest = v.InferOutput<typeof PrivateRequest>;

/** A public port asked for (none: any free one of the kind's port space). */
export const RequestedPort = v.optional(v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535)));

/** A subdomain or custom hostname asked for. */
export const RequestedName = v.optional(v.pipe(v.string(), v.maxLength(253)));

/** How a pool spreads its visitors; the first member's choice holds for the pool. */
export const PoolBalance = v.optional(v.picklist(["round-robin", "least-requests"]));
