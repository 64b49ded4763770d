/**
 * The edge's traffic policies: what it lends every run (one set of
 * services: the clock, the rate limits' counts in this process, the JWKS
 * key sets, the OIDC sign-in), the caps a policy is loaded under (the server's --policy-*
 * flags), a tunnel's own policy compiled at its handshake, and the
 * operator's layers (the admin API's /api/policies), which cover live
 * tunnels by scope: the whole server, a user, a hostname or wildcard.
 *
 * An operator's change is taken in place: every live tunnel it may cover
 * gets its layers made again (Tunnel.policy), so the next request, the
 * next connection and the next response meet it, and what the tunnel
 * carries already is judged again by them (live-rejudge.ts); nothing
 * reconnects.
 */
import { createHash } from "node:crypto";
import { AppError } from "../../core/errors.ts";
import { log } from "../../log.ts";
import { defaultServices, formatPolicyError, loadPolicy, MAX_BODY_BYTES, MemoryRateLimitStore, RemoteKeySets, type GeoLookup, type JwksSettings, type Policy, type PolicyLimits, type PolicyServices, type RateLimitStore } from "../../policy/index.ts";
import { hostnameCovers } from "../../validate/hostname.ts";
import type { Tunnel } from "../registry.ts";
import { BodyMemory, DEFAULT_RESPONSE_BODY_BYTES, DEFAULT_SSE_EVENT_BYTES, type BodyReading } from "./body-reading.ts";
import { policiesChanged } from "./live-rejudge.ts";
import { OutgoingRequests, type OutgoingLimits } from "./outgoing-requests.ts";
import { PolicySignIn } from "./oidc-sign-in.ts";
import { TunnelPolicy } from "./tunnel-policy.ts";

/** What an operator's policy covers. */
export type PolicyScope = { kind: "server" } | { kind: "user"; userId: number } | { kind: "hostname"; hostname: string };

/** An operator's policy, loaded. */
export interface OperatorPolicy {
  id: number;
  name: string;
  scope: PolicyScope;
  policy: Policy;
}

export interface EdgePolicyOptions {
  /** The caps a policy is loaded under (the server's --policy-max-* flags and the like: config/server.ts); its run holds to them too. */
  limits?: Partial<PolicyLimits>;
  /** Rate-limit buckets kept in this process (--policy-rate-limit-buckets). */
  rateLimitBuckets?: number;
  /** Where the rate limits count (a cluster's, shared by its nodes); default in this process, rateLimitBuckets of them. */
  rateLimits?: RateLimitStore;
  /** Plain-http JWKS URLs on loopback are taken (--oidc-http-issuers loopback). */
  httpLoopback?: boolean;
  /** --basic-auth-limit, for the basic-auth action. */
  basicAuthLimit?: number;
  /** Milliseconds of compiling one user's tunnel policies may take a minute (--policy-compile-budget). */
  compileBudgetMs?: number;
  /** Request bodies read for the actions that need them (--policy-body-limit, --policy-body-timeout, --policy-body-memory). */
  body?: { maxBytes: number; timeoutMs: number; memoryBytes: number; responseMaxBytes?: number; sseEventMaxBytes?: number };
  /** How jwt-validation's key sets are fetched and kept (--policy-jwks-max-bytes, --policy-jwks-timeout, --policy-jwks-cache). */
  jwks?: JwksSettings;
  /** What answers conn.geo.* (--geoip-db: geoip.ts); none: a policy that reads them does not load. */
  geoip?: GeoLookup;
  /** Tunnel policies kept compiled (--policy-compiled-kept). */
  compiledKept?: number;
  /** The http-request action's requests: where they may go and their bounds (--policy-http-request-*). */
  httpRequest?: Partial<OutgoingLimits>;
}

/** --policy-body-timeout's and --policy-body-memory's defaults (--policy-body-limit's is the engine's MAX_BODY_BYTES). */
export const DEFAULT_BODY_TIMEOUT_MS = 30_000;
export const DEFAULT_BODY_MEMORY = 64 * 1024 * 1024;

