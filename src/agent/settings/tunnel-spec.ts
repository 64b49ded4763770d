/**
 * One tunnel, as its three front-ends ask for it: the flags of `burrow
 * http|tcp|tls|udp` (cli/agent.ts, cli/access-flags.ts), a tunnel of
 * burrow.yml (tunnels-file.ts) and the options of burrow-agent's forward()
 * (sdk/src/index.ts). Each front-end reads its own syntax (flag names, YAML
 * keys with their lines, camelCase options) and parses each value with
 * tunnel-options.ts; what may go with what is decided here, once:
 *
 * - which kinds take which option (TUNNEL_OPTIONS);
 * - a private tunnel is not public: no public name, port, pool or, for http,
 *   access rule goes with it; it needs a name, and `name` and `share` go
 *   with it only;
 * - basic auth or OIDC, not both;
 * - a pool's balance and health check go with the pool; a tcp pool needs
 *   its remote port, which is the pool's name;
 * - HTTP/2 to the service goes with a local service (not a handler), h2c
 *   with plain addresses and h2 with https:// ones, routes' included, and
 *   a pool member's health check is then a connect, not a GET; its limits
 *   (upstream-h2.ts) go with it only.
 *
 * A front-end gives a Voice: how it names an option, so that every message
 * reads in its own words ("--basic-auth", "basic_auth", "basicAuth"). The
 * spec then says the request the agent sends (tunnelOf).
 */
import * as v from "valibot";
import { KIND_NAMES, NAMED_KINDS, PORT_KINDS, PRIVATE_KINDS, reachedByPort, type TunnelKind } from "../../protocol/kinds.ts";
import { TUNNEL_POLICY_MAX_CHARS, type PrivateRequest } from "../../protocol/messages.ts";
import type { SpecTunnel, TunnelSpec } from "./tunnel-spec-types.ts";
import { PRIVATE_NAME_PATTERN } from "../../validate/fields.ts";
import { UsageError } from "../../usage-error.ts";
import { AGENT_KINDS } from "../kinds/index.ts";
import { UPSTREAM_H2_TUNNEL_OPTIONS, upstreamH2Problem } from "./upstream-h2.ts";

/** The kinds a tunnel may be: the kind table's names (protocol/kinds.ts). */
export const KINDS: readonly TunnelKind[] = KIND_NAMES;
export type Kind = TunnelKind;

/** "a", "a and b", "a, b and c". */
export function listed(items: readonly string[], last = "and"): string {
  return items.length <= 1 ? (items[0] ?? "") : `${items.slice(0, -1).join(", ")} ${last} ${items.at(-1)}`;
}

/** A tunnel's kind as a person writes it: http, tcp, tls or udp. */
export function parseKind(raw: unknown): Kind {
  if (typeof raw === "string" && (KINDS as readonly string[]).includes(raw)) return raw as Kind;
  throw new UsageError(`must be ${listed(KINDS, "or")} (got '${String(raw).replace(/[^\x20-\x7e]/g, "?").slice(0, 40)}')`);
}

/**
 * Every option of a tunnel, by its name in the spec (burrow-agent's): the
 * kinds that take it, and `public`: the kinds on which it makes the tunnel
 * public, so that it does not go with `private`. The kind and the local
 * target are not options: every tunnel has them.
 */
export const TUNNEL_OPTIONS = {
  subdomain: { kinds: NAMED_KINDS, public: NAMED_KINDS },
  hostname: { kinds: NAMED_KINDS, public: NAMED_KINDS },
  remotePort: { kinds: PORT_KINDS, public: PORT_KINDS },
  pool: { kinds: ["http", "tcp"], public: ["http", "tcp"] },
  poolBalance: { kinds: ["http", "tcp"] },
  healthCheck: { kinds: ["http", "tcp"] },
  healthInterval: { kinds: ["http", "tcp"] },
  // a tls tunnel passes a public name through: it cannot be private
  private: { kinds: PRIVATE_KINDS },
  name: { kinds: PRIVATE_KINDS },
  share: { kinds: PRIVATE_KINDS },
  hostHeader: { kinds: ["http"] },
  upstreamProtocol: { kinds: ["http"] },
  // the agent's HTTP/2 client limits toward the service (upstream-h2.ts)
  ...UPSTREAM_H2_TUNNEL_OPTIONS,
  routes: { kinds: ["http"] },
  allowUpgrade: { kinds: ["http"] },
  skipWarning: { kinds: ["http"], public: ["http"] },
  responseTimeout: { kinds: ["http"], public: ["http"] },
  inspect: { kinds: ["http"] },
  proxyProtocol: { kinds: ["tcp", "tls"] },
  // who may reach it (docs/access.md): the server never reads a private http tunnel's requests,
  // so none goes with one; a private tcp or udp tunnel keeps its IP rules
  basicAuth: { kinds: ["http"], public: ["http"], access: true },
  allowCidr: { kinds: KINDS, public: ["http"], access: true },
  denyCidr: { kinds: KINDS, public: ["http"], access: true },
  requestHeaderAdd: { kinds: ["http"], public: ["http"], access: true },
  requestHeaderRemove: { kinds: ["http"], public: ["http"], access: true },
  responseHeaderAdd: { kinds: ["http"], public: ["http"], access: true },
  oidc: { kinds: ["http"], public: ["http"], access: true },
  // its own traffic policy (docs/policy.md): the edge reads no private tunnel's traffic, so none goes with one
  policy: { kinds: ["http", "tcp", "tls"], public: ["http", "tcp", "tls"], access: true },
} as const satisfies Record<string, { kinds: readonly Kind[]; public?: readonly Kind[]; access?: true }>;

