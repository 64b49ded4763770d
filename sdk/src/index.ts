/**
 * burrow-agent: burrow's agent as a library, for Node.js 20+ and Bun. The
 * same agent the `burrow` executable runs (src/agent/client.ts), with the
 * runtime picked at load: Bun's own sockets on Bun, node:net, node:tls,
 * node:dgram and `ws` on Node.js (src/runtime/).
 *
 *   const tunnel = await forward({ port: 3000, subdomain: "demo" });
 *   tunnel.url; // "https://demo.tunnels.example.com"
 *   await tunnel.close();
 */
import { EventEmitter } from "node:events";
import { Agent, type AgentTunnel } from "../../src/agent/client.ts";
import type { AgentOutput, ReadyView, RequestEvent, TunnelView } from "../../src/agent/output.ts";
import { BurrowError, checked } from "./errors.ts";
import { credentials, type Credentials } from "./credentials.ts";
import {
  ACCESS_LIST_MAX,
  oidcSettings,
  parseBasicAuth,
  parseCidr,
  parseEmailRule,
  parseHeaderLine,
  parseHeaderName,
  parseHostHeader,
  parseUpstreamProtocol,
  parseIssuer,
  parseRemotePort,
  parseResponseTimeout,
  parseTarget,
  parseUpgradeToken,
  tooManyEntries,
} from "../../src/agent/settings/tunnel-options.ts";
import { parseKind, specProblem, tunnelOf, type TunnelSpec, type Voice } from "../../src/agent/settings/tunnel-spec.ts";
import { AGENT_KINDS } from "../../src/agent/kinds/index.ts";
import { readUpstreamH2 } from "../../src/agent/settings/upstream-h2.ts";
import type { TunnelKind } from "../../src/protocol/kinds.ts";
import { useRuntime } from "../../src/runtime/current.ts";
import { nodeRuntime } from "../../src/runtime/node.ts";
import { DEFAULT_KEEP, MAX_KEEP } from "../../src/agent/inspector/limits.ts";
import { serveInspector, type Inspector } from "../../src/agent/inspector/server.ts";
// the package's types are its declarations (index.d.ts, what users' editors see); the code implements them
import type { ConnectOptions, ForwardOptions, ReachedEvents, ReachOptions, RequestInfo, TunnelEvents } from "../index.d.ts";

export type { ConnectOptions, ForwardOptions, ReachedEvents, ReachOptions, RequestInfo, TunnelEvents };

/** A tunnel's kind: the kind table's names (the declarations write them out; test/sdk/declarations.test.ts holds them to these). */
export type Protocol = TunnelKind;

// on Node.js, the agent's sockets, WebSocket and UDP are Node's (Bun's are the default)
if (typeof (globalThis as { Bun?: unknown }).Bun === "undefined") useRuntime(nodeRuntime);

export { BurrowError } from "./errors.ts";
export { reach, Reached } from "./reach.ts";

export class Tunnel extends EventEmitter<TunnelEvents> {
  /** Where visitors reach it: "https://demo.tunnels.example.com", or "tunnels.example.com:20001" for tcp. */
  url = "";
  /** For tcp and udp: the public port. */
  port?: number;
  /** The request inspector's address, when its session has one (`inspect`). */
  inspector?: string;
  readonly protocol: Protocol;

  /** @internal */
  constructor(
    protocol: Protocol,
    private readonly closer: () => Promise<void>,
  ) {
    super();
    this.protocol = protocol;
  }

  /** Closes the tunnel (and its connection to the server when it was the last one on it); the name is free again at once. */
  close(): Promise<void> {
    return this.closer();
  }
}

/** Each value of a list option, checked as the CLI checks its flag; a mistake is a TypeError naming the option. */
function each<T>(o: ForwardOptions, option: keyof ForwardOptions, key: string, parse: (raw: string) => T): T[] {
  const given = o[option];
  if (given === undefined) return [];
  if (!Array.isArray(given) || given.some((x) => typeof x !== "string")) throw new TypeError(`${option} must be a list of strings`);
  const max = ACCESS_LIST_MAX[key];
  if (max !== undefined && given.length > max) throw new TypeError(`${option}: ${tooManyEntries(max, given.length)}`);
  return given.map((raw: string) => {
    try {
      return parse(raw);
    } catch (err) {
      throw new TypeError(`${option}: ${(err as Error).message}`);
    }
  });
}

