/**
 * The variables a policy's expressions read, computed from the run's
 * facts and its working request and response only when an expression
 * reads them, and kept until an action changes what they were made from;
 * and what the functions reach (getReqHeader and the like).
 */
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import type { Budget, EvaluationScope } from "./cel/evaluation.ts";
import type { HeaderPairs, PolicyInput } from "./facts.ts";
import { placeOf, type GeoFacts, type GeoLookup } from "./geo.ts";
import type { PolicyLimits } from "./limits.ts";
import { HeaderMap, type WorkingRequest, type WorkingResponse } from "./message.ts";
import { responseCookiesValue } from "./set-cookie.ts";
import { VARIABLES } from "./variables.ts";

/** "example.com:8443" -> host and port; "[::1]:80" too. */
function splitAuthority(authority: string, scheme: string): { host: string; port: number } {
  const m = /^(\[[^\]]*\]|[^:]*)(?::(\d{1,5}))?$/.exec(authority);
  const defaultPort = scheme === "https" ? 443 : 80;
  if (!m) return { host: authority, port: defaultPort };
  return { host: m[1]!.replace(/^\[|\]$/g, ""), port: m[2] !== undefined ? Number(m[2]) : defaultPort };
}

function queryMap(query: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  if (query === "") return out;
  for (const [k, v] of new URLSearchParams(query)) {
    const list = out.get(k);
    if (list) list.push(v);
    else out.set(k, [v]);
  }
  return out;
}

function cookieMap(header: string | undefined): Map<string, { name: string; value: string }[]> {
  const out = new Map<string, { name: string; value: string }[]>();
  if (!header) return out;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    if (name === "") continue;
    const cookie = { name, value: part.slice(eq + 1).trim().replace(/^"(.*)"$/, "$1") };
    const list = out.get(name);
    if (list) list.push(cookie);
    else out.set(name, [cookie]);
  }
  return out;
}

const mediaType = (v: string | undefined) => (v ?? "").split(";")[0]!.trim().toLowerCase();
const codings = (v: string | undefined) => (v ?? "").split(",").map((s) => s.trim()).filter(Boolean);
/** A Content-Type's parameters (`; charset="utf-8"`): lower-case names, values unquoted; the first of a name kept. */
function typeParameters(v: string | undefined): Map<string, string> {
  const out = new Map<string, string>();
  const parts = (v ?? "").split(";");
  for (let i = 1; i < parts.length; i++) {
    const eq = parts[i]!.indexOf("=");
    if (eq < 1) continue;
    const name = parts[i]!.slice(0, eq).trim().toLowerCase();
    let value = parts[i]!.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) value = value.slice(1, -1).replace(/\\(.)/g, "$1");
    if (name && !out.has(name)) out.set(name, value);
  }
  return out;
}
const lengthOf = (v: string | undefined) => (v !== undefined && /^\d{1,15}$/.test(v.trim()) ? BigInt(v.trim()) : -1n);

