/**
 * How a challenge is answered. The issuer (issuer.ts) takes solvers in the
 * order it prefers them and, for each name, uses the first whose type the
 * CA offers: a wildcard name is offered DNS-01 only, any other name HTTP-01,
 * DNS-01 and TLS-ALPN-01. burrow answers single names by HTTP-01 or, with
 * --acme-challenge tls-alpn-01, by TLS-ALPN-01 on the HTTPS port
 * (tls-alpn01.ts); the wildcard by DNS-01.
 *
 * `prepare` publishes the answer and returns once it is served; `cleanup`
 * withdraws it, after the CA has settled the challenge either way.
 */

export type ChallengeType = "http-01" | "dns-01" | "tls-alpn-01";

/** The part of an ACME authorization a solver needs (RFC 8555 7.1.4). */
export interface ChallengeAuthz {
  identifier: { type: string; value: string };
  wildcard?: boolean;
}

/** The part of an ACME challenge a solver needs (RFC 8555 8). */
export interface ChallengeOffer {
  type: string;
  url: string;
  token?: string;
}

export interface ChallengeSolver {
  type: ChallengeType;
  /**
   * Serves the answer. `keyAuthorization` is what acme-client computed for
   * the type: `token.thumbprint` for HTTP-01, its SHA-256 in base64url for
   * DNS-01. Throws (a sentence) when it cannot.
   */
  prepare(authz: ChallengeAuthz, challenge: ChallengeOffer, keyAuthorization: string): Promise<void> | void;
  cleanup(authz: ChallengeAuthz, challenge: ChallengeOffer, keyAuthorization: string): Promise<void> | void;
}