/** A policy option as the text the server loads: a string as it is, an object as JSON. */
function policyText(policy: string | Record<string, unknown>): string {
  if (typeof policy === "string") return policy;
  if (typeof policy !== "object" || policy === null || Array.isArray(policy)) throw new Error("must be the policy's YAML or JSON text, or an object");
  return JSON.stringify(policy);
}

/** The options' words for the spec's messages: each option by its own name. */
const OPTION_VOICE: Voice = { name: (option) => option, on: (option) => `${option}: true` };

/** An option given, checked by `parse`; undefined when not given. */
function one<T>(o: ForwardOptions, option: keyof ForwardOptions, parse: (raw: string) => T): T | undefined {
  const given = o[option];
  return given === undefined ? undefined : checked(option, () => parse(String(given)));
}

/** What forward() needs of a tunnel, checked before anything connects: the options read onto the one tunnel spec (src/agent/settings/tunnel-spec.ts). */
function agentTunnel(options: ForwardOptions): { protocol: Protocol; tunnel: Omit<AgentTunnel, "name"> } {
  const protocol: Protocol = checked("protocol", () => parseKind(options.protocol ?? "http"));
  const where = options.addr ?? (options.port !== undefined ? String(options.port) : undefined);
  let target: AgentTunnel["target"];
  if (options.handler !== undefined) {
    if (typeof options.handler !== "function") throw new TypeError("handler must be a function (request: Request) => Response");
    if (protocol !== "http") throw new TypeError(`a handler serves http tunnels, not ${protocol}`);
    if (where !== undefined) throw new TypeError("give a handler or a port (or addr), not both");
    // no local port: the agent hands each request to the function (src/agent/handler-stream.ts)
    target = { host: "localhost", port: 0, handler: options.handler };
  } else {
    if (where === undefined) throw new TypeError("forward() needs port, addr or handler");
    target = checked(options.addr !== undefined ? "addr" : "port", () => parseTarget(where, AGENT_KINDS[protocol].urlTarget));
  }
  const o = options;
  const list = <T>(option: keyof ForwardOptions, key: string, parse: (raw: string) => T): T[] | undefined => (o[option] === undefined ? undefined : each(o, option, key, parse));
  let oidc: TunnelSpec["oidc"];
  if (o.oidc !== undefined) {
    oidc = checked("oidc", () =>
      oidcSettings(
        { issuer: o.oidc!.issuer === undefined ? undefined : parseIssuer(o.oidc!.issuer), clientId: o.oidc!.clientId, clientSecret: o.oidc!.clientSecret, allowEmails: (o.oidc!.allowEmails ?? []).map(parseEmailRule) },
        { issuer: "oidc.issuer", clientId: "oidc.clientId", clientSecret: "oidc.clientSecret", allowEmails: "oidc.allowEmails" },
      ),
    );
  }
  const spec: TunnelSpec = {
    kind: protocol,
    target,
    subdomain: o.subdomain,
    hostname: o.hostname,
    remotePort: one(o, "remotePort", parseRemotePort),
    private: o.private || undefined,
    name: o.name,
    share: o.share,
    hostHeader: one(o, "hostHeader", parseHostHeader),
    upstreamProtocol: one(o, "upstreamProtocol", parseUpstreamProtocol),
    ...readUpstreamH2((option, parse) => one(o, option, parse)),
    allowUpgrade: list("allowUpgrade", "allow_upgrade", parseUpgradeToken),
    skipWarning: o.skipWarning,
    responseTimeout: one(o, "responseTimeout", parseResponseTimeout),
    basicAuth: list("basicAuth", "basic_auth", parseBasicAuth),
    allowCidr: list("allowCidr", "allow_cidr", parseCidr),
    denyCidr: list("denyCidr", "deny_cidr", parseCidr),
    requestHeaderAdd: list("requestHeaderAdd", "request_header_add", parseHeaderLine),
    requestHeaderRemove: list("requestHeaderRemove", "request_header_remove", parseHeaderName),
    responseHeaderAdd: list("responseHeaderAdd", "response_header_add", parseHeaderLine),
    oidc,
    policy: o.policy === undefined ? undefined : checked("policy", () => policyText(o.policy!)),
  };
  for (const key of Object.keys(spec) as (keyof TunnelSpec)[]) if (spec[key] === undefined) delete spec[key];
  const problem = specProblem(spec, OPTION_VOICE);
  if (problem) throw new TypeError(problem.option ? `${problem.option}: ${problem.message}` : problem.message);
  const { request } = checked("allowUpgrade", () => tunnelOf(spec));
  return { protocol, tunnel: { request, target, inspect: false } };
}

