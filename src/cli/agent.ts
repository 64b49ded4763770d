/** `burrow http` and `burrow tcp`: parse, connect, print, reconnect, Ctrl-C. */
import { Agent, type AgentTunnel } from "../agent/client.ts";
import type { LocalTarget } from "../agent/http.ts";
import { resolveCredentials, resolveProxy } from "../agent/settings/server-and-token.ts";
import * as v from "valibot";
import { TunnelRequest, type PrivateRequest } from "../protocol/messages.ts";
import { PRIVATE_NAME_PATTERN } from "../validate/fields.ts";
import { MAX_PAYLOAD } from "../protocol/wire.ts";
import { parseFlags } from "../config/flags.ts";
import { HTTP_DOC, HTTP_FLAGS, TCP_DOC, TCP_FLAGS, TLS_DOC, TLS_FLAGS, UDP_DOC, UDP_FLAGS } from "./agent-flags.ts";
import { helpText } from "./usage.ts";
import { UsageError } from "../usage-error.ts";
import { allowUpgrades, parseHostHeader, parseRemotePort, parseResponseTimeout, parseRoute, parseTarget, parseTunnelHostname, parseUpgradeToken } from "../agent/settings/tunnel-options.ts";
import { checkRoutes } from "../agent/routes.ts";
import type { HealthSettings } from "../agent/health.ts";

/** A tunnel option's check, its message led by the flag's name. */
/** --drain-timeout in ms (a pool member's leaving), or undefined where the command has no such flag. */
function drainTimeout(values: Record<string, unknown>): number | undefined {
  const text = values["drain-timeout"] as string | undefined;
  if (text === undefined) return undefined;
  const s = /^[0-9]{1,4}$/.test(text) ? Number(text) : NaN;
  if (!(s >= 0 && s <= 3600)) throw new UsageError(`--drain-timeout must be a whole number of seconds from 0 to 3600 (got '${text.slice(0, 40)}')`);
  return s * 1000;
}

/** --health-check and --health-interval: a pool member's health check, or none. */
function healthFlags(values: Record<string, unknown>): { health?: HealthSettings } {
  const check = values["health-check"] as string | undefined;
  const intervalText = (values["health-interval"] as string | undefined) ?? "5";
  const interval = /^[0-9]{1,4}$/.test(intervalText) ? Number(intervalText) : NaN;
  if (!(interval >= 1 && interval <= 3600)) throw new UsageError(`--health-interval must be a whole number of seconds from 1 to 3600 (got '${intervalText.slice(0, 40)}')`);
  if (check === undefined) return {};
  if (!values.pool) throw new UsageError("--health-check goes with --pool: it takes a pool member out of rotation");
  if (check !== "tcp" && !/^\/[\x21-\x7e]*$/.test(check)) throw new UsageError(`--health-check must be a path such as /healthz, or tcp (got '${check.replace(/[^\x20-\x7e]/g, "?").slice(0, 60)}')`);
  return { health: { check, intervalMs: interval * 1000 } };
}

/** --pool and --pool-balance, as the request says them. */
function poolFlags(values: Record<string, unknown>): { pool?: true; balance?: "round-robin" | "least-requests" } {
  const balance = (values["pool-balance"] as string | undefined) ?? "round-robin";
  if (balance !== "round-robin" && balance !== "least-requests") throw new UsageError(`--pool-balance must be round-robin or least-requests (got '${balance.slice(0, 40)}')`);
  if (!values.pool) {
    if (values["pool-balance"] !== undefined && balance !== "round-robin") throw new UsageError("--pool-balance goes with --pool");
    return {};
  }
  return { pool: true, balance };
}

/** --hostname, checked as the server checks it (one name, no wildcard). */
function hostnameFlag(values: Record<string, unknown>): string | undefined {
  const raw = values.hostname as string | undefined;
  return raw === undefined ? undefined : flagValue("--hostname", () => parseTunnelHostname(raw));
}

function flagValue<T>(flag: string, check: () => T): T {
  try {
    return check();
  } catch (err) {
    if (err instanceof UsageError) throw new UsageError(`${flag} ${err.message}`);
    throw err;
  }
}
import { chooseOutput, openOutput } from "./agent-output/choose.ts";
import { announceInspector, inspectChoice, openInspector } from "./inspect-flags.ts";
import { httpAccessFromFlags, tcpAccessFromFlags } from "./access-flags.ts";

/** What the agent connects with. `server` and `token` are the flags' (or a config file's) when given. */
export interface AgentSettings {
  server?: string;
  token?: string;
  proxy?: string;
  insecure?: boolean;
}

