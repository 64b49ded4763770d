/**
 * The variables a policy's expressions read, computed from the run's
 * facts and its working request and response only when an expression
 * reads them, and kept until an action changes what they were made from;
 * and what the functions reach (getReqHeader and the like).
 */
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { Budget, type EvaluationScope } from "./cel/evaluation.ts";
import type { PolicyInput } from "./facts.ts";
import { HeaderMap, type WorkingRequest, type WorkingResponse } from "./message.ts";
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
const lengthOf = (v: string | undefined) => (v !== undefined && /^\d{1,15}$/.test(v.trim()) ? BigInt(v.trim()) : -1n);

type Getter = (b: Bindings) => unknown;

/** Each variable's value, from the run's state. */
const GETTERS: Record<string, Getter> = {
  "conn.client_ip": (b) => b.input.conn.clientIp,
  "conn.client_port": (b) => BigInt(b.input.conn.clientPort),
  "conn.server_port": (b) => BigInt(b.input.conn.serverPort),
  "conn.ts.start": (b) => timestampFromMs(b.input.conn.openedAt),
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
  "req.url.query_params": (b) => b.query(),
  "req.query_params": (b) => b.query(),
  "req.headers": (b) => b.headers("req"),
  "req.host": (b) => b.req().host,
  "req.user_agent": (b) => b.req().header("user-agent") ?? "",
  "req.content_type": (b) => mediaType(b.req().header("content-type")),
  "req.content_length": (b) => lengthOf(b.req().header("content-length")),
  "req.cookies": (b) => new Map([...b.cookies()].map(([k, list]) => [k, list.map((c) => new Map(Object.entries(c)))])),
  "req.ts.header_received": (b) => timestampFromMs(b.req().receivedAt),
  "res.status_code": (b) => BigInt(b.res().status),
  "res.headers": (b) => b.headers("res"),
  "res.content_type": (b) => mediaType(b.res().header("content-type")),
  "res.content_length": (b) => lengthOf(b.res().header("content-length")),
  "res.content_encoding": (b) => (b.res().header("content-encoding") ?? "").split(",").map((s) => s.trim()).filter(Boolean),
  "res.location": (b) => b.res().header("location") ?? "",
  "visitor.identity": (b) => b.identity ?? "",
  actions: (b) => ({ ngrok: b.actionVars }),
};

for (const name of Object.keys(VARIABLES)) if (!GETTERS[name]) throw new Error(`the variable ${name} has no value`);

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
        const b = this.bindings;
        const cached = b.cache.get(name);
        if (cached !== undefined || b.cache.has(name)) return cached;
        const value = get(b);
        b.cache.set(name, value);
        return value;
      },
    });
  }
  return proto;
})();

/** One run's variables and what functions reach: the working request and response, the identity, the actions' results. */
export class Bindings implements EvaluationScope {
  readonly cache = new Map<string, unknown>();
  /** The object CEL evaluates against. */
  readonly variables: object;
  /** Action result variables by ngrok's name (`rate_limit`, `basic_auth`, ...): `actions.ngrok.<name>`. */
  readonly actionVars: Record<string, unknown> = {};
  private who: string | undefined;
  /** Who an earlier layer let in: it stays who the visitor is (a later layer's sign-in does not rename it). */
  private readonly outer: string | undefined;
  readonly now: number;
  private headerMaps: { req?: HeaderMap; res?: HeaderMap } = {};
  private queryCache?: Map<string, string[]>;
  private cookieCache?: Map<string, { name: string; value: string }[]>;

  constructor(
    readonly input: PolicyInput,
    readonly budget: Budget,
    readonly request: WorkingRequest | undefined,
    readonly response: WorkingResponse | undefined,
  ) {
    this.now = input.now ?? Date.now();
    this.outer = input.identity;
    this.who = input.identity;
    this.variables = Object.create(VARIABLES_PROTOTYPE, { bindings: { value: this } });
  }

  /** Who the visitor is (`visitor.identity`): the first authentication's answer, an earlier layer's first. */
  get identity(): string | undefined {
    return this.who;
  }

  /** An authentication action let the visitor in as `name` (ignored when an earlier layer already said who). */
  set identity(name: string | undefined) {
    if (this.outer === undefined) this.who = name;
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
    this.cache.clear();
    this.headerMaps = {};
    this.queryCache = undefined;
    this.cookieCache = undefined;
  }

  headers(of: "req" | "res"): HeaderMap {
    let m = this.headerMaps[of];
    if (!m) {
      m = HeaderMap.of(of === "req" ? this.req().headers : this.res().headers);
      this.headerMaps[of] = m;
    }
    return m;
  }

  query(): Map<string, string[]> {
    this.queryCache ??= queryMap(this.req().query);
    return this.queryCache;
  }

  cookies(): Map<string, { name: string; value: string }[]> {
    this.cookieCache ??= cookieMap(this.req().headers.filter(([n]) => n.toLowerCase() === "cookie").map(([, v]) => v).join("; "));
    return this.cookieCache;
  }

  header(of: "req" | "res", name: string): readonly string[] | undefined {
    if (of === "res" && !this.response) return undefined;
    if (of === "req" && !this.request) return undefined;
    return this.headers(of).get(name);
  }

  queryParam(name: string): readonly string[] | undefined {
    return this.request ? this.query().get(name) : undefined;
  }

  cookie(name: string): { name: string; value: string } | undefined {
    return this.request ? this.cookies().get(name)?.[0] : undefined;
  }
}