export type OptionName = keyof typeof TUNNEL_OPTIONS;
export const OPTION_NAMES = Object.keys(TUNNEL_OPTIONS) as OptionName[];

/** How a front-end names an option in its messages: "--allow-cidr", "allow_cidr", "allowCidr". */
export interface Voice {
  name(option: OptionName): string;
  /** A true flag as written: "--private", "private: true". */
  on(option: "private" | "pool"): string;
}

export type { SpecTunnel, TunnelSpec } from "./tunnel-spec-types.ts";

/** A mistake: the option it is about (undefined: the tunnel's) and what is wrong, in the front-end's words. */
export interface SpecProblem {
  option: OptionName | undefined;
  message: string;
}

/** An option counts as given when set and not false (false is every flag's default). */
const given = (spec: TunnelSpec, option: OptionName): boolean => {
  const value = spec[option];
  return value !== undefined && value !== false;
};

/** The values whose form is the spec's own: a private tunnel's name and who it is shared with. */
const Values = v.object({
  name: v.optional(
    v.pipe(
      v.string("must be a string"),
      v.check(
        (raw) => PRIVATE_NAME_PATTERN.test(raw.trim().toLowerCase()),
        (issue) => `must be 1-63 characters from a-z, 0-9 and - (got '${String(issue.input).replace(/[^\x20-\x7e]/g, "?").slice(0, 70)}')`,
      ),
    ),
  ),
  share: v.optional(
    v.pipe(
      v.array(v.pipe(v.string("must be a list of usernames"), v.trim(), v.nonEmpty("must be a list of usernames"), v.maxLength(64, "must be a list of usernames")), "must be a list of usernames"),
      v.maxLength(64, "64 usernames at most"),
    ),
  ),
  // it travels in the HELLO, which is bounded: the edge's caps on a policy are its own (it refuses with POLICY_INVALID)
  policy: v.optional(
    v.pipe(
      v.string("must be the policy's text (YAML or JSON)"),
      v.maxLength(TUNNEL_POLICY_MAX_CHARS, (issue) => `is ${String(issue.input).length} characters; a tunnel's own policy may have ${TUNNEL_POLICY_MAX_CHARS} at most (it travels in the handshake)`),
    ),
  ),
});

/** The rules between options, in the order a mistake is reported: the first that fails is the one said. */
const RULES: ((spec: TunnelSpec, say: Voice) => SpecProblem | undefined)[] = [
  (spec) => kindProblem(spec.kind, (Object.keys(spec) as (keyof TunnelSpec)[]).filter((k): k is OptionName => k in TUNNEL_OPTIONS && spec[k] !== undefined)),
  (spec, say) => {
    if (given(spec, "private")) return undefined;
    const option = (["name", "share"] as const).find((o) => spec[o] !== undefined);
    return option && { option, message: `goes with ${say.on("private")}` };
  },
  (spec, say) => (given(spec, "pool") || spec.poolBalance === undefined ? undefined : { option: "poolBalance", message: `goes with ${say.on("pool")}` }),
  (spec, say) =>
    given(spec, "pool") || spec.healthCheck === undefined ? undefined : { option: "healthCheck", message: `goes with ${say.on("pool")}: it takes a pool member out of rotation` },
  (spec, say) => {
    if (!given(spec, "private")) return undefined;
    const publicOnes = OPTION_NAMES.filter((o) => given(spec, o) && ((TUNNEL_OPTIONS[o] as { public?: readonly Kind[] }).public ?? []).includes(spec.kind));
    if (publicOnes.length === 0) return undefined;
    const access = publicOnes.some((o) => (TUNNEL_OPTIONS[o] as { access?: true }).access);
    return {
      option: "private",
      message: `a private tunnel is not public: ${publicOnes.map(say.name).join(", ")} ${publicOnes.length > 1 ? "do" : "does"} not go with it${access ? `; ${say.name("share")} says who may reach it` : ""}`,
    };
  },
  (spec) => (given(spec, "private") && spec.name === undefined ? { option: "name", message: "missing: a private tunnel's name, reached as you/NAME" } : undefined),
  (spec, say) =>
    reachedByPort(spec.kind) && given(spec, "pool") && spec.remotePort === undefined
      ? { option: "pool", message: `a ${spec.kind} pool needs ${say.name("remotePort")}: the port is the pool's name` }
      : undefined,
  (spec, say) =>
    spec.oidc !== undefined && (spec.basicAuth?.length ?? 0) > 0 ? { option: "oidc", message: `a tunnel takes ${say.name("basicAuth")} or ${say.name("oidc")}, not both` } : undefined,
  upstreamProblem,
  upstreamH2Problem,
];

