/** `burrow http` and `burrow tcp`: parse, connect, print, reconnect, Ctrl-C. */
import { Agent, type AgentTunnel } from "../agent/client.ts";
import type { LocalTarget } from "../agent/http.ts";
import { resolveCredentials, resolveProxy } from "../config/agent.ts";
import type { TunnelRequest } from "../protocol/messages.ts";
import { parseFlags, type FlagSpec } from "../config/flags.ts";
import { HTTP_HELP, TCP_HELP } from "./help.ts";
import { UsageError } from "../config/usage.ts";
import { lineOutput } from "./agent-output/lines.ts";

/** Flags every agent command takes (burrow http, tcp, start). */
export const COMMON: Record<string, FlagSpec> = {
  server: { type: "string" },
  token: { type: "string" },
  proxy: { type: "string" },
  insecure: { type: "boolean" },
};

const HTTP_FLAGS: Record<string, FlagSpec> = {
  ...COMMON,
  subdomain: { type: "string" },
  "skip-warning": { type: "boolean" },
  "host-header": { type: "string" },
  "response-timeout": { type: "string" },
};

const TCP_FLAGS: Record<string, FlagSpec> = { ...COMMON, "remote-port": { type: "string" } };

/** "3000", "localhost:3000", "[::1]:3000", "http://host:3000" -> where the local service is. */
export function parseTarget(raw: string | undefined, allowScheme: boolean): LocalTarget {
  if (raw === undefined) throw new UsageError("missing the local port, e.g. 3000 or localhost:3000");
  let rest = raw;
  let tls = false;
  const scheme = /^([a-z]+):\/\//i.exec(raw);
  if (scheme) {
    if (!allowScheme || !["http", "https"].includes(scheme[1]!.toLowerCase())) throw new UsageError(`'${raw}' is not PORT or HOST:PORT`);
    tls = scheme[1]!.toLowerCase() === "https";
    rest = raw.slice(scheme[0].length).replace(/\/.*$/, "");
  }
  const m = /^(?:(\[[0-9a-f:.]+\]|[a-z0-9.-]+):)?([0-9]{1,5})$/i.exec(rest);
  const port = m ? Number(m[2]) : NaN;
  if (!m || port < 1 || port > 65535) throw new UsageError(`'${raw}' is not PORT or HOST:PORT (port 1-65535)`);
  const host = m[1] ? m[1].replace(/^\[|\]$/g, "") : "localhost";
  return { host, port, tls };
}

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
  // server and token: flags, then the environment, then the config file, then burrow login's file
  const { server, token } = resolveCredentials(
    { server: values.server as string | undefined, token: values.token as string | undefined },
    process.env,
    { server: settings.server, token: settings.token },
  );
  const proxy = resolveProxy((values.proxy as string | undefined) ?? settings.proxy);
  const insecure = Boolean(values.insecure) || Boolean(settings.insecure);
  const agent = new Agent({ server, token, proxy, insecure, tunnels, out: lineOutput() });
  const stop = () => agent.stop();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  const code = await agent.run();
  process.off("SIGINT", stop);
  process.off("SIGTERM", stop);
  return code;
}

export async function httpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, HTTP_FLAGS);
  if (values.help) return void process.stdout.write(HTTP_HELP), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const target = parseTarget(positionals[0], true);
  const hostHeader = values["host-header"] as string | undefined;
  if (hostHeader !== undefined && hostHeader.trim() === "") throw new UsageError("--host-header needs 'rewrite' or a host name");
  target.hostHeader = hostHeader;
  const subdomain = values.subdomain as string | undefined;
  const tunnel: TunnelRequest = { protocol: "http", subdomain, skipWarning: Boolean(values["skip-warning"]) };
  const timeout = values["response-timeout"] as string | undefined;
  if (timeout !== undefined) {
    const seconds = /^[0-9]{1,5}(\.[0-9]+)?$/.test(timeout) ? Number(timeout) : Number.NaN;
    if (!(seconds >= 0.1 && seconds <= 86_400)) throw new UsageError(`--response-timeout must be a number of seconds from 0.1 to 86400 (got '${timeout}')`);
    tunnel.responseTimeout = seconds;
  }
  return runAgent([{ name: "http", request: tunnel, target }], values);
}

export async function tcpCommand(argv: string[]): Promise<number> {
  const { values, positionals } = parseFlags(argv, TCP_FLAGS);
  if (values.help) return void process.stdout.write(TCP_HELP), 0;
  if (positionals.length > 1) throw new UsageError(`unexpected argument '${positionals[1]}'`);
  const target = parseTarget(positionals[0], false);
  const raw = values["remote-port"] as string | undefined;
  let port: number | undefined;
  if (raw !== undefined) {
    port = Number(raw);
    if (!/^[0-9]{1,5}$/.test(raw) || port < 1 || port > 65535) throw new UsageError(`--remote-port must be a port number from 1 to 65535 (got '${raw}')`);
  }
  return runAgent([{ name: "tcp", request: { protocol: "tcp", port }, target }], values);
}
