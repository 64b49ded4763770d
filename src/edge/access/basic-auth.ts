/**
 * HTTP Basic authentication (RFC 7617) for a tunnel. Only SHA-256 digests
 * of the "user:password" pairs are kept; a visitor's pair is digested and
 * compared with every one of them in constant time, with no early exit, so
 * neither how much of a password was right nor which user exists shows in
 * the time taken.
 */
import { createHash, timingSafeEqual } from "node:crypto";
import { clientKey } from "../../http/addresses.ts";
import { Throttle, type ThrottleRules } from "../../core/throttle.ts";

/**
 * Wrong passwords one address (an IPv6 client: its /64, which one host may
 * send from all of) may try on one tunnel before it is refused unheard (429)
 * for a minute, doubling to 15 minutes: a visitor who mistypes is not
 * hindered, a script guessing a thousand a second is.
 */
export const BASIC_AUTH_THROTTLE: ThrottleRules = {
  allowance: 10,
  forgetAfterMs: 15 * 60_000,
  firstLockMs: 60_000,
  maxLockMs: 15 * 60_000,
  maxKeys: 4096,
};

const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();

/** Whether `presented` equals one of `digests` (SHA-256 of each accepted value), comparing with all in constant time. */
export function matchesAnyDigest(presented: string, digests: readonly Buffer[]): boolean {
  const mine = digest(presented);
  let found = false;
  for (const d of digests) found = timingSafeEqual(mine, d) || found;
  return found;
}

export class BasicAuth {
  private readonly digests: Buffer[];
  /** What the browser shows in its sign-in prompt (no secrets: the tunnel's host). */
  readonly challenge: string;

  /** Wrong credentials by the visitor's address. */
  private readonly guesses: Throttle;

  /** `allowance`: wrong passwords an address may try before it is locked (the server's --basic-auth-limit). */
  constructor(
    credentials: readonly { user: string; password: string }[],
    realm: string,
    now: () => number = Date.now,
    allowance = BASIC_AUTH_THROTTLE.allowance,
  ) {
    this.digests = credentials.map((c) => digest(`${c.user}:${c.password}`));
    this.challenge = `Basic realm="${realm.replace(/["\\]/g, "")}", charset="UTF-8"`;
    this.guesses = new Throttle({ ...BASIC_AUTH_THROTTLE, allowance }, now);
  }

  /**
   * A visitor's `Authorization` header judged, counted against `client`
   * (its address): `retryAt` while the address is locked (its credentials
   * are not read), else whether they are right. A wrong header counts; none
   * at all is not a guess (a browser's first request).
   */
  judge(client: string, authorization: string | null): { passed: boolean; retryAt?: undefined } | { passed?: undefined; retryAt: number } {
    const verdict = this.guesses.judgeNow(clientKey(client), () => (authorization === null ? undefined : this.check(authorization) !== undefined));
    return verdict.retryAt !== undefined ? verdict : { passed: verdict.passed === true };
  }

  /** The user name of a valid `Authorization: Basic ...` header, or undefined. */
  check(authorization: string | null): string | undefined {
    if (!authorization) return undefined;
    const m = /^basic[ \t]+([A-Za-z0-9+/=]{1,8192})[ \t]*$/i.exec(authorization);
    if (!m) return undefined;
    const pair = Buffer.from(m[1]!, "base64").toString("utf8");
    if (!matchesAnyDigest(pair, this.digests)) return undefined;
    return pair.slice(0, pair.indexOf(":"));
  }
}