/** "example.com:443"; an IPv6 host in brackets ("[::1]:443"). */
const hostPort = (host: string, port: number) => (host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`);

type Getter = (b: Bindings) => unknown;

/** Each variable's value, from the run's state. */
const GETTERS: Record<string, Getter> = {
  "conn.client_ip": (b) => b.input.conn.clientIp,
  "conn.client_port": (b) => BigInt(b.input.conn.clientPort),
  "conn.server_ip": (b) => b.input.conn.serverIp ?? "",
  "conn.server_port": (b) => BigInt(b.input.conn.serverPort),
  "conn.server_region": (b) => b.input.conn.serverRegion ?? "",
  "conn.bytes_in": (b) => BigInt(b.input.conn.bytesIn ?? 0),
  "conn.bytes_out": (b) => BigInt(b.input.conn.bytesOut ?? 0),
  "conn.tls.version": (b) => b.input.conn.tls?.version ?? "",
  "conn.tls.cipher_suite": (b) => b.input.conn.tls?.cipherSuite ?? "",
  "conn.tls.sni": (b) => b.input.conn.tls?.sni ?? "",
  "conn.tls.negotiated_alpn": (b) => b.input.conn.tls?.negotiatedAlpn ?? "",
  "conn.tls.session_resumed": (b) => b.input.conn.tls?.sessionResumed ?? false,
  "conn.tls.ja4_fingerprint": (b) => b.input.conn.tls?.ja4 ?? "",
  "conn.geo.city": (b) => b.place().city,
  "conn.geo.country": (b) => b.place().country,
  "conn.geo.country_code": (b) => b.place().countryCode,
  "conn.geo.latitude": (b) => b.place().latitude,
  "conn.geo.longitude": (b) => b.place().longitude,
  "conn.geo.radius": (b) => b.place().radius,
  "conn.geo.subdivision": (b) => b.place().subdivision,
  "conn.ts.start": (b) => timestampFromMs(b.input.conn.openedAt),
  "endpoint.id": (b) => b.input.tunnel.id ?? "",
  "endpoint.addr": (b) => hostPort(b.input.endpoint.host, b.input.endpoint.port),
  "endpoint.host": (b) => b.input.endpoint.host,
  "endpoint.port": (b) => BigInt(b.input.endpoint.port),
  "endpoint.protocol": (b) => b.input.endpoint.protocol,
  "endpoint.url": (b) => b.input.endpoint.url,
  "tunnel.name": (b) => b.input.tunnel.name,
  "tunnel.kind": (b) => b.input.tunnel.kind,
  "user.name": (b) => b.input.tunnel.user,
  "time.now": (b) => new Date(b.now).toISOString().replace(/\.\d{3}Z$/, "Z"),
  "req.method": (b) => b.req().method,
  "req.version": (b) => b.req().version,
  "req.url": (b) => b.req().url,
  "req.url.scheme": (b) => b.req().scheme,
  "req.url.host": (b) => splitAuthority(b.req().host, b.req().scheme).host,
  "req.url.port": (b) => BigInt(splitAuthority(b.req().host, b.req().scheme).port),
  "req.url.authority": (b) => b.req().host,
  "req.url.path": (b) => b.req().path,
  "req.url.raw_path": (b) => b.req().rawTarget.split("?")[0],
  "req.url.query": (b) => b.req().query,
  "req.url.uri": (b) => b.req().target,
  "req.url.raw": (b) => `${b.req().scheme}://${b.req().host}${b.req().rawTarget}`,
  // userinfo in an http(s) target is an error (RFC 9110 §4.2.4): the edge answers 400 to an absolute-form target or
  // an HTTP/2 :authority that carries one, so no request a policy sees has any
  "req.url.user_password": () => "",
  "req.url.query_params": (b) => b.query(),
  "req.query_params": (b) => b.query(),
  "req.headers": (b) => b.headers("req"),
  "req.host": (b) => b.req().host,
  "req.user_agent": (b) => b.req().header("user-agent") ?? "",
  "req.content_type": (b) => mediaType(b.req().header("content-type")),
  "req.content_type.raw": (b) => b.req().header("content-type") ?? "",
  "req.content_type.parameters": (b) => typeParameters(b.req().header("content-type")),
  "req.content_encoding": (b) => codings(b.req().header("content-encoding")),
  "req.location": (b) => b.req().header("location") ?? "",
  "req.content_length": (b) => lengthOf(b.req().header("content-length")),
  "req.cookies": (b) => new Map([...b.cookies()].map(([k, list]) => [k, list.map((c) => new Map(Object.entries(c)))])),
  "req.ts.header_received": (b) => timestampFromMs(b.req().receivedAt),
  "res.status_code": (b) => BigInt(b.res().status),
  "res.headers": (b) => b.headers("res"),
  "res.cookies": (b) => responseCookiesValue(b.header("res", "set-cookie")),
  "res.content_type": (b) => mediaType(b.res().header("content-type")),
  "res.content_type.raw": (b) => b.res().header("content-type") ?? "",
  "res.content_type.parameters": (b) => typeParameters(b.res().header("content-type")),
  "res.content_length": (b) => lengthOf(b.res().header("content-length")),
  "res.content_encoding": (b) => codings(b.res().header("content-encoding")),
  "res.location": (b) => b.res().header("location") ?? "",
  "visitor.identity": (b) => b.identity ?? "",
  actions: (b) => ({ ngrok: b.actionVars }),
  vars: (b) => b.userVars,
};

