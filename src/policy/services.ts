/**
 * What the edge lends a running policy: the clock, the rate limits'
 * counts, the JWKS key sets jwt-validation checks signatures with, the
 * OpenID Connect sign-in of today's tunnels (an adapter the edge plugs in),
 * and the server's own settings the actions follow. Defaults serve the
 * offline commands and the tests: the counts in memory, the key sets
 * fetched with jose and cached, no OIDC.
 */
import { createRemoteJWKSet, customFetch, type JWTVerifyGetKey } from "jose";
import type { GeoLookup } from "./geo.ts";
import type { PolicyHttpClient } from "./http-client.ts";
import type { PolicyResponse } from "./response.ts";
import { MemoryRateLimitStore, type RateLimitStore } from "./rate-limit-store.ts";

/** A JWKS document's size cap: a key set is a few KiB; a URL that sends more is not one. */
export const MAX_JWKS_BYTES = 256 * 1024;
/** How long a JWKS fetch may take; keys are cached 15 minutes (ngrok's refresh), a missing key refetched at most every 30 s. */
export const JWKS_TIMEOUT_MS = 5000;
export const JWKS_MAX_AGE_MS = 15 * 60_000;

/** How key sets are fetched and kept (the server's --policy-jwks-* flags); the constants above by default. */
export interface JwksSettings {
  maxBytes: number;
  timeoutMs: number;
  maxAgeMs: number;
}
/** Key sets kept (one per JWKS URL); past it the oldest is dropped. */
const MAX_KEY_SETS = 256;

/** The OIDC sign-in the edge has for tunnels today (edge/access/oidc.ts), as the openid-connect action asks it. */
export interface OidcAdapter {
  /**
   * The visitor's request judged: signed in (the email, and the names of
   * the edge's own cookies to take off the request), or the answer that
   * starts or ends a sign-in (the provider's redirect, the callback's
   * cookie, a 401 for scripts).
   */
  admit(request: OidcRequest, settings: OidcSettings): Promise<{ kind: "signed-in"; email: string; stripCookies: string[] } | { kind: "respond"; response: PolicyResponse }>;
}

export interface OidcRequest {
  method: string;
  /** The origin-form target. */
  target: string;
  host: string;
  secure: boolean;
  headers: readonly (readonly [string, string])[];
  /** A visit let through before, judged again: its session is checked, and no sign-in is started or finished (NOT_SIGNED_IN when none). */
  rejudging?: boolean;
}

/** What an OIDC sign-in says of a visit judged again without a session (OidcRequest.rejudging): it is not let stay; no one reads the answer. */
export const NOT_SIGNED_IN: PolicyResponse = { status: 401, headers: [], body: "" };

export interface OidcSettings {
  issuer: string;
  clientId: string;
  clientSecret: string;
  scopes: string[];
  allowEmails: string[];
  /** ngrok's auth_id: names this sign-in's cookies, and the one /_burrow/oidc/login and /logout mean with ?auth_id=. */
  authId?: string;
  /** More parameters for the provider's authorization URL (ngrok's authz_url_params). */
  authorizeParams?: Record<string, string>;
  /** How long a session lasts, in seconds (ngrok's max_session_duration). */
  maxSessionS?: number;
}

export interface KeySets {
  /** The key set at a JWKS URL, fetched when first asked for and kept. */
  get(url: string): JWTVerifyGetKey;
}

export interface PolicyServices {
  now(): number;
  rateLimits: RateLimitStore;
  keySets: KeySets;
  oidc?: OidcAdapter;
  /** Plain-http JWKS URLs on loopback are taken (the server's --oidc-http-issuers loopback); else only https. */
  httpLoopback: boolean;
  /** Wrong basic-auth passwords an address may try before it is locked (the server's --basic-auth-limit). */
  basicAuthLimit: number;
  /** Answers conn.geo.* (the server's --geoip-db); none: a policy that reads them is refused at load (load.ts). */
  geo?: GeoLookup;
  /** Sends the http-request action's requests within the server's bounds (edge/traffic-policy/outgoing-requests.ts); none: the action fails (HTTP_REQUEST_UNAVAILABLE). */
  httpRequests?: PolicyHttpClient;
}

/** A fetch that reads at most `maxBytes` of the answer. */
async function cappedFetch(maxBytes: number, url: string, options: RequestInit): Promise<Response> {
  const res = await fetch(url, options);
  const reader = res.body?.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (reader) {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.length;
      if (size > maxBytes) {
        await reader.cancel();
        throw new Error(`the JWKS at ${url} is larger than ${maxBytes} bytes`);
      }
      chunks.push(value);
    }
  }
  return new Response(Buffer.concat(chunks), { status: res.status, headers: res.headers });
}

export class RemoteKeySets implements KeySets {
  private readonly sets = new Map<string, JWTVerifyGetKey>();
  private readonly settings: JwksSettings;
  private readonly fetch: (url: string, options: RequestInit) => Promise<Response>;

  constructor(settings: Partial<JwksSettings> = {}) {
    this.settings = { maxBytes: MAX_JWKS_BYTES, timeoutMs: JWKS_TIMEOUT_MS, maxAgeMs: JWKS_MAX_AGE_MS, ...settings };
    const maxBytes = this.settings.maxBytes;
    this.fetch = (url, options) => cappedFetch(maxBytes, url, options);
  }

  get(url: string): JWTVerifyGetKey {
    let set = this.sets.get(url);
    if (!set) {
      if (this.sets.size >= MAX_KEY_SETS) this.sets.delete(this.sets.keys().next().value!);
      set = createRemoteJWKSet(new URL(url), { timeoutDuration: this.settings.timeoutMs, cacheMaxAge: this.settings.maxAgeMs, [customFetch]: this.fetch });
      this.sets.set(url, set);
    }
    return set;
  }
}

export function defaultServices(over: Partial<PolicyServices> = {}): PolicyServices {
  return {
    now: Date.now,
    rateLimits: new MemoryRateLimitStore(),
    keySets: new RemoteKeySets(),
    httpLoopback: false,
    basicAuthLimit: 10,
    ...over,
  };
}
