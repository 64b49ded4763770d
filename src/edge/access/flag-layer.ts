/**
 * A tunnel's access flags as the traffic policy they mean: its IP rules
 * (--allow-cidr, --deny-cidr, its user's allow_cidrs), basic auth
 * (--basic-auth) and header rules (--request-header-add/-remove,
 * --response-header-add), and the same settings from burrow.yml and the
 * SDK, compiled into rules the policy engine (src/policy/) runs as the
 * tunnel's flags layer: after the operator's layers, before the tunnel's
 * own policy file, in every phase (docs/policy.md, "The flags as a
 * policy"). The rules' actions are the edge's: they answer as the flags
 * always have (the same pages, status codes and fields) and report their
 * refusals under the same codes (ADDRESS_REFUSED, SIGN_IN), which the
 * doors answer as before.
 *
 * The OIDC sign-in (--oidc-issuer) is the engine's openid-connect action
 * itself, compiled from the flags' settings and lent the tunnel's own
 * sign-in (oidc-flag.ts: the gate made at the handshake, today's pages,
 * cookies and keys); it runs after basic auth and before the request
 * header rules, so it reads the visitor's own cookies. Every other action
 * runs at once (none waits), so the flags cost a request no promise unless
 * it signs visitors in.
 */
import * as v from "valibot";
import type { ActionDefinition, ActionResult, CompiledAction, CompileTools } from "../../policy/actions/types.ts";
import { ACTIONS, DEFAULT_POLICY_LIMITS, defaultServices, Policy, type PolicyServices } from "../../policy/index.ts";
import type { CompiledRule } from "../../policy/policy.ts";
import type { Phase } from "../../policy/variables.ts";
import type { BasicAuth } from "./basic-auth.ts";
import type { HeaderRules } from "./header-rules.ts";
import type { IpRules } from "./ip-rules.ts";
import type { OidcGate, OidcSettings } from "./oidc.ts";
import { TunnelSignIn } from "./oidc-flag.ts";
import { addressRefused, signInRequired, tooManyGuesses } from "./pages.ts";

/** The source its runs name (the log, the inspector). */
export const FLAGS_SOURCE = "the tunnel's flags";

/** The rules' names, as the traces show them. */
export const FLAG_RULES = {
  ip: "the tunnel's IP rules",
  basicAuth: "the tunnel's basic auth",
  oidc: "the tunnel's OIDC sign-in",
  requestHeaders: "the tunnel's request header rules",
  responseHeaders: "the tunnel's response header rules",
} as const;

export interface FlagRules {
  /** An http tunnel's (its requests and responses are judged) or a tcp or tls tunnel's (its connections are). */
  kind: "http" | "raw";
  ip?: IpRules;
  basic?: BasicAuth;
  /** The OIDC sign-in: its settings as the agent asked them, and the gate the handshake made for them. */
  oidc?: { issuer: string; settings: OidcSettings; gate: OidcGate };
  headers?: HeaderRules;
}

/** What every flags layer is lent: none of its actions counts, fetches or signs in through them. */
let services: PolicyServices | undefined;

/** The flags layer, or undefined when the flags make no rule. */
export function flagLayer(flags: FlagRules): Policy | undefined {
  const rules: Record<Phase, CompiledRule[]> = { on_tcp_connect: [], on_http_request: [], on_http_response: [], on_event_stream_message: [] };
  const rule = (phase: Phase, label: string, action: CompiledAction) => rules[phase].push({ label, expressions: [], actions: [action] });
  if (flags.kind === "raw") {
    if (flags.ip) rule("on_tcp_connect", FLAG_RULES.ip, ipRules(flags.ip));
  } else {
    if (flags.ip) rule("on_http_request", FLAG_RULES.ip, ipRules(flags.ip));
    if (flags.basic) rule("on_http_request", FLAG_RULES.basicAuth, basicAuth(flags.basic));
    // the sign-in reads the visitor's own cookies: before the header rules change the request
    if (flags.oidc) rule("on_http_request", FLAG_RULES.oidc, oidcSignIn(flags.oidc));
    const headers = flags.headers;
    if (headers?.rewritesRequest) rule("on_http_request", FLAG_RULES.requestHeaders, { type: "header-rules", run: (ctx) => (headers.applyToRequest(ctx.bindings.req()), ctx.bindings.changed(), SET) });
    if (headers?.rewritesResponse) rule("on_http_response", FLAG_RULES.responseHeaders, { type: "header-rules", run: (ctx) => (headers.applyToResponse(ctx.bindings.res()), ctx.bindings.changed(), SET) });
  }
  if (rules.on_tcp_connect.length + rules.on_http_request.length + rules.on_http_response.length === 0) return undefined;
  services ??= defaultServices();
  // the openid-connect action asks the sign-in it is lent: this tunnel's own
  const lent = flags.oidc ? { ...services, oidc: new TunnelSignIn(flags.oidc.gate) } : services;
  return new Policy(FLAGS_SOURCE, rules, DEFAULT_POLICY_LIMITS, lent, { readsActionVariables: false });
}