/**
 * HTTP/2 to the service: to a local service, h2c without TLS and h2 with
 * it, for every service of the tunnel (its routes' too); a pool member's
 * health check by path is an HTTP/1.1 GET, which such a service may not
 * answer: it checks with a connect (tcp) instead.
 */
function upstreamProblem(spec: TunnelSpec, say: Voice): SpecProblem | undefined {
  const protocol = spec.upstreamProtocol;
  if (protocol === undefined || protocol === "http1") return undefined;
  if (spec.target.handler) return { option: "upstreamProtocol", message: "goes with a local service, not a handler" };
  if (spec.healthCheck !== undefined && spec.healthCheck !== "tcp") {
    return { option: "healthCheck", message: `a path is checked with an HTTP/1.1 GET: with ${say.name("upstreamProtocol")} ${protocol}, check with tcp` };
  }
  const services = [spec.target, ...(spec.routes ?? []).map((r) => r.target)];
  if (protocol === "h2c" && services.some((t) => t.tls)) {
    return { option: "upstreamProtocol", message: "h2c is HTTP/2 without TLS: for a service given as https://, use h2" };
  }
  if (protocol === "h2" && services.some((t) => !t.tls)) {
    return { option: "upstreamProtocol", message: "h2 is HTTP/2 over TLS: give the service as https://HOST:PORT (routes too), or use h2c" };
  }
  return undefined;
}

/**
 * Which kinds take which option: the first of `options` (in the order the
 * front-end has them) that this kind does not take. A front-end may ask it
 * before it reads the values, so that an option of another kind is said
 * as such whatever its value.
 */
export function kindProblem(kind: Kind, options: readonly OptionName[]): SpecProblem | undefined {
  for (const option of options) {
    const kinds: readonly Kind[] = TUNNEL_OPTIONS[option].kinds;
    if (!kinds.includes(kind)) return { option, message: `is for ${listed(kinds)} tunnels; this one is ${kind}` };
  }
  return undefined;
}

/** The first mistake of a tunnel's options, in the front-end's words; undefined when it has none. */
export function specProblem(spec: TunnelSpec, say: Voice): SpecProblem | undefined {
  for (const rule of RULES) {
    const problem = rule(spec, say);
    if (problem) return problem;
  }
  const values = v.safeParse(Values, { name: spec.name, share: spec.share, policy: spec.policy });
  if (!values.success) {
    const issue = values.issues[0]!;
    return { option: issue.path?.[0]?.key as OptionName, message: issue.message };
  }
  return undefined;
}

/**
 * The tunnel the agent asks for, from options without a mistake
 * (specProblem first); throws a UsageError only for an allowUpgrade list
 * longer than the protocol carries once its repeats are gone.
 */
export function tunnelOf(spec: TunnelSpec): SpecTunnel {
  const target = spec.target;
  if (spec.proxyProtocol) target.proxyProtocol = true;
  const ip = { allowCidrs: spec.allowCidr ?? [], denyCidrs: spec.denyCidr ?? [] };
  const priv = privateOf(spec);
  const pooled = given(spec, "pool") ? { pool: true as const, balance: spec.poolBalance ?? "round-robin" } : {};
  const health = given(spec, "pool") && spec.healthCheck !== undefined ? { health: { check: spec.healthCheck, intervalMs: (spec.healthInterval ?? 5) * 1000 } } : {};
  const names = { subdomain: spec.subdomain, ...(spec.hostname !== undefined ? { hostname: spec.hostname } : {}) };
  const tunnel = AGENT_KINDS[spec.kind].tunnel(spec, { target, ip, priv, pooled, health, names });
  // the kinds that take one (TUNNEL_OPTIONS) have it in their request: the edge compiles and runs it
  if (spec.policy !== undefined) (tunnel.request as { policy?: string }).policy = spec.policy;
  return tunnel;
}

function privateOf(spec: TunnelSpec): PrivateRequest | undefined {
  if (!given(spec, "private") || spec.name === undefined) return undefined;
  const share = (spec.share ?? []).map((u) => u.trim()).filter((u) => u !== "");
  return { name: spec.name.trim().toLowerCase(), ...(share.length > 0 ? { share } : {}), ...(spec.target.port > 0 ? { localPort: spec.target.port } : {}) };
}