/**
 * Runs the agent with these tunnels until Ctrl-C (exit 0) or a refusal it
 * cannot get past (exit 1). `values`: the parsed COMMON flags, shared by
 * burrow http, tcp and start.
 */
export async function runAgent(tunnels: AgentTunnel[], values: Record<string, unknown>, settings: AgentSettings = {}): Promise<number> {
  const drainTimeoutMs = drainTimeout(values);
  const logChoice = chooseOutput({ log: values.log as string | undefined, logLevel: values["log-level"] as string | undefined }, process.stdout);
  // server and token: flags, then the environment, then the config file, then burrow login's file
  const { server, token } = resolveCredentials(
    { server: values.server as string | undefined, token: values.token as string | undefined },
    process.env,
    { server: settings.server, token: settings.token },
  );
  const proxy = resolveProxy((values.proxy as string | undefined) ?? settings.proxy);
  checkHandshake(tunnels);
  const insecure = Boolean(values.insecure) || Boolean(settings.insecure);
  const inspecting = openInspector(inspectChoice(values));
  const printed = openOutput(logChoice, server);
  const inspector = announceInspector(inspecting, printed);
  const out = inspector ? inspector.watch(printed) : printed;
  const stop = () => agent.stop();
  let agent: Agent;
  try {
    agent = new Agent({ server, token, proxy, insecure, tunnels, out, inspector: inspector?.store, drainTimeoutMs });
    process.once("SIGINT", stop);
    process.once("SIGTERM", stop);
    return await agent.run();
  } finally {
    process.off("SIGINT", stop);
    process.off("SIGTERM", stop);
    inspector?.stop();
    // the terminal back as it was (the screen), then a refusal where it stays in sight
    await printed.finish();
  }
}

/**
 * The HELLO carries every tunnel's settings in one frame: settings the
 * protocol does not take (a header value or password longer than it carries)
 * or too many bytes in all would otherwise be a refused handshake or a frame
 * that cannot be sent. Caught here, before anything connects, as a usage
 * error naming the tunnel; no value is quoted back (they may be secrets).
 */
export function checkHandshake(tunnels: AgentTunnel[]): void {
  for (const t of tunnels) {
    const parsed = v.safeParse(TunnelRequest, t.request);
    if (!parsed.success) {
      const issue = parsed.issues[0]!;
      throw new UsageError(`tunnel '${t.name}': ${v.getDotPath(issue) ?? "its settings"}: ${issue.message} (more than the protocol carries)`);
    }
  }
  const bytes = Buffer.byteLength(JSON.stringify(tunnels.map((t) => t.request)));
  if (bytes > HELLO_TUNNELS_MAX_BYTES) {
    throw new UsageError(
      `the tunnels' settings take ${Math.ceil(bytes / 1024)} KiB, more than one handshake carries (${HELLO_TUNNELS_MAX_BYTES / 1024} KiB): fewer or shorter access rules`,
    );
  }
}

/** A HELLO frame's payload is at most MAX_PAYLOAD; the token and its other fields take well under 4 KiB of it. */
const HELLO_TUNNELS_MAX_BYTES = MAX_PAYLOAD - 4096;

export async function httpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, HTTP_FLAGS);
  if (values.help) return void process.stdout.write(helpText(HTTP_DOC)), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const target = parseTarget(positionals[0], true);
  const hostHeader = values["host-header"] as string | undefined;
  if (hostHeader !== undefined) target.hostHeader = flagValue("--host-header", () => parseHostHeader(hostHeader));
  const routes = ((values.route as string[] | undefined) ?? []).map((raw) => flagValue("--route", () => parseRoute(raw)));
  if (routes.length > 0) target.routes = flagValue("--route", () => checkRoutes(routes));
  const subdomain = values.subdomain as string | undefined;
  const hostname = hostnameFlag(values);
  const priv = privateFlags(values, target.port);
  if (priv) {
    const publicFlag = ["subdomain", "hostname", "pool", "skip-warning", "response-timeout"].find((f) => values[f] !== undefined && values[f] !== false);
    if (publicFlag) throw new UsageError(`--private has no public name: --${publicFlag} does not go with it`);
    // the server never reads a private tunnel's requests: who may reach it is who it is shared with
    if (httpAccessFromFlags(values)) throw new UsageError("--private: access rules (--basic-auth, --oidc-*, --allow-cidr, ...) do not go with it; --share says who may connect");
  }
  const tunnel: TunnelRequest = priv
    ? { protocol: "http", private: priv }
    : { protocol: "http", subdomain, ...(hostname ? { hostname } : {}), ...poolFlags(values), skipWarning: Boolean(values["skip-warning"]) };
  const timeout = values["response-timeout"] as string | undefined;
  if (timeout !== undefined) tunnel.responseTimeout = flagValue("--response-timeout", () => parseResponseTimeout(timeout));
  const access = httpAccessFromFlags(values);
  if (access) tunnel.access = access;
  const upgrades = ((values["allow-upgrade"] as string[] | undefined) ?? []).map((raw) => flagValue("--allow-upgrade", () => parseUpgradeToken(raw)));
  flagValue("--allow-upgrade", () => allowUpgrades(tunnel, target, upgrades));
  return runAgent([{ name: "http", request: tunnel, target, ...healthFlags(values) }], values);
}

