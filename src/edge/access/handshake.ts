/**
 * The handshake's part of access control: the OIDC issuers a HELLO names
 * answer discovery first, then each granted tunnel gets its compiled
 * policy (or the refusal its settings earn).
 */
import { issuerProblem } from "../../validate/access.ts";
import { AppError } from "../../core/errors.ts";
import type { TunnelRequest } from "../../protocol/messages.ts";
import { discover, type OidcProvider } from "./oidc-discovery.ts";
import { AccessPolicy, type AccessSources } from "./policy.ts";

/** Each OIDC issuer of a HELLO: its provider, or why the tunnels that name it are refused. */
export type Providers = ReadonlyMap<string, OidcProvider | AppError>;

const oidcOf = (t: TunnelRequest | undefined) => (t?.protocol === "http" ? t.access?.oidc : undefined);

/** Whether the HELLO has a tunnel that signs visitors in with OIDC (its issuers must be asked before it is admitted). */
export function needsDiscovery(tunnels: readonly TunnelRequest[]): boolean {
  return tunnels.some((t) => oidcOf(t) !== undefined);
}

/**
 * Asks every well-formed issuer of the HELLO at once (ill-formed ones are
 * refused by admission as OIDC_INVALID). A plain-http issuer is asked only
 * when the server allows them (`httpIssuers`): otherwise any token holder
 * could have the server fetch from its own loopback services.
 */
export async function discoverProviders(tunnels: readonly TunnelRequest[], httpIssuers: boolean): Promise<Providers> {
  const issuers = new Set(tunnels.map((t) => oidcOf(t)?.issuer).filter((i): i is string => i !== undefined && issuerProblem(i) === undefined));
  const out = new Map<string, OidcProvider | AppError>();
  await Promise.all(
    [...issuers].map(async (issuer) => {
      if (!httpIssuers && issuer.toLowerCase().startsWith("http:")) {
        out.set(issuer, new AppError("OIDC_INVALID", `the OIDC issuer ${issuer} is plain http, which this server does not allow (its admin can allow loopback issuers with --oidc-http-issuers loopback)`));
        return;
      }
      try {
        out.set(issuer, await discover(issuer));
      } catch (err) {
        out.set(issuer, err instanceof AppError ? err : new AppError("OIDC_DISCOVERY_FAILED", `the OIDC issuer ${issuer} did not answer discovery`));
      }
    }),
  );
  return out;
}

/**
 * A granted tunnel's policy (undefined: nothing to enforce), or its refusal
 * when its OIDC issuer did not answer. `name`: the tunnel's subdomain (its
 * session keys derive from it) or, for tcp, any label.
 */
export function tunnelAccess(
  asked: TunnelRequest | undefined,
  userAllowCidrs: readonly string[],
  name: string,
  providers: Providers | undefined,
  basicAuthLimit?: number,
  /** What its flags layer judges (policy.ts flagsJudge). */
  judged?: AccessSources["judged"],
): AccessPolicy | AppError | undefined {
  const oidc = oidcOf(asked);
  const provider = oidc ? providers?.get(oidc.issuer) : undefined;
  if (provider instanceof AppError) return provider;
  if (oidc && !provider) return new AppError("OIDC_DISCOVERY_FAILED", `the OIDC issuer ${oidc.issuer} was not reached`);
  return AccessPolicy.compile({ asked: asked?.access, userAllowCidrs, name, provider, basicAuthLimit, judged });
}

/**
 * What is wrong with a HELLO that does not fit its schema, for the
 * PROTOCOL_ERROR and the log: valibot's words, except under `access`, where
 * they could quote a password or a secret; there only the field is named.
 */
export function helloIssue(issues: readonly { message: string; path?: readonly { key: unknown }[] }[]): string {
  const first = issues[0];
  if (!first) return "invalid";
  const path = first.path?.map((p) => String(p.key)) ?? [];
  return path.includes("access") ? `${path.join(".")} is not valid` : first.message;
}