for (const name of Object.keys(VARIABLES)) if (!GETTERS[name]) throw new Error(`the variable ${name} has no value`);

/**
 * Each variable's value made anew from the run's state, for the compiled
 * fast path (cel/fast.ts), which reads the plain ones (a string, a method,
 * a header) directly; the maps among them are the run's own, kept.
 */
export const VARIABLE_READERS: Readonly<Record<string, (b: Bindings) => unknown>> = GETTERS;

/**
 * The variables' object CEL reads (`ObjectActivation` reads `data[name]`):
 * one getter per variable on a shared prototype, each reading through the
 * run's Bindings and keeping its value until the Bindings say it changed.
 */
const VARIABLES_PROTOTYPE: object = (() => {
  const proto = {};
  for (const [name, get] of Object.entries(GETTERS)) {
    Object.defineProperty(proto, name, {
      get(this: { bindings: Bindings }) {
        return this.bindings.kept(name, get);
      },
    });
  }
  return proto;
})();

/**
 * One run's variables and what functions reach: the working request and
 * response, the identity, the actions' results. Made for each layer's run
 * of a phase, so it makes nothing it is not asked for: the object CEL
 * reads, the values kept for it and the header maps come when an
 * expression evaluated by CEL first needs them (the compiled fast path
 * reads the message itself).
 */
export class Bindings implements EvaluationScope {
  private cache: Map<string, unknown> | undefined;
  private vars: object | undefined;
  private actionValues: Record<string, unknown> | undefined;
  private userValues: Map<string, unknown> | undefined;
  private who: string | undefined;
  /** Who an earlier layer let in: it stays who the visitor is (a later layer's sign-in does not rename it). */
  private readonly outer: string | undefined;
  readonly now: number;
  private reqHeaders: HeaderMap | undefined;
  private resHeaders: HeaderMap | undefined;
  private queryCache?: Map<string, string[]>;
  private cookieCache?: Map<string, { name: string; value: string }[]>;

  /** The run's budget (limits.ts costLimit): what is left of it, and whether it was spent past (Budget's fields, kept here: one object less a run). */
  remaining: number;
  exceeded = false;

  constructor(
    readonly input: PolicyInput,
    /** The caps of the policy that runs: its cost limit, what the functions (cel/evaluation.ts caps) and the actions hold to. */
    readonly caps: PolicyLimits,
    readonly request: WorkingRequest | undefined,
    readonly response: WorkingResponse | undefined,
    /** Who an earlier layer let in (default: the input's). */
    identity: string | undefined = input.identity,
  ) {
    this.remaining = caps.costLimit;
    this.now = input.now ?? Date.now();
    this.outer = identity;
    this.who = identity;
  }

  /** What the functions spend from (cel/evaluation.ts charge). */
  get budget(): Budget {
    return this;
  }

  /** The object CEL evaluates against. */
  get variables(): object {
    return (this.vars ??= Object.create(VARIABLES_PROTOTYPE, { bindings: { value: this } }));
  }

  /** A variable's value, made once and kept until the run's state changes. */
  kept(name: string, get: (b: Bindings) => unknown): unknown {
    const cache = (this.cache ??= new Map());
    const cached = cache.get(name);
    if (cached !== undefined || cache.has(name)) return cached;
    const value = get(this);
    cache.set(name, value);
    return value;
  }