/** --policy-compile-budget's default: a policy at the caps takes about a second to compile. */
export const DEFAULT_COMPILE_BUDGET_MS = 3_000;
/** Tunnel policies kept compiled, by their text and tunnel, by default (--policy-compiled-kept): an agent that reconnects costs no compile. */
export const DEFAULT_COMPILED_KEPT = 64;
/** Users whose compile time is counted at once; past it the counts start again. */
const USERS_COUNTED = 10_000;

/** A tcp or tls tunnel's policy with rules of the http phases, which nothing would run. */
export const HTTP_RULES_ON_RAW = "a tcp or tls tunnel's traffic policy runs on_tcp_connect only: its on_http_request, on_http_response and on_event_stream_message rules would never run";

/** The errors of a policy as one message: at most this many, each with its line. */
const ERRORS_SAID = 10;

export class EdgePolicies {
  readonly services: PolicyServices;
  readonly limits: Partial<PolicyLimits>;
  /** How bodies are read for the actions that need them, and what all of them hold at once. */
  readonly body: BodyReading;
  /** The operator's policies, in the order they were made (by id). */
  private operator: OperatorPolicy[] = [];
  /** They have been read (operator-layers.ts): until then every tunnel meets a layer that lets nothing through. */
  private loaded = false;

  /** What a tunnel meets before the operator's policies are first read (operator-layers.ts NOT_LOADED); none: they are taken as none. */
  notLoaded: Policy | undefined;
  private readonly compileBudgetMs: number;
  /** Tunnel policies compiled (or refused), least recently used first. */
  private readonly compiled = new Map<string, Policy | AppError>();
  private readonly compiledKept: number;
  /** Each user's compile time in the minute that began at `since`. */
  private readonly spent = new Map<number, { since: number; ms: number }>();

  constructor(
    /** The server's domain: a tunnel's subdomain is `<name>.<domain>` to a hostname scope. */
    private readonly domain: string,
    opts: EdgePolicyOptions = {},
  ) {
    this.limits = opts.limits ?? {};
    this.compileBudgetMs = opts.compileBudgetMs ?? DEFAULT_COMPILE_BUDGET_MS;
    this.compiledKept = opts.compiledKept ?? DEFAULT_COMPILED_KEPT;
    this.body = {
      maxBytes: opts.body?.maxBytes ?? MAX_BODY_BYTES,
      timeoutMs: opts.body?.timeoutMs ?? DEFAULT_BODY_TIMEOUT_MS,
      memory: new BodyMemory(opts.body?.memoryBytes ?? DEFAULT_BODY_MEMORY),
      responseMaxBytes: opts.body?.responseMaxBytes ?? DEFAULT_RESPONSE_BODY_BYTES,
      sseEventMaxBytes: opts.body?.sseEventMaxBytes ?? DEFAULT_SSE_EVENT_BYTES,
    };
    this.services = defaultServices({
      rateLimits: opts.rateLimits ?? new MemoryRateLimitStore(opts.rateLimitBuckets),
      httpLoopback: opts.httpLoopback ?? false,
      basicAuthLimit: opts.basicAuthLimit ?? 10,
      keySets: new RemoteKeySets(opts.jwks),
      // openid-connect: the edge's own sign-in (today's --oidc-issuer), plain-http issuers as the server allows them
      oidc: new PolicySignIn(opts.httpLoopback ?? false),
      geo: opts.geoip,
      httpRequests: new OutgoingRequests(opts.httpRequest),
    });
  }