/** --private, --name, --share as a private tunnel's request; undefined without --private. */
function privateFlags(values: Record<string, unknown>, localPort: number | undefined): PrivateRequest | undefined {
  const name = values.name as string | undefined;
  const share = values.share as string | undefined;
  if (!values.private) {
    if (name !== undefined || share !== undefined) throw new UsageError(`--${name !== undefined ? "name" : "share"} goes with --private`);
    return undefined;
  }
  if (name === undefined) throw new UsageError("--private needs --name NAME: connectors reach it as you/NAME");
  const lower = name.trim().toLowerCase();
  if (!PRIVATE_NAME_PATTERN.test(lower)) throw new UsageError(`--name: '${name}' must be 1-63 characters from a-z, 0-9 and -`);
  const users = (share ?? "").split(",").map((u) => u.trim()).filter((u) => u !== "");
  if (users.length > 64) throw new UsageError("--share: 64 usernames at most");
  return { name: lower, ...(users.length > 0 ? { share: users } : {}), ...(localPort !== undefined ? { localPort } : {}) };
}

export async function tcpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, TCP_FLAGS);
  if (values.help) return void process.stdout.write(helpText(TCP_DOC)), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const target = parseTarget(positionals[0], false);
  const raw = values["remote-port"] as string | undefined;
  const port = raw === undefined ? undefined : flagValue("--remote-port", () => parseRemotePort(raw));
  const access = tcpAccessFromFlags(values);
  if (values["proxy-protocol"]) target.proxyProtocol = true;
  const pooled = poolFlags(values);
  const priv = privateFlags(values, target.port);
  if (priv && (port !== undefined || pooled.pool)) throw new UsageError("--private has no public port: --remote-port and --pool do not go with it");
  if (pooled.pool && port === undefined) throw new UsageError("--pool on a tcp tunnel needs --remote-port: the port is the pool's name");
  if (priv) return runAgent([{ name: "tcp", request: { protocol: "tcp", private: priv, ...(access ? { access } : {}) }, target }], values);
  return runAgent([{ name: "tcp", request: { protocol: "tcp", port, ...pooled, ...(access ? { access } : {}) }, target, ...healthFlags(values) }], values);
}

export async function tlsCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, TLS_FLAGS);
  if (values.help) return void process.stdout.write(helpText(TLS_DOC)), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const target = parseTarget(positionals[0], false);
  if (values["proxy-protocol"]) target.proxyProtocol = true;
  const access = tcpAccessFromFlags(values);
  const subdomain = values.subdomain as string | undefined;
  const hostname = hostnameFlag(values);
  return runAgent([{ name: "tls", request: { protocol: "tls", subdomain, ...(hostname ? { hostname } : {}), ...(access ? { access } : {}) }, target }], values);
}

export async function udpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, UDP_FLAGS);
  if (values.help) return void process.stdout.write(helpText(UDP_DOC)), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const localHost = values["local-host"] as string | undefined;
  if (localHost !== undefined && positionals[0]?.includes(":")) throw new UsageError("give the local host either as HOST:PORT or as --local-host, not both");
  const target = parseTarget(localHost === undefined || positionals[0] === undefined ? positionals[0] : `${localHost.includes(":") ? `[${localHost}]` : localHost}:${positionals[0]}`, false);
  const raw = values["remote-port"] as string | undefined;
  const port = raw === undefined ? undefined : flagValue("--remote-port", () => parseRemotePort(raw));
  const access = tcpAccessFromFlags(values);
  const priv = privateFlags(values, target.port);
  if (priv && port !== undefined) throw new UsageError("--private has no public port: --remote-port does not go with it");
  return runAgent([{ name: "udp", request: { protocol: "udp", ...(priv ? { private: priv } : { port }), ...(access ? { access } : {}) }, target }], values);
}