  /** Action result variables by ngrok's name (`rate_limit`, `basic_auth`, ...): `actions.ngrok.<name>`. */
  get actionVars(): Record<string, unknown> {
    return (this.actionValues ??= {});
  }

  /** What set-vars set in this run (`vars.<name>`): scoped to one phase of one policy, as ngrok scopes them. */
  get userVars(): Map<string, unknown> {
    return (this.userValues ??= new Map());
  }

  /** set-vars set `vars.<name>`: what reads `vars` is read again. */
  setVar(name: string, value: unknown): void {
    this.userVars.set(name, value);
    this.cache?.delete("vars");
  }

  /** Who the visitor is (`visitor.identity`): the first authentication's answer, an earlier layer's first. */
  get identity(): string | undefined {
    return this.who;
  }

  /** An authentication action let the visitor in as `name` (ignored when an earlier layer already said who). */
  set identity(name: string | undefined) {
    if (this.outer === undefined) this.who = name;
  }

  /** What answers conn.geo.* (the services' GeoIP lookup): none here; a policy's run has its services'. */
  protected get geoLookup(): GeoLookup | undefined {
    return undefined;
  }

  /** Where the visitor is (conn.geo.*): looked up when first read, once per connection's facts and address (geo.ts). */
  place(): GeoFacts {
    return placeOf(this.input.conn, this.geoLookup);
  }

  req(): WorkingRequest {
    if (!this.request) throw new Error("no request in this phase");
    return this.request;
  }

  res(): WorkingResponse {
    if (!this.response) throw new Error("no response in this phase");
    return this.response;
  }

  /** An action changed the request or response, the identity or its variables: what was read of them is read again. */
  changed(): void {
    this.cache?.clear();
    this.reqHeaders = undefined;
    this.resHeaders = undefined;
    this.queryCache = undefined;
    this.cookieCache = undefined;
  }

  /** An action set its result variables (`actions.ngrok.*`): only what reads them is read again. */
  variablesChanged(): void {
    this.cache?.delete("actions");
  }

  headers(of: "req" | "res"): HeaderMap {
    if (of === "req") return (this.reqHeaders ??= HeaderMap.of(this.req().fields));
    return (this.resHeaders ??= HeaderMap.of(this.res().fields));
  }

  query(): Map<string, string[]> {
    this.queryCache ??= queryMap(this.req().query);
    return this.queryCache;
  }

  cookies(): Map<string, { name: string; value: string }[]> {
    this.cookieCache ??= cookieMap(this.req().fields.filter(([n]) => n.toLowerCase() === "cookie").map(([, v]) => v).join("; "));
    return this.cookieCache;
  }

  /** A header's values (name in any case), or undefined: read off the message, or its map when one was made. */
  header(of: "req" | "res", name: string): readonly string[] | undefined {
    const map = of === "req" ? this.reqHeaders : this.resHeaders;
    if (map) return map.get(name);
    const message = of === "req" ? this.request : this.response;
    if (!message) return undefined;
    return valuesOf(message.fields, name);
  }

  queryParam(name: string): readonly string[] | undefined {
    return this.request ? this.query().get(name) : undefined;
  }

  cookie(name: string): { name: string; value: string } | undefined {
    return this.request ? this.cookies().get(name)?.[0] : undefined;
  }
}

/** The values of the fields named `name` (in any case), in order, or undefined when there is none: HeaderMap.get's answer without the map. */
function valuesOf(fields: HeaderPairs, name: string): string[] | undefined {
  const lower = name.toLowerCase();
  let out: string[] | undefined;
  for (let i = 0; i < fields.length; i++) {
    const field = fields[i]!;
    // field names are tokens (ASCII, as the parsers and the actions check them): lower case keeps their length
    if (field[0].length !== lower.length || field[0].toLowerCase() !== lower) continue;
    (out ??= []).push(field[1]);
  }
  return out;
}