  /**
   * A tunnel's own policy from its HELLO's text, or POLICY_INVALID with
   * its errors. `label`: the tunnel's name, which its rate limits' counts
   * are kept under, so an agent that reconnects keeps counting. Compiling
   * is synchronous and a policy at the caps takes about a second: the
   * same policy for the same tunnel is compiled once (kept, --policy-compiled-kept),
   * and a user whose compiles took their budget this minute is refused
   * (POLICY_LIMITED; the agent tries again later) before anything is
   * compiled, so no user holds the edge's CPU with handshakes.
   */
  own(text: string, label: string, http: boolean, userId: number): Policy | AppError {
    const key = createHash("sha256").update(`${label}\0${http}\0${text}`).digest("base64url");
    const known = this.compiled.get(key);
    if (known) {
      this.compiled.delete(key);
      this.compiled.set(key, known);
      return known;
    }
    const now = Date.now();
    let spent = this.spent.get(userId);
    if (!spent || now - spent.since >= 60_000) {
      if (this.spent.size >= USERS_COUNTED) this.spent.clear();
      this.spent.set(userId, (spent = { since: now, ms: 0 }));
    }
    if (spent.ms >= this.compileBudgetMs) {
      return new AppError("POLICY_LIMITED", `this server compiled ${Math.round(spent.ms)} ms of your tunnels' traffic policies in the last minute, its cap (--policy-compile-budget): try again in a minute`);
    }
    const started = performance.now();
    const out = this.compile(text, label, http);
    spent.ms += performance.now() - started;
    this.compiled.set(key, out);
    if (this.compiled.size > this.compiledKept) this.compiled.delete(this.compiled.keys().next().value!);
    return out;
  }

  private compile(text: string, label: string, http: boolean): Policy | AppError {
    const policy = loadPolicy(text, { source: "policy", key: `tunnel:${label}`, limits: this.limits, services: this.services });
    if (!Array.isArray(policy)) {
      // rules that would never run are a mistake, not a protection
      if (!http && (policy.has("on_http_request") || policy.has("on_http_response") || policy.has("on_event_stream_message"))) return new AppError("POLICY_INVALID", HTTP_RULES_ON_RAW);
      return policy;
    }
    const said = policy.slice(0, ERRORS_SAID).map((e) => formatPolicyError(e, "policy"));
    if (policy.length > ERRORS_SAID) said.push(`(and ${policy.length - ERRORS_SAID} more)`);
    return new AppError("POLICY_INVALID", `the tunnel's traffic policy does not load:\n${said.join("\n")}`);
  }

  /** The operator's policies now: each live tunnel's layers are made again. */
  setOperator(policies: readonly OperatorPolicy[], tunnels: Iterable<Tunnel>): void {
    this.operator = [...policies].sort((a, b) => a.id - b.id);
    this.loaded = true;
    let changed = 0;
    for (const t of tunnels) {
      const before = t.policy;
      if (!this.refresh(t)) continue;
      changed++;
      // what it carries already meets them too: judged again, a batch at a time (live-rejudge.ts)
      policiesChanged(t, before);
    }
    if (changed > 0) log.info("operator's traffic policies applied to live tunnels", { policies: this.operator.length, tunnels: changed });
  }

  /** A tunnel's layers made again from the operator's policies now and its own; whether they changed. */
  refresh(t: Tunnel): boolean {
    const before = t.policy;
    t.policy = TunnelPolicy.of(this.layersFor(t), t.policy?.own, t.access?.flags, this.body);
    return before !== t.policy;
  }

  /** A tunnel's layers with its own policy (a handshake's) and its access flags' (Tunnel.access, set before). */
  attach(t: Tunnel, own: Policy | undefined): void {
    t.policy = TunnelPolicy.of(this.layersFor(t), own, t.access?.flags, this.body);
  }

  /**
   * The operator's layers that cover a tunnel, outermost first: the
   * server's, then its user's, then its names' (its subdomain under the
   * domain, its custom hostname); in each scope in the order they were made.
   * A private tunnel is covered by none (the edge does not read its
   * traffic).
   */
  layersFor(t: Tunnel): Policy[] {
    if (t.privateName !== undefined) return [];
    if (!this.loaded) return this.notLoaded ? [this.notLoaded] : [];
    if (this.operator.length === 0) return [];
    const names = [t.subdomain !== undefined ? `${t.subdomain}.${this.domain}` : undefined, t.hostname].filter((n): n is string => n !== undefined);
    const server = [];
    const user = [];
    const host = [];
    for (const p of this.operator) {
      const s = p.scope;
      if (s.kind === "server") server.push(p.policy);
      else if (s.kind === "user") {
        if (s.userId === t.userId) user.push(p.policy);
      } else if (names.some((n) => hostnameCovers(s.hostname, n))) host.push(p.policy);
    }
    return [...server, ...user, ...host];
  }
}