interface Entry {
  tunnel: Tunnel;
  asked: AgentTunnel;
  live: boolean;
  resolve(t: Tunnel): void;
  reject(err: unknown): void;
  /** Takes it off its AbortSignal. */
  unhook(): void;
}

/**
 * One connection to the server carrying several tunnels (a HELLO asks for
 * all of them). Tunnels asked for in the same turn go in one HELLO; one
 * asked for or closed later is added to or removed from the live
 * connection alone, and requests in flight on the others go on (a server
 * older than that: the connection starts again with the new list, and
 * those requests are cut). Made by connect(); forward() makes one of its own.
 */
export class Session {
  private agent: Agent | undefined;
  private done: Promise<number> | undefined;
  private readonly entries = new Map<string, Entry>();
  private next = 1;
  /** The change asked for in this turn, carried out once the turn is over. */
  private scheduled: Promise<void> | undefined;
  /** The connection was lost (or the server restarting): the next READY is "online" for the live tunnels. */
  private down = false;
  private refusal: BurrowError | undefined;
  private closing = false;

  /** The session's request inspector, when it has one: started with the session, for all its tunnels. */
  private readonly inspector: Promise<Inspector | undefined>;

  /** @internal */
  constructor(
    private readonly creds: Credentials,
    inspect?: InspectSetting,
    /** forward()'s own session: it ends with its one tunnel, inspector and all. */
    private readonly owned = false,
  ) {
    const at = inspect === undefined || inspect === false ? undefined : inspectAt(inspect);
    this.inspector = at ? serveInspector(at) : Promise.resolve(undefined);
    // a failure is each tunnel's to hear of (start()); never unhandled
    this.inspector.catch(() => {});
  }

