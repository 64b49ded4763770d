/**
 * HTTP-01 (RFC 8555 8.3): the CA fetches
 * `http://<name>/.well-known/acme-challenge/<token>` on port 80 and expects
 * the key authorization as the body. The solver keeps the tokens of the
 * challenges in flight in memory; the edge's plain-HTTP handler asks
 * `answerHttpChallenge` first, for any Host, before routing to a tunnel.
 *
 * Tokens are bounded in number and each expires on its own after
 * HTTP01_TOKEN_TTL_MS, so an issuance that died before its cleanup cannot
 * leave answers served for ever. No timers: expired tokens are dropped when
 * met.
 */
import type { ChallengeSolver } from "./solver.ts";

export const HTTP01_PATH_PREFIX = "/.well-known/acme-challenge/";
/** Long enough for any validation; the CA gives up on a challenge well before. */
export const HTTP01_TOKEN_TTL_MS = 10 * 60 * 1000;
/** Challenges in flight at once, at most: a few orders' worth of names. */
export const MAX_HTTP01_TOKENS = 256;

/** base64url, as RFC 8555 8.3 requires of a token (and at least 128 bits of it). */
const TOKEN = /^[A-Za-z0-9_-]{22,256}$/;

export class HttpChallengeTokens {
  /** token -> key authorization and when it expires (ms since the epoch). */
  private readonly tokens = new Map<string, { keyAuthorization: string; expires: number }>();

  constructor(
    private readonly ttlMs: number = HTTP01_TOKEN_TTL_MS,
    private readonly now: () => number = Date.now,
  ) {}

  /** Serves `keyAuthorization` for `token`; throws a sentence when the token is malformed or too many are held. */
  add(token: string, keyAuthorization: string): void {
    if (!TOKEN.test(token)) throw new Error(`not an HTTP-01 token: ${JSON.stringify(token.slice(0, 64))}`);
    if (!keyAuthorization.startsWith(`${token}.`)) throw new Error("the key authorization does not start with its token");
    this.prune();
    if (!this.tokens.has(token) && this.tokens.size >= MAX_HTTP01_TOKENS) throw new Error(`${MAX_HTTP01_TOKENS} HTTP-01 challenges are in flight already`);
    this.tokens.set(token, { keyAuthorization, expires: this.now() + this.ttlMs });
  }

  remove(token: string): boolean {
    return this.tokens.delete(token);
  }

  /** The key authorization served for `token`, unless it expired. */
  get(token: string): string | undefined {
    const entry = this.tokens.get(token);
    if (!entry) return undefined;
    if (entry.expires > this.now()) return entry.keyAuthorization;
    this.tokens.delete(token);
    return undefined;
  }

  get size(): number {
    this.prune();
    return this.tokens.size;
  }

  private prune(): void {
    const t = this.now();
    for (const [token, entry] of this.tokens) if (entry.expires <= t) this.tokens.delete(token);
  }
}

/**
 * The answer to a request for `path` (the request target's path, no query),
 * or undefined when it is not a challenge in flight: other paths, and
 * unknown tokens too, go on to whatever the name normally serves.
 */
export function answerHttpChallenge(tokens: HttpChallengeTokens, path: string): Response | undefined {
  if (!path.startsWith(HTTP01_PATH_PREFIX)) return undefined;
  const keyAuthorization = tokens.get(path.slice(HTTP01_PATH_PREFIX.length));
  if (keyAuthorization === undefined) return undefined;
  return new Response(keyAuthorization, { headers: { "content-type": "text/plain", "cache-control": "no-store" } });
}

/** A solver answering HTTP-01 challenges from `tokens`. */
export function http01Solver(tokens: HttpChallengeTokens): ChallengeSolver {
  return {
    type: "http-01",
    prepare(_authz, challenge, keyAuthorization) {
      if (!challenge.token) throw new Error("the HTTP-01 challenge has no token");
      tokens.add(challenge.token, keyAuthorization);
    },
    cleanup(_authz, challenge) {
      if (challenge.token) tokens.remove(challenge.token);
    },
  };
}
