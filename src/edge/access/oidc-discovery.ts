/**
 * An OpenID provider's metadata, from discovery at the issuer
 * (/.well-known/openid-configuration), via oauth4webapi, with the provider's
 * signing keys (jose's remote JWK set, fetched and cached as ID tokens
 * need them). Asked when a HELLO brings an OIDC tunnel; an issuer that does
 * not answer refuses that tunnel (OIDC_DISCOVERY_FAILED). Answers are kept
 * a few minutes, so agents reconnecting together ask once.
 */
import { createRemoteJWKSet } from "jose";
import * as oauth from "oauth4webapi";
import { providerEndpointProblem } from "../../validate/access.ts";
import { AppError } from "../../core/errors.ts";

/** How long discovery may take before the tunnel is refused. */
export const DISCOVERY_TIMEOUT_MS = 5_000;
/** How long a provider's metadata is reused. */
const CACHE_MS = 5 * 60_000;
/** Issuers remembered at once; the oldest goes first (a user cannot grow it without bound). */
const CACHE_ENTRIES = 256;

export interface OidcProvider {
  issuer: string;
  metadata: oauth.AuthorizationServer;
  keys: ReturnType<typeof createRemoteJWKSet>;
  /** A plain-http issuer (loopback only, validate/access.ts): oauth4webapi must be told to allow it. */
  insecure: boolean;
}

const cache = new Map<string, { at: number; provider: OidcProvider }>();

export async function discover(issuer: string, now = Date.now()): Promise<OidcProvider> {
  const cached = cache.get(issuer);
  if (cached && now - cached.at < CACHE_MS) return cached.provider;
  const url = new URL(issuer);
  const insecure = url.protocol === "http:";
  try {
    const res = await oauth.discoveryRequest(url, { algorithm: "oidc", signal: AbortSignal.timeout(DISCOVERY_TIMEOUT_MS), [oauth.allowInsecureRequests]: insecure });
    const metadata = await oauth.processDiscoveryResponse(url, res);
    if (!metadata.authorization_endpoint || !metadata.token_endpoint || !metadata.jwks_uri) {
      throw new Error("its metadata lacks an authorization, token or jwks endpoint");
    }
    // the edge fetches these itself: the issuer's rule holds for them too (jose, which fetches the keys, checks no scheme)
    for (const [name, endpoint] of [["jwks_uri", metadata.jwks_uri], ["token_endpoint", metadata.token_endpoint], ["userinfo_endpoint", metadata.userinfo_endpoint]] as const) {
      const problem = endpoint === undefined ? undefined : providerEndpointProblem(name, endpoint, insecure);
      if (problem) throw new Error(problem);
    }
    const provider: OidcProvider = { issuer, metadata, keys: createRemoteJWKSet(new URL(metadata.jwks_uri), { timeoutDuration: DISCOVERY_TIMEOUT_MS }), insecure };
    cache.delete(issuer);
    if (cache.size >= CACHE_ENTRIES) cache.delete(cache.keys().next().value!);
    cache.set(issuer, { at: now, provider });
    return provider;
  } catch (err) {
    throw new AppError("OIDC_DISCOVERY_FAILED", `the OIDC issuer ${issuer} did not answer discovery: ${reason(err)}`);
  }
}

function reason(err: unknown): string {
  const e = err as { name?: string; message?: string; code?: string };
  if (e.name === "TimeoutError" || e.name === "AbortError") return `no answer within ${DISCOVERY_TIMEOUT_MS / 1000} s`;
  return (e.message ?? String(err)).split("\n")[0]!.slice(0, 200);
}