  /** Opens a tunnel on this session's connection: as forward(), without `server`, `token`, `insecure` and `proxy`. */
  forward(options: ForwardOptions): Promise<Tunnel> {
    if (options.inspect !== undefined) return Promise.reject(new TypeError("inspect is the session's: connect({ inspect: true })"));
    if (options.proxy !== undefined) return Promise.reject(new TypeError("proxy is the session's: connect({ proxy })"));
    try {
      return this.open(options, agentTunnel(options));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** @internal A tunnel whose options were checked (agentTunnel), asked for on this session's connection. */
  open(options: ForwardOptions, checked: ReturnType<typeof agentTunnel>): Promise<Tunnel> {
    if (this.closing) return Promise.reject(new BurrowError("CLOSED", "the session is closed"));
    if (options.signal?.aborted) return Promise.reject(options.signal.reason ?? new Error("aborted"));
    const name = `t${this.next++}`;
    const made = { protocol: checked.protocol, tunnel: { ...checked.tunnel, name } };
    return new Promise<Tunnel>((resolve, reject) => {
      const tunnel = new Tunnel(made.protocol, () => this.closeTunnel(name));
      const onAbort = () => void tunnel.close();
      options.signal?.addEventListener("abort", onAbort, { once: true });
      this.entries.set(name, { tunnel, asked: made.tunnel, live: false, resolve, reject, unhook: () => options.signal?.removeEventListener("abort", onAbort) });
      void this.schedule();
    });
  }

  /** Closes every tunnel of the session and its connection, and its inspector. */
  async close(): Promise<void> {
    this.closing = true;
    await this.disconnect();
    (await this.inspector.catch(() => undefined))?.stop();
  }

  /**
   * Ends the connection as stop() does (GOAWAY: the server frees the names
   * at once), then every tunnel left is "closed": after the names are free.
   */
  private async disconnect(): Promise<void> {
    this.agent?.stop();
    await this.done;
    for (const [name] of [...this.entries]) this.end(name, {});
  }

  private async closeTunnel(name: string): Promise<void> {
    if (!this.entries.has(name)) return;
    // the last one: the connection goes too (until the next forward(), for connect()'s sessions)
    if (this.entries.size === 1) return this.owned ? this.close() : this.disconnect();
    this.end(name, {});
    // the others go on; the name is free once the server has answered its REMOVE
    await this.schedule();
  }

  /** A tunnel is over: rejected if it never was live, else told "closed". */
  private end(name: string, why: { code?: string; message?: string }, refusal?: Error): void {
    const e = this.entries.get(name);
    if (!e) return;
    this.entries.delete(name);
    e.unhook();
    if (!e.live) e.reject(refusal ?? new BurrowError(why.code ?? "CLOSED", why.message ?? "closed before it was live"));
    else e.tunnel.emit("closed", why);
  }

  /** The tunnels asked for changed: once this turn is over, the connection asks for the new list; settles when that is through. */
  private schedule(): Promise<void> {
    this.scheduled ??= new Promise<void>((resolve) =>
      queueMicrotask(() => {
        this.scheduled = undefined;
        this.apply().then(resolve, resolve);
      }),
    );
    return this.scheduled;
  }

  /** A start under way (the inspector first, when there is one): what asks meanwhile waits for it. */
  private starting: Promise<void> | undefined;

  private async apply(): Promise<void> {
    if (this.starting) await this.starting;
    const asked = [...this.entries.values()].map((e) => e.asked);
    if (asked.length === 0) return;
    if (this.agent) return void (await this.agent.retune(asked));
    this.starting = this.start(asked);
    await this.starting;
    this.starting = undefined;
  }

  private async start(asked: AgentTunnel[]): Promise<void> {
    this.refusal = undefined;
    this.down = false;
    let inspector: Inspector | undefined;
    try {
      inspector = await this.inspector;
    } catch (err) {
      for (const [name] of [...this.entries]) this.end(name, {}, err instanceof Error ? new TypeError(err.message) : new TypeError(String(err)));
      return;
    }
    if (this.entries.size === 0) return;
    if (inspector) for (const e of this.entries.values()) e.tunnel.inspector = inspector.url;
    const out = this.output();
    const tunnels = [...this.entries.values()].map((e) => ({ ...e.asked, inspect: Boolean(inspector) }));
    const agent = new Agent({
      server: this.creds.server,
      token: this.creds.token,
      insecure: this.creds.insecure,
      ...(this.creds.proxy ? { proxy: this.creds.proxy } : {}),
      tunnels,
      out: inspector ? inspector.watch(out) : out,
      ...(inspector ? { inspector: inspector.store } : {}),
    });
    this.agent = agent;
    this.done = agent.run().then(
      (code) => {
        if (this.agent === agent) this.agent = undefined;
        const why = code === 0 || !this.refusal ? {} : { code: this.refusal.code, message: this.refusal.message };
        for (const [name] of [...this.entries]) this.end(name, why, this.refusal ?? new BurrowError("CLOSED", "the connection closed before the tunnel was live"));
        return code;
      },
      (err) => {
        if (this.agent === agent) this.agent = undefined;
        for (const [name] of [...this.entries]) this.end(name, { code: "FAILED", message: String(err) }, new BurrowError("FAILED", String(err)));
        return 1;
      },
    );
  }

  private output(): AgentOutput {
    const live = () => [...this.entries.values()].filter((e) => e.live);
    const reconnecting = (e: { why: string; inMs: number; attempt: number }) => {
      this.down = true;
      for (const t of live()) t.tunnel.emit("reconnecting", e);
    };
    const live_ = (view: TunnelView) => {
      const e = this.entries.get(view.name);
      if (!e) return;
      e.tunnel.url = view.url;
      if (view.port !== undefined) e.tunnel.port = view.port;
      if (e.live) return false;
      e.live = true;
      e.resolve(e.tunnel);
      return true;
    };
    return {
      // a tunnel added on the live connection (forward() after the first turn)
      tunnelAdded: (view: TunnelView) => void live_(view),
      ready: (r: ReadyView) => {
        const wasDown = this.down;
        this.down = false;
        for (const view of r.tunnels) {
          if (live_(view) === false && wasDown) this.entries.get(view.name)?.tunnel.emit("online");
        }
      },
      request: (e: RequestEvent) => this.entries.get(e.tunnel)?.tunnel.emit("request", { method: e.method, path: e.path, status: e.status, duration: e.ms }),
      connection() {},
      reconnecting: (why, inMs, attempt) => {
        // a server that cannot be reached when nothing was ever live here: the callers hear of it, and it stops
        if (live().length === 0) {
          this.refusal = new BurrowError("UNREACHABLE", why);
          this.agent?.stop();
          return;
        }
        reconnecting({ why, inMs, attempt });
      },
      // a server that restarts says so (DRAIN): the agent connects again at once, quickly, without backoff
      restarting: () => reconnecting({ why: "the server is restarting", inMs: 0, attempt: 0 }),
      refused: (code, message) => void (this.refusal = new BurrowError(code, message)),
      tunnelRefused: (name, code, message) => this.end(name, { code, message }, new BurrowError(code, message)),
    };
  }
}

/**
 * One connection to the server for several tunnels: `session.forward()`
 * opens each (as forward() does), `session.close()` closes them all.
 */
export function connect(options: ConnectOptions = {}): Session {
  const creds = credentials(options);
  if (options.inspect !== undefined) inspectAt(options.inspect);
  return new Session(creds, options.inspect);
}

type InspectSetting = NonNullable<ForwardOptions["inspect"]>;

/** Where the inspector listens and what it keeps: 127.0.0.1 on any free port unless given, 1000 requests. */
function inspectAt(inspect: InspectSetting): { host: string; port: number; keep: number } | undefined {
  if (inspect === false) return undefined;
  if (inspect === true) return { host: "127.0.0.1", port: 0, keep: DEFAULT_KEEP };
  if (typeof inspect !== "object" || inspect === null) throw new TypeError("inspect must be true, false or { host?, port?, keep? }");
  const port = inspect.port ?? 0;
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new TypeError(`inspect.port must be a port number from 0 to 65535 (got ${String(inspect.port)})`);
  const keep = inspect.keep ?? DEFAULT_KEEP;
  if (!Number.isInteger(keep) || keep < 1 || keep > MAX_KEEP) throw new TypeError(`inspect.keep must be a number of requests from 1 to ${MAX_KEEP}`);
  return { host: inspect.host ?? "127.0.0.1", port, keep };
}

/**
 * Opens a tunnel to a local service (or a handler) on a connection of its
 * own; resolves once it is live (rejects with a BurrowError carrying the
 * refusal's code). Afterwards it reconnects as the `burrow` command does,
 * and says so with "reconnecting" and "online".
 */
export function forward(options: ForwardOptions): Promise<Tunnel> {
  try {
    // the tunnel's settings first: a mistake there is the caller's, before credentials are looked for
    const checked = agentTunnel(options);
    const creds = credentials(options);
    if (options.inspect !== undefined) inspectAt(options.inspect);
    return new Session(creds, options.inspect, true).open(options, checked);
  } catch (err) {
    return Promise.reject(err);
  }
}