const ALLOWED: ActionResult = { kind: "continue", note: "allowed" };
const SIGNED_IN: ActionResult = { kind: "continue", note: "signed in" };
const SET: ActionResult = { kind: "continue", note: "applied" };

/** The IP rules on the visitor's address: a refused request gets the 403 page, a refused connection is closed. */
function ipRules(ip: IpRules): CompiledAction {
  return {
    type: "restrict-ips",
    run(ctx) {
      const client = ctx.bindings.input.conn.clientIp;
      if (ip.allows(client)) return ALLOWED;
      if (ctx.phase === "on_tcp_connect") return { kind: "close", note: `${client} refused`, code: "ADDRESS_REFUSED" };
      return { kind: "respond", response: addressRefused(ctx.bindings.req().host, client), note: `${client} refused`, code: "ADDRESS_REFUSED" };
    },
  };
}

/**
 * Basic auth (basic-auth.ts: digests compared in constant time, wrong
 * passwords counted per address): the 401 page with the browser's prompt,
 * or 429 while the address is locked; signed in, the Authorization field
 * goes no further than the edge.
 */
function basicAuth(basic: BasicAuth): CompiledAction {
  return {
    type: "basic-auth",
    run(ctx) {
      const req = ctx.bindings.req();
      // every Authorization field, as one value (as a Request's headers read them: two are no credential)
      const given = ctx.bindings.header("req", "authorization");
      const verdict = basic.judge(ctx.bindings.input.conn.clientIp, given === undefined ? null : given.join(", "));
      if (verdict.retryAt !== undefined) {
        const retry = Math.max(1, Math.ceil((verdict.retryAt - Date.now()) / 1000));
        return { kind: "respond", response: tooManyGuesses(req.host, retry), note: "locked: too many wrong passwords", code: "SIGN_IN" };
      }
      if (!verdict.passed) return { kind: "respond", response: signInRequired(req.host, basic.challenge), note: given ? "wrong user or password" : "no credentials", code: "SIGN_IN" };
      const headers = req.headers;
      for (let i = headers.length - 1; i >= 0; i--) if (headers[i]![0].toLowerCase() === "authorization") headers.splice(i, 1);
      ctx.bindings.changed();
      return SIGNED_IN;
    },
  };
}

/**
 * --oidc as the openid-connect action (policy/actions/openid-connect.ts),
 * compiled from the flags' settings (the scopes today's sign-in asks:
 * openid and email). What it answers is the sign-in's (SIGN_IN): the
 * provider's redirect, the callback's end, a 401.
 */
function oidcSignIn(oidc: NonNullable<FlagRules["oidc"]>): CompiledAction {
  const { settings } = oidc;
  const action = fromRegistry("openid-connect", { issuer_url: oidc.issuer, client_id: settings.clientId, client_secret: settings.clientSecret, allow_emails: settings.allowEmails ?? [], scopes: [] });
  return {
    type: action.type,
    run(ctx) {
      const out = action.run(ctx);
      return out instanceof Promise ? out.then(asSignIn) : asSignIn(out);
    },
  };
}

const asSignIn = (r: ActionResult): ActionResult => (r.kind === "respond" ? { ...r, code: "SIGN_IN" } : r);

/**
 * An action of the engine's registry compiled from a config the flags make.
 * The settings were checked at the handshake as the agent's (core/access.ts,
 * with the same checks the action makes): a mistake here is a bug, and the
 * config is never quoted (it holds a secret).
 */
function fromRegistry(type: string, config: unknown): CompiledAction {
  const def = ACTIONS.get(type) as ActionDefinition<unknown>;
  const parsed = v.safeParse(def.schema, config);
  let wrong = !parsed.success;
  const tools: CompileTools = {
    phase: "on_http_request",
    limits: DEFAULT_POLICY_LIMITS,
    key: `flags/${type}`,
    expression: () => void (wrong = true),
    template: () => void (wrong = true),
    error: () => void (wrong = true),
  };
  const action = parsed.success ? def.compile(parsed.output, tools) : undefined;
  if (!action || wrong) throw new Error(`the tunnel's flags do not make a valid ${type} action`);
  return action;
}
